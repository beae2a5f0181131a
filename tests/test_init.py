"""The package's public names: lazy (PEP 562), yet every one in `__all__` is there."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest

import bertscope


@pytest.mark.parametrize("name", bertscope.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(bertscope, name) is not None
    assert name in dir(bertscope)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        bertscope.lod  # type: ignore[attr-defined]  # noqa: B018


def test_same_objects_as_their_modules() -> None:
    from bertscope.errors import JobInterrupted
    from bertscope.io.job import embed_corpus
    from bertscope.model import load

    assert bertscope.load is load and bertscope.embed_corpus is embed_corpus
    assert bertscope.JobInterrupted is JobInterrupted


# The public surface the docs show: what docs/api.md renders, every import line of the pages, and the
# import paths kept when modules moved to core/ and research/ -----------------------------------------

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
IMPORT_LINE = re.compile(
    r"^\s*(?:from (bertscope[\w.]*) import ([\w, ]+)|import (bertscope[\w.]*)(?: as \w+)?)\s*(?:#.*)?$"
)
# old public path -> where its code lives now (the old path re-exports every name of the new home)
MOVED = {
    "bertscope.post": "bertscope.core.post",
    "bertscope.similarity": "bertscope.core.similarity",
    "bertscope.results": "bertscope.core.results",
    "bertscope.spec": "bertscope.core.spec",
    "bertscope.tokens": "bertscope.core.tokens",
    "bertscope.families": "bertscope.core.families",
    "bertscope.senses": "bertscope.research.senses",
}


def docs_imports() -> list[tuple[str, str, list[str]]]:
    """(page:line, module, names) of every `from bertscope... import ...` / `import bertscope...` line."""
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if match := IMPORT_LINE.match(line):
                module = match.group(1) or match.group(3)
                names = [n.strip() for n in (match.group(2) or "").split(",") if n.strip()]
                found.append((f"{page.relative_to(REPO)}:{number}", module, names))
    return found


def test_the_docs_import_lines_are_found() -> None:
    where = {module for _, module, _ in docs_imports()}
    assert {"bertscope", "bertscope.post", "bertscope.vocab", "bertscope.server"} <= where


@pytest.mark.parametrize(
    ("where", "module", "names"), docs_imports(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_import_the_docs_show_works(where: str, module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{where}: {module} has no {missing}"


def test_every_name_docs_api_renders_resolves() -> None:
    """docs/api.md renders `::: bertscope` (every name of its `__all__`): each one is there."""
    targets = re.findall(r"^::: ([\w.]+)", (REPO / "docs" / "api.md").read_text(encoding="utf-8"), re.M)
    assert targets == ["bertscope"]
    for target in targets:
        module = importlib.import_module(target)
        missing = [name for name in module.__all__ if getattr(module, name, None) is None]
        assert not missing, f"{target} lists {missing} in __all__ but has no such name"


@pytest.mark.parametrize(("old", "home"), MOVED.items())
def test_a_moved_module_keeps_its_public_path(old: str, home: str) -> None:
    """`from bertscope.post import fit_post_on_texts` works as before the move, giving the same objects."""
    kept, moved = importlib.import_module(old), importlib.import_module(home)
    assert sorted(kept.__all__) == sorted(moved.__all__)
    for name in moved.__all__:
        assert getattr(kept, name) is getattr(moved, name), f"{old}.{name}"


def test_every_moved_public_module_is_kept() -> None:
    """A module moved away from the top of src/bertscope/ (git history) keeps its path, or is listed here
    as never public: the shells (cli, server, explorer), private ones and the engine room's internals."""
    never_public = {
        "_enums", "cli", "cli_bench", "cli_corpus", "cli_embed", "cli_explore", "cli_research", "cli_serve",
        "server", "server_batching", "server_http", "server_routes", "server_schemas", "explorer_routes",
        "analysis", "baseline", "chunking", "contextual", "contextuality", "engine", "folder", "forward",
        "layers", "loading", "modes", "onnx_backend", "plots", "pooling", "progress", "prompts",
    }  # fmt: skip
    done = subprocess.run(
        ["git", "log", "--diff-filter=DR", "--name-status", "--format=", "--", "src/bertscope"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"no git history here: {done.stderr.strip()[:200]}")
    gone = {
        Path(line.split("\t")[1]).stem
        for line in done.stdout.splitlines()
        if line and line.split("\t")[1].count("/") == 2 and line.split("\t")[1].endswith(".py")
    }
    top = REPO / "src" / "bertscope"
    # a module that became a package (distributed.py -> distributed/) keeps its import path
    gone = {
        name
        for name in gone
        if not (top / f"{name}.py").exists() and not (top / name / "__init__.py").exists()
    }
    kept = {old.removeprefix("bertscope.") for old in MOVED}
    assert gone - never_public - kept == set(), "a public module moved without its old path kept"
