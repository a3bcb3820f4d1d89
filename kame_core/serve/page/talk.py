"""The Talk page: a browser client of the live protocol (:mod:`kame_core.serve`) at ``/api/chat``.

:func:`talk_html` is its markup (``static/talk.html``: start / stop, the live view) with its settings
(:func:`talk_config`); ``static/talk.js`` runs it. ``python -m kame_core.serve`` serves it at ``/`` (:mod:`.mount`:
no ticket box; it connects with the token of its address); the studio's Talk tab (:mod:`demo.tabs.talk`) shows the
same markup, its script loaded by the app's page head (:mod:`demo.app.assets`). In the page:

* the microphone is captured with ``getUserMedia`` (echo cancellation, noise suppression, auto gain on) into
  an ``AudioContext`` at 24 kHz; a capture AudioWorklet cuts 1920-sample frames that are sent as raw PCM
  (kind 0x08, 16-bit little-endian) -- encoding Opus in a page needs a codec library, raw PCM does not;
* the answer is asked for in raw PCM (``?audio=pcm``) and played by a second AudioWorklet from a ring buffer
  (low latency, no file per chunk); it reports the RMS it played, which the page keeps in
  ``window.kameTalk.played`` (tests read it);
* the 0x02 pieces, the 0x07 events and the audio both ways feed ``window.kameTalk.timeline`` (``now``: session
  seconds received; ``lanes``: ``user_audio`` and ``output_audio`` levels per 80 ms frame, ``inner_monologue``
  words at their frames, ``oracle`` revisions; ``revisions``: ``{revision, t, hint_level, text}``; LLM requests,
  notes, self-corrections, the revision KAME hears, speech ends and turn onsets), drawn on the canvas
  ``kame-talk-timeline`` 10 times a second: the last 20 s, pausable, scrolled back with the slider or the
  wheel; the text boxes beside it are redrawn every 200 ms;
* "Latency per turn" shows each turn's newest ``turn_latency`` (the server re-sends a turn's breakdown as its
  steps, request outcomes and oracle token counts come in; a newer one replaces the row), and a revision's
  ``hint_level`` colours it as soon as it comes (kept by revision, should it come before the revision's reset);
* Stop sends ``{"type": "end"}``; once the server replies ``saved``, the session id goes into a hidden
  textbox and a hidden button opens it in Timeline / Compare (:func:`demo.open.views.open_talk_session`);
* right before it connects, the page clicks a hidden button whose Gradio event (of this page's session) puts a
  fresh one-use ticket of the chat server into a hidden textbox (:func:`demo.tabs.talk.talk_ticket`); the page
  connects with ``&ticket=`` -- what admits it when the server has a ``KAME_TOKEN`` (a server without one
  ignores it). The app's page always asks, so there is one way to connect there.
"""
from __future__ import annotations

import html
import json
from typing import Any

from .assets import PAGE
from .palette import LIVE_COLOURS, hint_swatches_html

#: element ids the Python side wires to
TALK_ID_BOX = "kame-talk-id"
TALK_OPEN_BUTTON = "kame-talk-open"
TALK_TICKET_BOX = "kame-talk-ticket"
TALK_TICKET_BUTTON = "kame-talk-ticket-ask"
TALK_SHOWN_BOX = "kame-talk-shown"  # the app's open input (its key), filled at every open
#: how long the page waits for its ticket (a busy app answers in well under a second)
TICKET_WAIT_MS = 20000


def talk_config(*, app: bool = True, worklets: str | None = None) -> dict[str, Any]:
    """The Talk page's settings, given to ``talk.js`` with its markup: its colours (:data:`.palette.LIVE_COLOURS`),
    the worklets' address, and -- in the app (``app``) -- the hidden Gradio elements it gets its ticket from and
    opens a saved session with and reads the open input from (another input opened while no conversation runs:
    the page stops showing the last one); on the chat server's own page (``app=False``) both are None: it connects
    with the token of its own address and says where the session was saved."""
    return {"colours": dict(LIVE_COLOURS), "worklets": worklets or PAGE.url("talk-worklets.js"),
            "ticket": {"box": TALK_TICKET_BOX, "ask": TALK_TICKET_BUTTON, "wait_ms": TICKET_WAIT_MS} if app else None,
            "open": {"box": TALK_ID_BOX, "button": TALK_OPEN_BUTTON, "shown": TALK_SHOWN_BOX} if app else None}


def talk_html(config: dict[str, Any] | None = None) -> str:
    """The page's markup (``static/talk.html``) with the hint legend and ``config`` (default: the app's,
    :func:`talk_config`) for ``talk.js``."""
    return (PAGE.text("talk.html").replace("{hint_swatches}", hint_swatches_html(unknown=True, separator=" · "))
            .replace("{config}", html.escape(json.dumps(config or talk_config()), quote=True)))

