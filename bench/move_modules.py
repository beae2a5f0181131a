"""Move bertscope modules and rewrite every import to them: `python bench/move_modules.py OLD=NEW ...`.

OLD and NEW are dotted names under bertscope (`tokens=core.tokens`). Runs `git mv`, then rewrites relative
imports in src/bertscope (resolved from each file's old place, re-spelled from its new place) and the
dotted names `bertscope.OLD` everywhere in src, tests, bench and docs. Used for issue 29's floors.
`python bench/move_modules.py --rewrite` re-spells the imports of code written against the old places
(a branch merged after the moves), with the moves of issue 29 (MOVED); it changes nothing else.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def module_of(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    package = parts[-1] == "__init__"
    if package:
        parts.pop()
    return ".".join(parts), package


def resolve(current: str, package: bool, level: int, module: str | None) -> str:
    base = current.split(".") if package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def relative(current: str, package: bool, target: str) -> str:
    """`from X import` spelling of absolute `target` from module `current`."""
    here = current.split(".") if package else current.split(".")[:-1]
    there = target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    dots = "." * (len(here) - common + 1)
    return dots + ".".join(there[common:])


MOVED = [
    *(f"{m}=core.{m}" for m in "_enums engine families folder forward layers loading pooling".split()),
    *(f"{m}=core.{m}" for m in "post progress prompts results similarity spec tokens chunking".split()),
    *(f"{m}=research.{m}" for m in "analysis contextuality baseline senses plots".split()),
]


def main(pairs: list[str]) -> None:
    rewrite_only = pairs == ["--rewrite"]
    given = MOVED if rewrite_only else pairs
    moves = {f"bertscope.{a}": f"bertscope.{b}" for a, b in (p.split("=") for p in given)}
    files = sorted((SRC / "bertscope").rglob("*.py"))
    old_names = {path: module_of(path) for path in files}
    for old, new in ({} if rewrite_only else moves).items():
        src = SRC / (old.replace(".", "/") + ".py")
        dst = SRC / (new.replace(".", "/") + ".py")
        subprocess.run(["git", "mv", str(src), str(dst)], check=True, cwd=ROOT)
        old_names[dst] = old_names.pop(src)

    def mapped(name: str) -> str:
        for old, new in moves.items():
            if name == old or name.startswith(old + "."):
                return new + name[len(old) :]
        return name

    for path, (old_current, package) in old_names.items():
        new_current = mapped(old_current)
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            target = resolve(old_current, package, node.level, node.module)
            subs = {mapped(f"{target}.{a.name}") for a in node.names if f"{target}.{a.name}" in moves}
            if subs:  # `from . import static`: the names are modules
                parents = {s.rsplit(".", 1)[0] for s in subs}
                if len(parents) != 1 or len(subs) != len(node.names):
                    print(f"FIX BY HAND {path}:{node.lineno}", file=sys.stderr)
                    continue
                new_target = parents.pop()
            else:
                new_target = mapped(target)
            spelled = relative(new_current, package, new_target)
            line = lines[node.lineno - 1]
            lines[node.lineno - 1] = re.sub(
                r"from\s+\.[\w.]*\s+import", f"from {spelled} import", line, count=1
            )
        path.write_text("".join(lines), encoding="utf-8")

    pattern = re.compile(r"\bbertscope\.(" + "|".join(re.escape(o[10:]) for o in moves) + r")\b")
    others = [*SRC.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    others += [*(ROOT / "docs").rglob("*.md")] if (ROOT / "docs").exists() else []
    for path in others:
        text = path.read_text(encoding="utf-8")
        new = pattern.sub(lambda m: mapped("bertscope." + m.group(1)), text)
        if new != text:
            path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
