"""The core's architecture in figures, read from the code's own syntax (nothing is imported or run).

Prints, for ``kame_core/`` (and, where a figure says so, ``demo/`` and ``app.py``):

* **top-level modules**: ``kame_core/*.py`` besides ``__init__.py``;
* **import arrows**: distinct ``A -> B`` imports between the core's *units* (a top-level module, or a
  top-level folder taken whole) -- how much the parts a newcomer sees depend on one another; and between files;
* **places that compute hint levels**: functions that work a level out -- call the level table (``hint_level``)
  or the spoken-ratio scan (``request_spoken_ratios``) -- and, apart, the places that have a trace's levels worked
  out (call ``annotate_hint_levels`` / ``record_hint_levels``), listed;
* **places that assemble stacks**: functions that put components together into a stack -- build a stack value
  (``Stack``, ``ServedStack``, ``LiveStack``) or call a component-level builder (``cpu_stack``, ``with_neural``,
  ``with_shared_stt``) -- listed by file (the doors' calls of a finished builder, e.g. ``build_stack``, are not);
* **``Any`` at the stack seams**: annotations naming ``Any`` in the fields of the stack values and in the
  signatures of the stack builders, listed;
* **upward imports and circles** over the whole repository's code (``kame_core/``, ``demo/``, ``app.py``):
  an import from the core into the app, and each set of files that import one another round a circle (every
  import counts, a deferred one inside a function too; a module reading its own package's ``__init__`` does not).
  ``tests/test_architecture.py`` fails on any;
* **the code's census** over the same files: classes of one name defined in more than one file (listed), ``Any``
  per 1,000 lines (every ``Any`` named in the code), the largest file and the largest function (lines).

Usage: ``python benchmarks/architecture_figures.py [--list]`` (``--list``: every place, not just the counts).
"""
from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "kame_core"
HINT_CALLS = frozenset({"hint_level", "level_of_ratio", "request_spoken_ratios"})
HINT_TRIGGERS = frozenset({"annotate_hint_levels", "record_hint_levels"})
STACK_VALUES = frozenset({"Stack", "ServedStack", "LiveStack"})
ASSEMBLERS = frozenset({"cpu_stack", "with_neural", "with_shared_stt"})
#: the builders whose signatures are stack seams
STACK_BUILDERS = frozenset({*ASSEMBLERS, "build_stack", "live_stack", "served_stack", "warm_stack", "pool_gate",
                            "stack_from_cpu"})


def python_files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
        else:
            yield from sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, tree: ast.Module) -> Iterator[str]:
    """Absolute names of every module ``path`` imports (a ``from X import y`` also yields ``X.y``)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def unit_of(module: str) -> str | None:
    """The core unit a module belongs to: ``kame_core.X`` for a top-level module or folder ``X``."""
    parts = module.split(".")
    if parts[0] != "kame_core" or len(parts) < 2:
        return None
    unit = CORE / parts[1]
    return f"kame_core.{parts[1]}" if unit.is_dir() or unit.with_suffix(".py").is_file() else None


def file_of(module: str) -> str | None:
    """The core file a module name is (the longest prefix that names a file)."""
    found = repository_file_of(module)
    return found if found is not None and found.split(".")[0] == "kame_core" else None


def import_arrows() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    units: set[tuple[str, str]] = set()
    files: set[tuple[str, str]] = set()
    for path in python_files(CORE):
        tree = ast.parse(path.read_text(), str(path))
        me, my_unit = module_name(path), unit_of(module_name(path))
        for name in imported_modules(path, tree):
            target, target_unit = file_of(name), unit_of(name)
            if target is not None and target != me:
                files.add((me, target))
            if target_unit is not None and my_unit is not None and target_unit != my_unit:
                units.add((my_unit, target_unit))
    return units, files


#: the layers of the repository's code, lowest first: a file may import its own layer's and the ones below
LAYERS = ("kame_core", "demo", "app")


def layer_of(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def repository_file_of(module: str) -> str | None:
    """The repository file (core, app) a module name is: the longest prefix that names one."""
    parts = module.split(".")
    while parts:
        base = ROOT.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file() and parts[0] in LAYERS:
                return module_name(candidate) if candidate.name != "__init__.py" else ".".join(parts)
        parts.pop()
    return None


def file_imports(*roots: Path) -> dict[str, set[str]]:
    """Each file's imports of the repository's files (a package's own ``__init__`` read by its modules left out:
    that is a module reaching its siblings, not a dependency)."""
    graph: dict[str, set[str]] = {}
    for path in python_files(*roots):
        me = module_name(path)
        targets = (repository_file_of(name) for name in imported_modules(path, ast.parse(path.read_text(), str(path))))
        graph[me] = {t for t in targets if t is not None and t != me and not me.startswith(t + ".")}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` where a lower layer imports a higher one (the core the app)."""
    return sorted((a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The sets of two or more files that import one another round a circle (strongly connected; Tarjan's
    algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return sorted(found)


def _called_name(call: ast.Call) -> str | None:
    fn = call.func
    return fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None


def functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def places_calling(names: frozenset[str], *roots: Path) -> list[str]:
    """``file:function`` of every function (the innermost) that calls one of ``names``."""
    out: set[str] = set()
    for path in python_files(*roots):
        tree = ast.parse(path.read_text(), str(path))
        for fn in functions(tree):
            inner = {id(n) for sub in ast.walk(fn) if sub is not fn and isinstance(sub, ast.FunctionDef |
                     ast.AsyncFunctionDef | ast.Lambda) for n in ast.walk(sub) if n is not sub}
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and id(n) not in inner]
            if any(_called_name(c) in names for c in calls):
                out.add(f"{path.relative_to(ROOT)}:{fn.name}")
    return sorted(out)


def any_at_stack_seams(*roots: Path) -> list[str]:
    """Annotations naming ``Any``: fields of the stack values, parameters and returns of the stack builders."""
    out = []
    for path in python_files(*roots):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in STACK_VALUES:
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and "Any" in ast.unparse(item.annotation):
                        out.append(f"{path.relative_to(ROOT)}:{node.name}.{ast.unparse(item.target)}: "
                                   f"{ast.unparse(item.annotation)}")
            elif isinstance(node, ast.FunctionDef) and node.name in STACK_BUILDERS:
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                for arg in args:
                    if arg.annotation is not None and "Any" in ast.unparse(arg.annotation):
                        out.append(f"{path.relative_to(ROOT)}:{node.name}({arg.arg}: {ast.unparse(arg.annotation)})")
                if node.returns is not None and "Any" in ast.unparse(node.returns):
                    out.append(f"{path.relative_to(ROOT)}:{node.name} -> {ast.unparse(node.returns)}")
    return out


def classes_defined_twice(*roots: Path) -> dict[str, list[str]]:
    """Class names defined (at any depth) in more than one file: name -> the files, sorted."""
    where: dict[str, set[str]] = {}
    for path in python_files(*roots):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, set()).add(str(path.relative_to(ROOT)))
    return {name: sorted(files) for name, files in sorted(where.items()) if len(files) > 1}


def census(*roots: Path) -> tuple[float, tuple[int, str], tuple[int, str]]:
    """``Any`` per 1,000 lines, ``(lines, file)`` of the largest file and ``(lines, file:function)`` of the largest
    function (a method counts by itself; a function's nested functions count in it)."""
    lines = anys = 0
    largest_file, largest_function = (0, ""), (0, "")
    for path in python_files(*roots):
        text = path.read_text()
        tree = ast.parse(text, str(path))
        rel = str(path.relative_to(ROOT))
        count = text.count("\n")
        lines += count
        largest_file = max(largest_file, (count, rel))
        anys += sum(1 for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "Any"
                    or isinstance(n, ast.Attribute) and n.attr == "Any")
        for fn in functions(tree):
            largest_function = max(largest_function, ((fn.end_lineno or fn.lineno) - fn.lineno + 1, f"{rel}:{fn.name}"))
    return 1000 * anys / max(lines, 1), largest_file, largest_function


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list every place, not just the counts")
    args = parser.parse_args()
    top = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    folders = sorted(p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    units, files = import_arrows()
    app = (CORE, ROOT / "demo", ROOT / "app.py")
    hints = places_calling(HINT_CALLS, CORE)
    triggers = places_calling(HINT_TRIGGERS, CORE)
    stacks = places_calling(STACK_VALUES | ASSEMBLERS, *app)
    stack_files = sorted({p.split(":")[0] for p in stacks})
    seams = any_at_stack_seams(*app)
    graph = file_imports(*app)
    upward, circled = upward_imports(graph), circles(graph)
    twice = classes_defined_twice(*app)
    any_rate, largest_file, largest_function = census(*app)
    print(f"top-level modules in kame_core/: {len(top)} (and {len(folders)} folders)")
    print(f"import arrows between the core's units: {len(units)}; between its files: {len(files)}")
    print(f"places that compute hint levels: {len(hints)}; places that have them computed: {len(triggers)}")
    print(f"places that assemble stacks: {len(stacks)} functions in {len(stack_files)} files")
    print(f"Any at the stack seams: {len(seams)}")
    print(f"whole repository: {len(graph)} files, {sum(map(len, graph.values()))} import edges between them, "
          f"{len(upward)} upward imports, {len(circled)} circles")
    print(f"classes of one name in more than one file: {len(twice)}; Any per 1,000 lines: {any_rate:.1f}; "
          f"largest file: {largest_file[1]} ({largest_file[0]} lines); largest function: {largest_function[1]} "
          f"({largest_function[0]} lines)")
    if args.list:
        for title, items in (("top-level modules", top), ("folders", folders), ("hint levels computed", hints),
                             ("hint levels had computed", triggers),
                             ("stack assembly", stacks), ("Any at the stack seams", seams),
                             ("upward imports", [f"{a} -> {b}" for a, b in upward]),
                             ("circles", [" <-> ".join(c) for c in circled]),
                             ("classes defined in more than one file",
                              [f"{name}: {', '.join(files)}" for name, files in twice.items()])):
            print(f"\n{title}:", *(f"  {item}" for item in items), sep="\n")


if __name__ == "__main__":
    main()
