"""The code's layering, read from its syntax (benchmarks/architecture_figures.py's parser): the core never imports
the app, and no files import one another round a circle."""
from __future__ import annotations

import ast

from benchmarks import architecture_figures as figures

REPO = figures.ROOT

def _graph() -> dict[str, set[str]]:
    return figures.file_imports(REPO / "kame_core", REPO / "demo", REPO / "app.py")


def test_the_core_never_imports_the_app_and_no_file_closes_a_circle() -> None:
    graph = _graph()
    assert len(graph) > 200 and "kame_core.serve.__main__" in graph and "app" in graph  # the whole code was read
    assert figures.upward_imports(graph) == [], "imports that run up a layer"
    assert figures.circles(graph) == []


def test_the_checks_find_an_upward_import_and_a_circle() -> None:
    graph = {"kame_core.a": {"kame_core.b"}, "kame_core.b": {"kame_core.c", "demo.x"}, "kame_core.c": {"kame_core.a"},
             "demo.x": {"kame_core.a"}, "demo.y": {"demo.y2"}, "demo.y2": set(), "app": {"demo.x"}}
    assert figures.upward_imports(graph) == [("kame_core.b", "demo.x")]
    assert figures.circles(graph) == [["demo.x", "kame_core.a", "kame_core.b", "kame_core.c"]]
    assert figures.circles({"kame_core.a": {"kame_core.b"}, "kame_core.b": set()}) == []


def test_a_deferred_import_counts_and_a_package_read_by_its_own_modules_does_not() -> None:
    graph = _graph()
    assert "kame_core.serve.ingress" in graph["kame_core.serve.__main__"]  # imported inside a function
    assert "kame_core.serve.page.talk" in graph["demo.tabs.talk"]  # the app reuses the server's page
    assert "kame_core.serve.page.palette" in graph["demo.figures.timeline"]
    worker = REPO / "kame_core" / "llm" / "smollm_worker.py"  # ``from . import smollm_model``, inside a function
    read = set(figures.imported_modules(worker, ast.parse(worker.read_text())))
    assert {"kame_core.llm", "kame_core.llm.smollm_model"} <= read
    assert "kame_core.llm.smollm_model" in graph["kame_core.llm.smollm_worker"]
    assert "kame_core.llm" not in graph["kame_core.llm.smollm_worker"]
