"""What a door's Ray opens. ``python -m kame_core.serve --host 127.0.0.1 --replicas 1``, as a process of its own (Ray
reads its loopback switch when a process first imports it): every port its local Ray and the replica listen on is
on loopback, but for the one Ray Serve binds to every interface in each replica (its inter-deployment gRPC server,
hard-coded), which refuses a call without Ray's token (on by Ray's default for a local Ray). SIGKILLed, the door
leaves only Ray's two agents, on loopback (they exit by themselves about a minute later; docs/deploy.md). The
printed lines and the switch run without Ray."""
from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kame_core.access import Access
from kame_core.executors.ray_executor import RAY_AUTH_MODE, RAY_ONE_MACHINE, keep_local_ray_on_loopback
from kame_core.serve.replicas import ReplicaSpec, ReplicatedChat
from kame_core.stacks.served import stack_from_cpu
from kame_core.testing.servers import free_port, listens, wait_for_process
from kame_core.testing.waiting import wait_until
from tests.shared_data import REPO

#: the processes a SIGKILLed door leaves for a while: Ray's agents, children of the raylet that died with the door
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


# ------------------------------------------------------------------------------------------------ without Ray
def test_a_local_ray_is_kept_on_loopback_unless_the_operator_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RAY_ONE_MACHINE, raising=False)
    keep_local_ray_on_loopback()
    assert os.environ[RAY_ONE_MACHINE] == "0"
    monkeypatch.setenv(RAY_ONE_MACHINE, "1")
    keep_local_ray_on_loopback()
    assert os.environ[RAY_ONE_MACHINE] == "1"


def test_the_door_says_what_listens_where_when_more_than_loopback_is_open(monkeypatch: pytest.MonkeyPatch) -> None:
    def door(address: str | None, node: str) -> ReplicatedChat:
        spec = ReplicaSpec(stack_from_cpu(small_model_openers=False), sessions_dir=Path("unused"))
        chat = ReplicatedChat(spec, 2, access=Access(), address=address)
        chat.replicas.node_address = node  # as RayReplicas.start finds it
        return chat

    monkeypatch.setenv(RAY_AUTH_MODE, "token")
    local = door(None, "127.0.0.1")
    assert local.exposure("127.0.0.1") == []  # nothing beyond this machine takes a call without Ray's token
    [line] = local.exposure("0.0.0.0")
    assert line.startswith("the door listens on 0.0.0.0;") and "websockets on 127.0.0.1, this machine only" in line
    assert "gRPC port in each replica listens on every interface" in line
    assert "refuses calls without Ray's token" in line
    [line] = door(None, "192.0.2.7").exposure("127.0.0.1")
    assert "the local Ray listens beyond this machine" in line and "replicas on 192.0.2.7" in line
    assert "firewall them" in line and RAY_ONE_MACHINE in line and "token authentication on" in line
    monkeypatch.setenv(RAY_AUTH_MODE, "disabled")
    [line] = local.exposure("127.0.0.1")  # Serve's port takes anyone's calls: said even behind a loopback door
    assert "takes calls with no authentication (RAY_AUTH_MODE='disabled'): firewall it" in line
    [line] = door("ray://head:10001", "10.0.0.5").exposure("127.0.0.1")
    assert "the Ray cluster at ray://head:10001" in line and "let only the cluster's nodes reach them" in line
    assert "no authentication: RAY_AUTH_MODE='disabled'" in line and 'docs/deploy.md, "What listens where"' in line


# ---------------------------------------------------------------------------------------- the door on Ray
def _tree(pid: int) -> list[Any]:
    import psutil

    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _listeners(processes: list[Any]) -> list[tuple[str, int, str, int]]:
    """(process name, pid, address, port) of every TCP socket that ``processes`` listen on."""
    import psutil

    names = {}
    for process in processes:
        try:
            names[process.pid] = process.name()
        except psutil.NoSuchProcess:
            pass
    return sorted((names[c.pid], c.pid, c.laddr.ip, c.laddr.port) for c in psutil.net_connections("tcp")
                  if c.status == psutil.CONN_LISTEN and c.pid in names)


def _alive(processes: list[Any]) -> dict[Any, str]:
    """Those of ``processes`` that still run (not ended, not a zombie), with their names."""
    import psutil

    running = {}
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                running[process] = process.name()
        except psutil.NoSuchProcess:
            pass
    return running


def _on_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1, as Ray's gRPC servers say it
    return bool((mapped or ip).is_loopback)


def _this_machine_beyond_loopback() -> str:
    """An address of this machine other machines may reach (an IPv4 one), else 127.0.0.1."""
    import psutil

    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family.name == "AF_INET" and not ipaddress.ip_address(address.address).is_loopback:
                return str(address.address)
    return "127.0.0.1"


def _unauthenticated_call(host: str, port: int) -> Any:
    """The status of a call to Ray Serve's replica service at ``host:port`` that carries no Ray token."""
    import grpc

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        try:
            channel.unary_unary("/ray.serve.ASGIService/HandleRequest")(b"", timeout=10)
        except grpc.RpcError as err:
            return err.code()
    return grpc.StatusCode.OK


@pytest.mark.slow  # Ray and a replica of the CPU stack, in a process of their own
def test_a_loopback_doors_ray_listens_on_loopback_and_a_killed_door_leaves_only_rays_agents(tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    psutil = pytest.importorskip("psutil")
    grpc = pytest.importorskip("grpc")
    port, log = free_port(), tmp_path / "door.log"
    env = {key: value for key, value in os.environ.items() if key not in (RAY_ONE_MACHINE, RAY_AUTH_MODE)}
    command = [sys.executable, "-m", "kame_core.serve", "--host", "127.0.0.1", "--port", str(port), "--replicas",
               "1", "--max-sessions", "1", "--no-small-model", "--log-level", "warning", "--sessions-dir",
               str(tmp_path / "sessions")]
    with log.open("w") as out:  # a session of its own: whatever the test leaves is found by its session id
        door = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for_process(door, lambda: listens(port), timeout_s=240, what="the door", log=log)
        processes = _tree(door.pid)
        listeners = _listeners(processes)
        names = {name for name, *_ in listeners}
        assert {"gcs_server", "raylet", *AGENTS} <= names, listeners  # Ray's own services are all there
        assert any(name.startswith("ray::ServeReplica") for name in names), listeners
        assert "listening:" not in log.read_text()  # a loopback door with a loopback Ray has nothing to say
        beyond = [row for row in listeners if not _on_loopback(row[2])]
        # Ray Serve binds its inter-deployment gRPC server to [::] in every replica, whatever the node's address
        assert all(name.startswith("ray::ServeReplica") and address == "::"
                              for name, _, address, _ in beyond), listeners
        reachable_at = _this_machine_beyond_loopback()
        for _, _, _, open_port in beyond:
            assert _unauthenticated_call(reachable_at, open_port) == grpc.StatusCode.UNAUTHENTICATED

        os.kill(door.pid, signal.SIGKILL)
        door.wait(30)

        def only_agents_left() -> bool:
            return set(_alive(processes[1:]).values()) <= set(AGENTS)

        wait_until(only_agents_left, 30, every_s=0.2, what="every Ray process but its agents to end")
        left = _alive(processes[1:])
        # Ray's agents outlive the door for about a minute (docs/deploy.md says so, and why): on loopback only
        assert set(left.values()) <= set(AGENTS), left
        assert all(_on_loopback(address) for _, _, address, _ in _listeners(list(left))), _listeners(list(left))
    finally:
        if door.poll() is None:
            door.kill()
            door.wait(30)
        for process in psutil.process_iter():  # what the door started and left: its session's, nothing else
            try:
                if os.getsid(process.pid) == door.pid:
                    process.kill()
            except (OSError, psutil.NoSuchProcess):
                pass
