"""Issue 29's measures of the layering: `python bench/layering_metrics.py [SRC_DIR]`.

Reads the source with `ast` (nothing is imported). Prints the largest module, the top-level modules,
model.py's imports both ways and the cycles (every import counted: module level, inside functions and
under `if TYPE_CHECKING`), and the signatures that spell out the recipe's options (8 or more of its 10).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from import_cycles import cycles, module_name, resolve

# the options of the recipe (EmbedOptions); a signature naming 8 or more of them spells the recipe out
RECIPE = {
    "layers",
    "combine",
    "pooling",
    "mask_special",
    "normalize",
    "long",
    "stride",
    "post",
    "prompt_name",
}
RECIPE.add("prompt")


def all_imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Every bertscope module `path` imports anywhere in it (TYPE_CHECKING and function bodies too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(name, path.name == "__init__.py", node)
            named = {f"{target}.{alias.name}" for alias in node.names}
            found.update(named & modules or {target})
    # an import naming a package's own __init__ counts (io -> io.formats -> io is a cycle); the parent
    # loading every import does by itself is named nowhere, so it makes no edge
    return {m for m in found if m in modules and m != name}


def graph(src: Path) -> dict[str, set[str]]:
    """Module -> the bertscope modules it imports (every import)."""
    files = {module_name(p, src): p for p in src.rglob("*.py")}
    return {m: all_imports(p, m, set(files)) for m, p in files.items()}


def option_signatures(src: Path, least: int = 8) -> list[str]:
    """Functions whose parameters spell out `least` or more of the recipe's options by name."""
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
                if len(names & RECIPE) >= least:
                    found.append(f"{path.relative_to(src)}:{node.name} ({len(names)} parameters)")
    return found


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    package = src / "bertscope"
    files = package.rglob("*.py")
    sizes = sorted((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(src))) for p in files)
    over = [f"{name} {n}" for n, name in sizes if n > 400]
    print(f"largest module: {sizes[-1][1]} {sizes[-1][0]} lines; over 400: {over}")
    top = sorted(p.name for p in package.glob("*.py"))
    print(f"top-level modules: {len(top)}")
    edges = graph(src)
    out = edges.get("bertscope.model", set())
    into = {m for m, targets in edges.items() if "bertscope.model" in targets}
    print(f"model.py imports {len(out)}, imported by {len(into)}, both ways {len(out & into)}")
    shells = ("bertscope.cli", "bertscope.server", "bertscope.integrations", "bertscope.__main__")
    below = sorted(m for m in into if m != "bertscope" and not m.startswith(shells))
    print(f"modules below the shells importing model.py: {len(below)} {below}")
    found = cycles(edges)
    print(f"cycles (every import counted): {len(found)}")
    for cycle in found[:40]:
        print("   ", " -> ".join([*cycle, cycle[0]]))
    sigs = option_signatures(src)
    print(f"signatures spelling out >= 8 recipe options: {len(sigs)}")
    for sig in sigs:
        print("   ", sig)


if __name__ == "__main__":
    main()
