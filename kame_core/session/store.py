"""Where live sessions are kept: one :class:`SessionStore` per folder owns session ids, file names, titles and
saving, for every door (the live protocol's sessions folder, the app's private folder per user)."""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..files import write_bytes_atomic
from ..paths import sessions_dir
from ..record.trace import SessionTrace
from ..scenario import Scenario, save_scenario

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
#: a claim: what the page that made a session holds to open it again (>= 128 random bits, hex)
_CLAIM_RE = re.compile(r"^[0-9a-f]{32,128}$")
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")


def default_sessions_dir(env: Mapping[str, str] | None = None) -> Path:
    """``KAME_SESSIONS_DIR`` of ``env``, else ``sessions/`` under its cache root (:func:`kame_core.paths.sessions_dir`);
    without ``env``, the built-in default (``~/.cache/kame-studio/sessions``: the entry points pass the folder
    their :class:`~kame_core.settings.Settings` name)."""
    return sessions_dir(env or {})


def session_file(sessions_dir: Path, session_id: str) -> Path:
    """The scenario file of a saved session; a malformed id raises ValueError (ids never name other paths)."""
    if not _ID_RE.match(session_id or ""):
        raise ValueError(f"not a session id: {session_id!r}")
    return Path(sessions_dir) / f"{session_id}.kame"


#: a replica of ``serve --replicas`` (or the app's ``KAME_REPLICAS``) K saves in ``<sessions dir>/replica-K``
REPLICA_FOLDER_PREFIX = "replica-"


def saving_folder(sessions_dir: Path, session_id: str) -> Path:
    """The folder whose file is ``session_id``'s: ``sessions_dir``, or the replica folder a replica saved it in
    (``sessions_dir`` when none holds it). A malformed id raises ValueError."""
    if session_file(sessions_dir, session_id).is_file():
        return Path(sessions_dir)
    for folder in sorted(Path(sessions_dir).glob(f"{REPLICA_FOLDER_PREFIX}*")):
        if folder.is_dir() and not folder.is_symlink() and session_file(folder, session_id).is_file():
            return folder
    return Path(sessions_dir)


#: random bits in a new session id (files saved with the 32 of earlier versions still open: ids are only matched)
SESSION_ID_RANDOM_BITS = 96


def new_session_id(kind: str = "talk") -> str:
    """``KIND-YYYYmmdd-HHMMSS-<96 random bits, hex>``: sortable by time, and not guessable (a claim still guards a
    saved session; the id alone never opens one)."""
    if not _ID_RE.match(kind):
        raise ValueError(f"not a session kind: {kind!r}")
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(SESSION_ID_RANDOM_BITS // 8)}"


def claim_digest(claim: str) -> str:
    """What is kept of a claim (its SHA-256, hex); a malformed claim raises ValueError."""
    if not _CLAIM_RE.match(claim or ""):
        raise ValueError("a claim is 32 to 128 lowercase hex digits")
    return hashlib.sha256(claim.encode()).hexdigest()


@dataclass(frozen=True)
class SavedSession:
    """A saved session: its file and the scenario written there."""

    path: Path
    scenario: Scenario


@dataclass(frozen=True)
class SessionStore:
    """A folder of saved sessions (``<id>.kame`` scenario files, written atomically)."""

    folder: Path

    def path(self, session_id: str) -> Path:
        return session_file(self.folder, session_id)

    def save_claim(self, session_id: str, claim: str) -> None:
        """Remember (as its SHA-256) the claim of the page that made ``session_id``; a malformed claim raises."""
        self.save_claim_digest(session_id, claim_digest(claim))

    def save_claim_digest(self, session_id: str, digest: str) -> None:
        """Remember a claim already reduced to its digest (:func:`claim_digest`: what a journal keeps)."""
        if not _DIGEST_RE.match(digest or ""):
            raise ValueError("a claim digest is 64 lowercase hex digits")
        write_bytes_atomic(self.path(session_id).with_suffix(".claim"), digest.encode())

    def owns(self, session_id: str, claim: str) -> bool:
        """Whether ``claim`` is the one ``session_id`` was made with (constant-time); False without a claim."""
        stored = self.path(session_id).with_suffix(".claim")
        if not _CLAIM_RE.match(claim or "") or not stored.is_file():
            return False
        return hmac.compare_digest(stored.read_text().strip(), hashlib.sha256(claim.encode()).hexdigest())

    @property
    def journal_root(self) -> Path:
        """Where live sessions are journaled while they run (``.journal``: never a session id)."""
        return Path(self.folder) / ".journal"

    def journal(self, session_id: str) -> Path:
        self.path(session_id)  # validates the id
        return self.journal_root / session_id

    def recover(self, max_frames: int | None = None) -> list[Path]:
        """Save every session a crash (or a failed save) left in the journal, marked incomplete; their files.
        A recovered id that is already saved gets a new id (a saved session is never overwritten); journals over
        ``max_frames`` frames' worth of bytes are refused (:func:`~.journal.recover_journals`)."""
        from .journal import CLAIM_DIGEST_KEY, INCOMPLETE_NOTE, recover_journals

        def save(session_id: str, trace: SessionTrace, head: dict) -> Path:
            title = f"{head.get('title') or 'Live session'} ({INCOMPLETE_NOTE})"
            saved_id = self.unused_id(session_id)
            digest = head.get(CLAIM_DIGEST_KEY)
            if isinstance(digest, str) and _DIGEST_RE.match(digest):  # its page's claim first: never an orphan file
                self.save_claim_digest(saved_id, digest)
            return self.save(saved_id, {"kame": trace}, title=title,
                             components=str(head.get("components", "")), tags=("live", "incomplete")).path

        return recover_journals(self.journal_root, save, max_frames)

    def unused_id(self, session_id: str) -> str:
        """``session_id`` if no session of that id is saved, else ``<id>-recovered-<random>`` that is not."""
        candidate = session_id
        while self.path(candidate).exists() or self.path(candidate).is_symlink():
            candidate = f"{session_id[:80]}-recovered-{uuid.uuid4().hex[:6]}"
        return candidate

    def save(self, session_id: str, runs: Mapping[str, SessionTrace], *, title: str, components: str,
             tags: Sequence[str] = ("live",)) -> SavedSession:
        """Save ``runs`` (run id -> trace) as one scenario named ``session_id``."""
        scenario = Scenario(name=session_id, runs=dict(runs), title=title, tags=list(tags),
                            description=f"Recorded live by KAME studio. Components: {components}")
        return SavedSession(save_scenario(scenario, self.path(session_id)), scenario)
