"""Plotly figures made from plain dicts without plotly's property-by-property validation.

``go.Figure(data=..., layout=...)`` checks and coerces every property of every trace, and deep-copies the named
template into the layout: two thirds of a Timeline figure's build (a 2-minute session: 170 ms → 48 ms,
``benchmarks/figure_build.py``). The figures of :mod:`demo.figures.timeline` are plain dicts built by our own code, so
the app builds them unchecked here; the tests build the same figures checked and compare the two
(``tests/test_plot_build.py``), so a property plotly would refuse still fails there.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio


@functools.lru_cache(maxsize=8)
def _template_json(name: str) -> str:
    """Plotly's named template as JSON (read once; each figure gets its own copy, parsed from it)."""
    return json.dumps(pio.templates[name].to_plotly_json())


def figure_from_dicts(data: Sequence[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """The figure of ``data`` (trace dicts) and ``layout``, unchecked; as plotly would, a ``template`` given by
    name is expanded (the browser's plotly.js knows no template names) and empty lists are left out."""
    layout = {key: value for key, value in layout.items() if value != []}
    template = layout.get("template")
    if isinstance(template, str):
        layout = {**layout, "template": json.loads(_template_json(template))}
    return go.Figure(data=list(data), layout=layout, _validate=False)


def copy_figure(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` that can be changed without changing it (unchecked: ``fig`` was checked or built here)."""
    return go.Figure(fig.to_plotly_json(), _validate=False)
