"""A file a client names is opened only when Gradio received it as an upload (demo.app.client_files): the app's own
check, in process. The running app refusing raw clients (Gradio's check on under mount_gradio_app, and ours behind
it) is tested in tests/test_app_server.py."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from gradio.utils import get_upload_folder

from demo.app.client_files import ClientFileRefused, ReceivedUploads
from demo.app.page import build_app
from demo.open import views
from kame_core.settings import Settings

from .shared_data import REPO

SCENARIO = REPO / "scenarios" / "04-humanities-mona-lisa.kame"


@pytest.fixture
def upload_folder():
    """A folder of Gradio's upload folder, as its upload route makes one per file; removed afterwards."""
    folder = Path(get_upload_folder()) / f"test-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_only_a_file_gradio_received_is_accepted(tmp_path, upload_folder):
    received = upload_folder / "mine.kame"
    shutil.copyfile(SCENARIO, received)
    blocks = SimpleNamespace(upload_file_set={str(received)})
    gate = ReceivedUploads(blocks)
    assert gate.accept(str(received)) == str(received)
    assert gate.accept(None) is None and gate.accept("") is None  # nothing given: the caller says so

    elsewhere = tmp_path / "someone-elses.kame"  # a server path (another person's saved session, say)
    shutil.copyfile(SCENARIO, elsewhere)
    beside = upload_folder / "not-received.kame"  # in the upload folder, but no upload brought it
    shutil.copyfile(SCENARIO, beside)
    link = upload_folder / "link.kame"  # a received name that is a link to a server file
    link.symlink_to(elsewhere)
    blocks.upload_file_set.add(str(link))
    folder_named = upload_folder / "sub"
    folder_named.mkdir()
    blocks.upload_file_set.add(str(folder_named))
    for path in (elsewhere, beside, link, folder_named, Path("/etc/passwd"),
                 upload_folder / ".." / upload_folder.name / "not-received.kame"):
        with pytest.raises(ClientFileRefused, match="was not uploaded in this browser session") as refused:
            gate.accept(str(path))
        assert str(path.parent) not in str(refused.value)  # the server's folders are never echoed
    for odd in ({"path": str(received)}, 42, [str(received)]):
        with pytest.raises(ClientFileRefused, match="not by a"):
            gate.accept(odd)
    received.unlink()  # cleaned away by Gradio's cache janitor
    with pytest.raises(ClientFileRefused, match="upload it again"):
        gate.accept(str(received))


def _callback(blocks, api_name: str):
    return next(fn.fn for fn in blocks.fns.values() if fn.api_name == api_name)


def test_the_apps_file_taking_callbacks_refuse_a_server_path_and_leave_the_session_as_it_was(tmp_path):
    """``/upload_scenario`` and ``/live_upload`` called as a raw client would (a server path, no upload): refused
    with a message, the open input unchanged; a received upload of the same file opens."""
    blocks = build_app(settings=Settings.from_env({"KAME_SESSIONS_DIR": str(tmp_path / "sessions")}))
    opened = views.open_bundled("05-two-turn-capitals")
    state = opened.session
    secret = tmp_path / "sessions" / "talk-20260101-000000-abcdef01.kame"
    secret.parent.mkdir()
    shutil.copyfile(SCENARIO, secret)

    upload = _callback(blocks, "upload_scenario")
    refused_state, status, *_ = upload(str(secret), state)
    assert refused_state is state and state.loaded is opened.session.loaded
    assert status.startswith("**Cannot open this file**") and "was not uploaded in this browser session" in status
    assert "Mona Lisa" not in status and str(secret.parent) not in status

    live = _callback(blocks, "live_upload")
    wav = tmp_path / "recording.wav"
    wav.write_bytes(b"RIFF0000WAVE")
    (run,) = list(live(str(wav), ["kame"], state))
    assert run.session is state and run.file == "" and "was not uploaded in this browser session" in run.status

    folder = Path(get_upload_folder()) / f"test-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    try:
        received = folder / SCENARIO.name
        shutil.copyfile(SCENARIO, received)
        blocks.upload_file_set.add(str(received))
        _, status, *_ = upload(str(received), state)
        assert "Cannot open" not in status and state.loaded.origin == "upload", status
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        views.discard_session(state)


def test_a_mounted_app_has_gradios_own_file_check_on(tmp_path):
    """``gr.mount_gradio_app`` leaves ``has_launched`` unset, which turns Gradio's check off; the app sets it."""
    from demo.app.server import create_app
    from kame_core.serve import ChatServer

    blocks = build_app()
    assert not blocks.has_launched
    create_app(blocks, ChatServer(lambda: None, sessions_dir=tmp_path))
    assert blocks.has_launched
