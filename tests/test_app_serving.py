"""What the server shares and cleans up: session folders (tokens, sweeping, SIGTERM), admission to a single
GPU model, the listening address, and the stand-in's pure decision rule."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from demo.app import session_files
from kame_core.frontends.standin.deciding import common_prefix, decide, first_contradiction
from kame_core.session import SessionGate
from kame_core.settings import Settings
from kame_core.testing.waiting import wait_until


# --------------------------------------------------------------------------------------- session files
def test_a_session_file_is_served_only_by_its_token_and_plain_name(tmp_path):
    folder = session_files.new_folder()
    (folder / "mix.wav").write_bytes(b"RIFF")
    token = folder.name
    assert session_files.url_of(folder / "mix.wav") == f"kame/files/{token}/mix.wav"
    assert session_files.resolve(token, "mix.wav") == folder / "mix.wav"
    (folder / "link.wav").symlink_to(tmp_path)
    for bad in [(token, "../mix.wav"), (token, ".hidden"), (token, "link.wav"), (token, "missing.wav"),
                ("A" * 24, "mix.wav"), ("..", "mix.wav"), (token[:-1], "mix.wav")]:
        assert session_files.resolve(*bad) is None, bad


def test_idle_session_folders_are_swept_and_used_ones_kept():
    idle, used = session_files.new_folder(), session_files.new_folder()
    old = time.time() - 7200
    os.utime(idle, (old, old))
    os.utime(used, (old, old))
    session_files.touch(used)
    assert session_files.sweep_idle(ttl_s=3600) >= 1
    assert not idle.exists() and used.exists()


def test_folders_of_dead_processes_are_swept_at_start():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = session_files.app_root() / dead.stdout.strip() / ("x" * 24)
    stale.mkdir(parents=True)
    assert session_files.sweep_stale_processes() >= 1 and not stale.parent.exists()
    assert session_files.files_root().is_dir()       # this process's folder is never swept


def test_sigterm_removes_the_process_folder():
    script = textwrap.dedent("""
        import sys, time
        from demo.app import session_files
        session_files.Janitor().start()
        (session_files.new_folder() / "a.wav").write_bytes(b"x")
        print(session_files.files_root(), flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(__file__)))
    root = proc.stdout.readline().strip()
    assert os.path.isdir(root)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)  # at idle priority beside the real-time tests it once needed more than 20 s
    assert not os.path.exists(root)


# ------------------------------------------------------------------------------------------------ gate
def test_a_single_gpu_model_admits_one_session_and_says_how_many_wait() -> None:
    gate = SessionGate(capacity=1, reason="one live session at a time on the GPU model")
    first = gate.try_enter()
    assert first is not None and gate.try_enter() is None
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(gate.enter(timeout_s=10)))
    waiter.start()
    wait_until(lambda: gate.waiting == 1, what="the second session to queue")
    assert gate.waiting == 1 and "2 session(s) ahead" in gate.busy_message() and "GPU" in gate.busy_message()
    first.release()
    first.release()                                   # idempotent: does not free a second place
    waiter.join(5)
    assert got and got[0] is not None and gate.active == 1
    assert gate.try_enter() is None
    got[0].release()
    assert gate.enter(timeout_s=0.01) is not None


def test_the_cpu_stack_admits_every_session_at_once():
    gate = SessionGate()
    tickets = [gate.try_enter() for _ in range(20)]
    assert all(tickets) and gate.active == 20


# --------------------------------------------------------------------------------------------- address
@pytest.mark.parametrize("env,expected", [
    ({}, ("127.0.0.1", 7860)),
    ({"GRADIO_SERVER_NAME": "0.0.0.0", "GRADIO_SERVER_PORT": "7861"}, ("0.0.0.0", 7861)),
    ({"KAME_HOST": "10.0.0.2", "KAME_PORT": "9000", "GRADIO_SERVER_PORT": "7861"}, ("10.0.0.2", 9000)),
    ({"PORT": "8080"}, ("127.0.0.1", 8080)),
])
def test_the_listening_address_follows_kame_then_gradio_variables(env, expected):
    assert Settings.from_env(env).server.address() == expected


@pytest.mark.parametrize("port", ["http", "0", "70000"])
def test_a_malformed_port_is_named(port):
    with pytest.raises(ValueError, match="KAME_PORT"):
        Settings.from_env({"KAME_PORT": port})


# ------------------------------------------------------------------------------------ stand-in decision
def test_a_newer_answer_that_agrees_with_what_was_said_carries_on():
    d = decide("the capital is paris".split(), ["the", "capital"], "the capital of france is paris".split())
    assert d.switch_at is None and d.said == ["the", "capital"] and d.words[-1] == "paris"
    assert d.words == "the capital of france is paris".split()


def test_a_shorter_prefix_keeps_the_longer_tail():
    words = "mount elbrus in russia".split()
    d = decide(words, ["mount"], ["mount", "elbrus"])
    assert d.switch_at is None and d.words == words


def test_a_contradiction_restarts_the_sentence_of_the_first_contradicted_word():
    d = decide("mont blanc at four thousand".split(), ["mont", "blanc", "at"], "mount elbrus at five".split())
    assert d.switch_at == 0 and d.said == [] and d.words == "mount elbrus at five".split()
    d = decide("it is paris".split(), ["It", "is,", "paris"], "it is lyon".split())
    assert d.switch_at == 0 and d.said == []   # a clean sentence: "it is paris — no, wait, it is lyon"
    old = "Paris is big. It has a river".split()
    d = decide(old, old[:5], "Paris is big. Lyon has two rivers".split())
    assert d.switch_at == 3 and d.said == ["Paris", "is", "big."]  # the finished sentence stays said


def test_prefix_helpers():
    assert first_contradiction(["a", "b"], ["a", "B."]) is None
    assert first_contradiction(["a", "b"], ["a", "c", "d"]) == 1
    assert common_prefix(["a", "b", "c"], ["a", "b", "x"]) == 2
