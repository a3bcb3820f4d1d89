"""Files a client hands a callback: only what Gradio itself received through its upload route is opened.

A Gradio client names a file by its path (a ``FileData``). The browser uploads first and names the path Gradio gave
it; a raw client can skip the upload and name any path of the server (another person's saved conversation, a
recording, ``/etc/passwd``). Two checks stop it, each enough alone:

* Gradio's own (``processing_utils._check_allowed``: while preprocessing an input, only files in its upload folder
  are taken). It runs only once ``Blocks.has_launched`` is set, which ``Blocks.launch`` does and
  ``gr.mount_gradio_app`` never does: :func:`enable_gradio_file_check` sets it for a mounted app. This covers every
  input, the microphone's stream and Gradio's own copies included.
* Ours, :class:`ReceivedUploads`: a callback that takes a file path opens it only when it is exactly one of the files
  Gradio's upload route received (``Blocks.upload_file_set``), a regular file (not a link) inside the upload
  folder. Every file-taking callback of :mod:`demo.app.page` and :mod:`demo.tabs` goes through
  :meth:`ReceivedUploads.accept`.

Gradio's uploads carry no browser session; an upload's folder is named by a keyed hash of its bytes (a secret
seed of the server's), so its path is known only to whoever sent those bytes.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradio.utils import get_upload_folder

__all__ = ["ClientFileRefused", "ReceivedUploads", "enable_gradio_file_check"]


class ClientFileRefused(ValueError):
    """A file named by a client that Gradio did not receive from it as an upload; the message says so."""


def enable_gradio_file_check(blocks: Any) -> None:
    """Turn on Gradio's own check of the files clients name (see the module docstring): what ``Blocks.launch``
    marks, for an app mounted with ``gr.mount_gradio_app``."""
    blocks.has_launched = True


@dataclass(frozen=True)
class ReceivedUploads:
    """The uploads one app's Gradio received (``blocks``: the app's ``gr.Blocks``)."""

    blocks: Any

    def accept(self, value: Any) -> str | None:
        """``value`` as it came (None or "" stay so: the caller says nothing was given), when it names a file Gradio
        received through its upload route; :class:`ClientFileRefused` otherwise, naming only the file's name."""
        if value is None or value == "":
            return None
        if not isinstance(value, str | os.PathLike):
            raise ClientFileRefused(f"a file is named by its upload's path, not by a {type(value).__name__}")
        path = os.path.abspath(os.fspath(value))
        name = Path(path).name
        refused = ClientFileRefused(f"'{name}' was not uploaded in this browser session: only a file you upload "
                                    "here can be opened")
        received: set[str] = getattr(self.blocks, "upload_file_set", set())
        folder = os.path.realpath(get_upload_folder())
        if path not in received or not os.path.realpath(path).startswith(folder + os.sep):
            raise refused
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise ClientFileRefused(f"'{name}' could not be read (the upload did not arrive, or it was cleaned "
                                    "away): upload it again") from None
        if not stat.S_ISREG(mode):
            raise refused
        return path
