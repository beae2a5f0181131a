"""Count import cycles among bertscope's modules: `python bench/import_cycles.py [SRC_DIR]`.

Reads the source with `ast` (nothing is imported). `import-time` counts the imports a module runs when it is
imported (module level, outside `if TYPE_CHECKING`); `all` adds the imports inside functions too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path, name: str, modules: set[str], *, top_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inside = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if top_only and not inside:
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = resolve(name, path.name == "__init__.py", child)
                named = {f"{target}.{alias.name}" for alias in child.names}
                # `from . import sub` needs the submodule only; `from .mod import name` needs mod
                found.update(named & modules or {target})
            visit(child, inside)

    visit(tree, True)
    # an import naming a package's own __init__ counts (io -> io.formats -> io is a cycle); the parent
    # loading every import does by itself is named nowhere, so it makes no edge
    return {m for m in found if m in modules and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle, each listed once from its smallest module name."""
    found: list[list[str]] = []
    order = sorted(graph)
    for start in order:
        allowed = set(order[order.index(start) :])
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    found.append(path)
                elif nxt in allowed and nxt not in path:
                    stack.append((nxt, [*path, nxt]))
    return found


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    files = {module_name(p, src): p for p in src.rglob("*.py")}
    modules = set(files)
    for label, top_only in (("import-time", True), ("all", False)):
        graph = {m: imports(p, m, modules, top_only=top_only) for m, p in files.items()}
        found = cycles(graph)
        print(f"{label}: {len(found)} cycles")
        for cycle in found:
            print("   ", " -> ".join([*cycle, cycle[0]]))


if __name__ == "__main__":
    main()
