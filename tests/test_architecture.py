"""The code's layering, read from its syntax (benchmarks/architecture_figures.py's parser): the core never imports
the app beyond the one import named here, and no files import one another round a circle."""
from __future__ import annotations

import ast

from benchmarks import architecture_figures as figures

REPO = figures.ROOT

#: upward imports still there, each with the change that removes it (none may be added)
KNOWN_UPWARD = {("kame_core.serve.__main__", "demo.talk_page"):
                "the Talk page moves into kame_core/serve/page/ (issue 46, item 3)"}


def _graph() -> dict[str, set[str]]:
    return figures.file_imports(REPO / "kame_core", REPO / "demo", REPO / "app.py")


def test_the_core_imports_the_app_nowhere_new_and_no_file_closes_a_circle() -> None:
    graph = _graph()
    assert len(graph) > 200 and "kame_core.serve.__main__" in graph and "app" in graph  # the whole code was read
    upward = set(figures.upward_imports(graph))
    assert upward <= set(KNOWN_UPWARD), f"imports that run up a layer: {sorted(upward - set(KNOWN_UPWARD))}"
    assert figures.circles(graph) == []


def test_the_checks_find_an_upward_import_and_a_circle() -> None:
    graph = {"kame_core.a": {"kame_core.b"}, "kame_core.b": {"kame_core.c", "demo.x"}, "kame_core.c": {"kame_core.a"},
             "demo.x": {"kame_core.a"}, "demo.y": {"demo.y2"}, "demo.y2": set(), "app": {"demo.x"}}
    assert figures.upward_imports(graph) == [("kame_core.b", "demo.x")]
    assert figures.circles(graph) == [["demo.x", "kame_core.a", "kame_core.b", "kame_core.c"]]
    assert figures.circles({"kame_core.a": {"kame_core.b"}, "kame_core.b": set()}) == []


def test_a_deferred_import_counts_and_a_package_read_by_its_own_modules_does_not() -> None:
    graph = _graph()
    assert "demo.talk_page" in graph["kame_core.serve.__main__"]  # imported inside a function
    worker = REPO / "kame_core" / "llm" / "smollm_worker.py"  # ``from . import smollm_model``, inside a function
    read = set(figures.imported_modules(worker, ast.parse(worker.read_text())))
    assert {"kame_core.llm", "kame_core.llm.smollm_model"} <= read
    assert "kame_core.llm.smollm_model" in graph["kame_core.llm.smollm_worker"]
    assert "kame_core.llm" not in graph["kame_core.llm.smollm_worker"]
