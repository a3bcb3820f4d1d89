"""The app's seven tabs, one module each: :mod:`~demo.tabs.timeline`, :mod:`~demo.tabs.compare`,
:mod:`~demo.tabs.evolution`, :mod:`~demo.tabs.delay` (Forced delay), :mod:`~demo.tabs.live`, :mod:`~demo.tabs.talk`,
:mod:`~demo.tabs.sessions`.

Each module holds its tab's layout (``build()``: the components, made inside the current ``gr.Tab``, as a small
frozen dataclass), its callbacks (plain functions of (inputs, per-user session) -> outputs, which tests call
directly) and its event wiring (``wire(components, wiring)``); :func:`demo.app.page.build_app` composes them. The
open input they all show is :mod:`demo.open.views`' (the tabs import it, never the other way round);
:func:`demo.app.panels.panels` draws every tab's panels for it, after every open path. A tab never imports another
tab: what two tabs share lives in :mod:`demo.open` (the open input and what it can open) or :mod:`demo.figures`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr
from gradio.components import Component
from gradio.events import Dependency

from kame_core.settings import Settings
from kame_core.tickets import TicketBook

from ..app.client_files import ReceivedUploads
from ..app.hardware import Hardware
from ..open.results import Opened, TalkOpened

__all__ = ["Wiring"]


@dataclass(frozen=True)
class Wiring:
    """What a tab's events need from the rest of the app: the user's state, what the app was built with
    (``settings``, ``hardware``, the chat server's ``tickets``, the ``gpu`` wrapper), the bar's Download and the
    tab set, and the open paths' machinery: ``opened`` (an open's own outputs: the session, the status and the
    Timeline's figure, runs table, player and run picker), ``show`` (an open's result as those outputs) and
    ``opens`` (ends an open path's event with redrawing every panel of every tab); ``lanes_changed`` ends an event
    that changed the lanes with redrawing the panels that draw them."""

    state: gr.State
    settings: Settings
    hardware: Hardware
    tickets: TicketBook
    gpu: Callable[[Callable], Callable] | None
    download: gr.HTML
    tabs: gr.Tabs
    opened: tuple[Component, ...]
    show: Callable[[Opened | TalkOpened], tuple]
    opens: Callable[[Dependency], Dependency]
    lanes_changed: Callable[[Dependency], Dependency]
    received: ReceivedUploads  # every file a client names goes through its ``accept`` (:mod:`demo.app.client_files`)
