"""The floors (issue 29): imports run downward only, with no cycles, and nothing below the facade imports it.

Every import counts: module level, inside functions and under `if TYPE_CHECKING`. `from bertscope import
load` (or `from .. import Model`) counts as importing model.py, where those names live.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# Modules that only keep an old public import path working (`from bertscope.post import ...`): on the top
# floor, so nothing inside bertscope can import them instead of the code's real home.
PUBLIC_PATHS = ("post", "similarity", "results", "spec", "tokens", "families", "senses")

# Lowest first. A module imports only from its own floor or below. Read as: the engine room; the backends;
# the features, each over an Encoder, with research/ (what the vectors mean); the corpus machinery they
# stream through (readers, sinks, levels, the resumable job, stores, search, occurrences, Ray) and the
# research that aggregates over corpora or stores; the facade (`Model`, `load`); the shells. A model is
# loaded by name through the loader registered low (core/loaders.py), so nothing below the facade needs it.
FLOORS: list[tuple[str, ...]] = [
    ("errors",),
    ("core",),
    ("backends",),
    (
        "static",
        "static_model",
        "static_engine",
        "anatomy",
        "explain",
        "attention",
        "chunk_embed",
        "encode",
        "vocab",
        "research",
        "verify",
    ),  # fmt: skip
    (
        "io",
        "distributed",
        "research.aggregate",
        "research.aggregate_ray",
        "research.static_kinds",
        "research.senses",
        "research.plots",
        "research.layer_plots",
        "research.structural_plots",
        "verify.store",
        "verify.rows",
        "verify.row_labels",
    ),  # fmt: skip
    ("model",),
    ("", "__main__", "cli", "server", "integrations", *PUBLIC_PATHS),
]
FACADE = "bertscope.model"
FACADE_NAMES = {"load", "Model", "ModelInfo"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_of(module: str) -> int:
    """The floor of a module: the longest matching entry of FLOORS wins (io.run before io)."""
    inner = module.removeprefix("bertscope").removeprefix(".")
    best, length = -1, -1
    for level, names in enumerate(FLOORS):
        for name in names:
            matches = inner == name or (name != "" and inner.startswith(name + "."))
            if matches and len(name) > length:
                best, length = level, len(name)
    assert best >= 0, f"{module} is on no floor: add it to FLOORS in tests/test_layering.py"
    return best


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """Every bertscope module that `path` imports, wherever the import statement stands."""
    found: set[str] = set()
    package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    found.add(f"{target}.{alias.name}")
                elif target == "bertscope" and alias.name in FACADE_NAMES:
                    found.add(FACADE)
                else:
                    found.add(target)
    # A package's own `__init__` named in an import counts: `from . import X` in io/formats.py runs io's
    # __init__, and if that imports io.formats the two are a cycle (the loading of a parent package that
    # every import does by itself is not named, so it makes no edge).
    return {m for m in found if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (SRC / "bertscope").rglob("*.py")}
    return {m: imports_of(p, m, set(files)) for m, p in files.items()}


def cycle_from(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, if there is any (depth-first search, colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_cycles() -> None:
    cycle = cycle_from(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_run_downward() -> None:
    upward = [
        f"{m} (floor {floor_of(m)}) imports {t} (floor {floor_of(t)})"
        for m, targets in sorted(graph().items())
        for t in sorted(targets)
        if floor_of(t) > floor_of(m)
    ]
    assert upward == []


def test_nothing_below_the_facade_imports_it() -> None:
    facade = floor_of(FACADE)
    below = sorted(m for m, targets in graph().items() if FACADE in targets and floor_of(m) < facade)
    assert below == []


def test_the_checks_see_every_kind_of_import(tmp_path: Path) -> None:
    """A TYPE_CHECKING import, a function-level one and `from .. import load` each make an edge."""
    code = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..model import Model\n"
    code += "def f():\n    from ..io import search\n    from .. import load\n"
    modules = {"bertscope.model", "bertscope.io.search", "bertscope.core.probe_layering", "bertscope.io"}
    probe_path = tmp_path / "probe_layering.py"
    probe_path.write_text(code, encoding="utf-8")
    assert imports_of(probe_path, "bertscope.core.probe_layering", modules) == {FACADE, "bertscope.io.search"}
    assert floor_of("bertscope.core.probe_layering") < floor_of(FACADE) < floor_of("bertscope.cli.embed")
    # research is a feature floor: every module of it, the corpus-wide ones too, is below the facade
    research = [m for m in graph() if m.startswith("bertscope.research")]
    assert research and all(floor_of(m) < floor_of(FACADE) for m in research)
    assert cycle_from({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    # a cycle through a package's __init__: io imports io.formats, which imports a name of io
    init, formats = tmp_path / "__init__.py", tmp_path / "formats.py"
    init.write_text("from .formats import RULES\n", encoding="utf-8")
    formats.write_text("from . import Store\n", encoding="utf-8")
    package = {"bertscope.io", "bertscope.io.formats"}
    edges = {"bertscope.io": imports_of(init, "bertscope.io", package)}
    edges["bertscope.io.formats"] = imports_of(formats, "bertscope.io.formats", package)
    assert cycle_from(edges) == ["bertscope.io", "bertscope.io.formats", "bertscope.io"]
    assert cycle_from({"a": {"b"}, "b": set()}) is None
