"""The Talk tab: full duplex over the live protocol at ``/api/chat`` (the page itself:
:mod:`kame_core.serve.page.talk`). Its hidden components are the page's way into the app: a one-use ticket before it
connects, and the saved session opened in Timeline and Compare when it stops."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gradio as gr

from kame_core.serve.page.talk import (
    TALK_ID_BOX,
    TALK_OPEN_BUTTON,
    TALK_SHOWN_BOX,
    TALK_TICKET_BOX,
    TALK_TICKET_BUTTON,
    talk_html,
)
from kame_core.tickets import TicketBook, TicketRefused

from ..open import views

if TYPE_CHECKING:
    from . import Wiring

log = logging.getLogger("kame.app")


@dataclass(frozen=True)
class TalkTab:
    """The Talk tab's hidden components: the session to open ("ID CLAIM") and its button, the ticket and its
    button, the open input's key (filled by every open, read by the page)."""

    session_id: gr.Textbox
    open: gr.Button
    ticket: gr.Textbox
    ask_ticket: gr.Button
    shown: gr.Textbox


def build() -> TalkTab:
    """The tab's layout, inside the current ``gr.Tab``."""
    gr.HTML(talk_html())  # the live timeline first: in view when the tab opens
    gr.Markdown("Talk to KAME **full duplex**: the page streams your microphone to the live protocol "
                "(`/api/chat`, the same one `python -m kame_core.serve` speaks) and plays the answer "
                "as it is made. Watch the streams move on the timeline: what KAME says, the oracle "
                "revisions the back-end LLM sends it with their hint levels (it corrects itself when a "
                "better one arrives), your words as the STT hears them, and after each of your turns "
                "when KAME's first word came. Stop saves the session and opens it in Timeline and "
                "Compare (download it above).")
    session_id = gr.Textbox(elem_id=TALK_ID_BOX, elem_classes=["kame-hidden"], show_label=False, container=False)
    open_button = gr.Button("open talk session", elem_id=TALK_OPEN_BUTTON, elem_classes=["kame-hidden"])
    ticket = gr.Textbox(elem_id=TALK_TICKET_BOX, elem_classes=["kame-hidden"], show_label=False, container=False)
    ask_ticket = gr.Button("ticket", elem_id=TALK_TICKET_BUTTON, elem_classes=["kame-hidden"])
    shown = gr.Textbox(elem_id=TALK_SHOWN_BOX, elem_classes=["kame-hidden"], show_label=False, container=False,
                       interactive=False)
    return TalkTab(session_id, open_button, ticket, ask_ticket, shown)


def wire(tab: TalkTab, wiring: Wiring) -> None:
    """Opening a stopped session is an open path (it also offers the file and shows the Timeline tab); the
    ticket is asked for privately, unqueued."""
    state, settings, tickets = wiring.state, wiring.settings, wiring.tickets

    def on_talk_open(session_id, st):
        opened = views.open_talk_session(session_id, st, sessions_dir=settings.server.sessions_dir)
        return (*wiring.show(opened), views.download_html(opened.file),
                gr.Tabs(selected="timeline") if opened.file is not None else gr.skip())

    wiring.opens(tab.open.click(on_talk_open, [tab.session_id, state], [*wiring.opened, wiring.download, wiring.tabs],
                                api_name="open_talk_session"))

    def on_talk_ticket(request: gr.Request) -> str:
        """A one-use ticket for ``/api/chat``, bound to this page's Gradio session (the page asks right before
        it connects)."""
        return talk_ticket(tickets, request.session_hash, request.client.host if request.client else "")

    # private: not offered to API clients; not queued behind the default concurrency limit
    tab.ask_ticket.click(on_talk_ticket, None, tab.ticket, api_visibility="private", concurrency_limit=None,
                         show_progress="hidden")


def talk_ticket(tickets: TicketBook, owner: str | None, source: str = "") -> str:
    """A one-use ticket of the chat server's book for the Talk page of Gradio session ``owner`` asked from address
    ``source`` (it replaces the one that session held): what admits the page to ``/api/chat`` when a token is
    required. "" when the book is full (logged; the page then says the app gave no ticket)."""
    try:
        return tickets.issue(owner or "no session", source)
    except TicketRefused as err:
        log.warning("no Talk ticket for a page: %s", err)
        return ""
