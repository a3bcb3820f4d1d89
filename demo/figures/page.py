"""A timeline on a page of its own, drawn and worked as in the app: the figure, its player, the inspector's time
box, and the page's scripts (``demo/static/``, loaded from their files) -- for the browser tests of the timeline's
interaction and the redraw benchmark (``benchmarks/timeline_redraw.py``), with no app server.

The page holds the figure as Gradio would (a plain Plotly plot inside ``#kame-plot-<view>``), so ``timeline.js``
finds it, redraws it with the page's Plotly and takes over, exactly as in the app.
"""
from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go

from kame_core.record.trace import SessionTrace

from ..app import assets
from .player import write_mix

PAGE_SCRIPTS = ("plotly.min.js", "timeline-layout.js", "timeline.js")


def write_page(folder: Path, figure: go.Figure, trace: SessionTrace | None = None, *, view: str = "timeline") -> Path:
    """``folder/<view>.html``: ``figure`` in ``#kame-plot-<view>``, the conversation audio of ``trace`` (if given)
    in ``#kame-audio-<view>``, and an Inspect-time box; returns its path (open it as a ``file://`` address)."""
    folder.mkdir(parents=True, exist_ok=True)
    audio = write_mix(trace, folder, f"{view}-mix") if trace is not None else None
    player = (f"<div id='kame-audio-{view}'><audio controls preload='auto' src='{html.escape(audio.name)}' "
              "style='width:100%'></audio></div>" if audio is not None else "")
    scripts = "".join(f"<script src='{html.escape(assets.APP.resolve(name).as_uri())}'></script>"  # type: ignore[union-attr]
                      for name in PAGE_SCRIPTS)
    styles = f"<style>{assets.APP.text('app.css')}</style>"
    body = (f"<div id='kame-inspect-time'><input type='number' value='0'></div>"
            f"<div id='kame-plot-{view}'><div id='source'></div></div>{player}")
    # Plotly's own encoder (numpy arrays included); "</" escaped so no string can end the script element
    spec = figure.to_json().replace("</", "<\\/")
    draw = f"<script>var kameFigure = {spec}; Plotly.newPlot('source', kameFigure.data, kameFigure.layout);</script>"
    page = folder / f"{view}.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'>{styles}{scripts}</head>"
                    f"<body style='width:1500px'>{body}{draw}</body></html>", encoding="utf-8")
    return page

