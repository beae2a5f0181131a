"""Runs the commands and code whose output the docs show, in one process, for cog (`cog -I docs`).

`make docs` regenerates every block (`cog -r`); `tests/test_docs.py` fails when one is stale
(`cog --check`). Each command runs in-process on the bundled model, loaded once per cog run, in a
scratch folder holding a link to examples/, with the terminal 100 columns wide, on torch (the exact
reference, not the runtime this machine's exact default picks), with float32 noise below 1e-5 printed as
`<1e-5`: the output is the same on every machine. Timings never appear here: stderr (progress, timings)
is left out unless asked for. A picture a command writes with `-o NAME.png` is copied to docs/img/.
"""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ["COLUMNS"] = "100"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("BERTSCOPE_MODEL", None)

REPO = Path(__file__).resolve().parents[1]
_SCRATCH: Path | None = None
_LOADED: dict[str, Any] = {}


def _tests_on_path() -> None:
    """The tests' console runner and tiny-model builder importable (cog restores sys.path between
    blocks, so each use puts it back)."""
    if str(REPO / "tests") not in sys.path:
        sys.path.insert(0, str(REPO / "tests"))


def _scratch() -> Path:
    """A scratch folder per page (its own files), with examples/ and tests/ reachable by their names."""
    global _SCRATCH
    if _SCRATCH is None:
        _SCRATCH = Path(tempfile.mkdtemp(prefix="bertscope-docs-"))
        atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
        _patch_load()
    try:
        import cog

        page = Path(str(cog.inFile)).stem or "page"
    except (ImportError, AttributeError):
        page = "page"
    folder = _SCRATCH / page
    if not folder.exists():
        (folder / "demo").mkdir(parents=True)
        for shared in ("examples", "tests"):
            (folder / shared).symlink_to(REPO / shared)
    os.chdir(folder)
    return folder


def _patch_load() -> None:
    """Every command's `load(...)` with the same arguments returns the same loaded model."""
    import bertscope.model as facade
    from bertscope.static_model import is_model2vec

    original = facade.load

    def load(*args: Any, **kwargs: Any) -> Any:
        # torch, the reference: the exact default's choice (and its last-bit rounding) differs by machine;
        # a static model (model2vec folder) runs no forward, so it takes no backend
        static = bool(args) and is_model2vec(args[0])
        if not static and kwargs.get("backend") in (None, "auto") and kwargs.get("mode") in (None, "exact"):
            kwargs["backend"] = "torch"
        key = repr((args, sorted(kwargs.items())))
        if key not in _LOADED:
            _LOADED[key] = original(*args, **kwargs)
        return _LOADED[key]

    import bertscope

    bertscope.load = load  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        ours = getattr(module, "__name__", "").startswith("bertscope")
        if ours and getattr(module, "load", None) is original:
            module.load = load  # type: ignore[attr-defined]


def output(command: str, *, stderr: bool = False, fails: bool = False) -> str:
    """What `command` (a `bertscope ...` line) prints on stdout (and stderr if asked), run in-process.

    A command that fails raises (the docs never show a broken command by accident), unless `fails`:
    then its error line is the output.
    """
    _scratch()
    _tests_on_path()
    from console import run_main

    argv = shlex.split(command)
    assert argv[0] == "bertscope", command
    ran = run_main(*argv[1:])
    if bool(ran.code) != fails:
        raise RuntimeError(f"{command!r} exited {ran.code}: {ran.stderr.strip()[-800:]}")
    text = ran.stdout + (ran.stderr if stderr or fails else "")
    return _stable("\n".join(line.rstrip() for line in text.splitlines()).strip("\n"))


def _stable(text: str) -> str:
    """Float32 rounding noise (a number below 1e-5 in scientific notation) as `<1e-5`: its digits differ
    between CPUs, and a page must read the same wherever it is generated."""
    import re

    # a job's summary line carries its speed: machine-dependent, so it is left out
    text = "\n".join(line for line in text.splitlines() if not re.search(r"\d texts/s\)", line))
    return re.sub(r"\b\d(?:\.\d+)?e-(?:0[6-9]|[1-9]\d)\b", lambda m: "<1e-5".rjust(len(m.group())), text)


def sh(*commands: str, stderr: bool = False, fails: bool = False) -> None:
    """A console block: each command after `$ `, then its output."""
    import cog

    parts = [f"$ {command}\n{output(command, stderr=stderr, fails=fails)}".rstrip() for command in commands]
    for command in commands:
        _keep_pictures(command)
    cog.outl("```console\n" + "\n\n".join(parts) + "\n```")


def _keep_pictures(command: str) -> None:
    """The PNG pictures a command wrote (`-o NAME.png`) go to docs/img/, where the pages show them.

    Not while the tests check the pages (`BERTSCOPE_DOCS_CHECK`): a check leaves the checkout as it was."""
    if os.environ.get("BERTSCOPE_DOCS_CHECK"):
        return
    argv = shlex.split(command)
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in ("-o", "--output") and value.endswith(".png") and Path(value).is_file():
            target = REPO / "docs" / "img" / Path(value).name
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(value, target)


def quiet(*commands: str) -> None:
    """Run commands whose output the page does not show (files the next block reads)."""
    for command in commands:
        output(command)


def py(code: str) -> None:
    """A Python block: each statement run, each expression's value shown below it as a comment."""
    import ast

    import cog

    _scratch()
    scope: dict[str, Any] = {}
    shown: list[str] = []
    code = code.strip("\n")
    tree = ast.parse(code)
    source = code.splitlines()
    for node in tree.body:
        text = "\n".join(source[node.lineno - 1 : node.end_lineno])
        shown.append(text)
        if isinstance(node, ast.Expr):
            value = eval(compile(ast.Expression(node.value), "<docs>", "eval"), scope)
            if value is not None:
                shown.extend(f"# {line}" for line in _show(value).splitlines())
        else:
            exec(compile(ast.Module([node], []), "<docs>", "exec"), scope)
    cog.outl("```python\n" + "\n".join(shown) + "\n```")


def _show(value: Any) -> str:
    import numpy as np

    with np.printoptions(precision=4, suppress=True, threshold=12, edgeitems=3, linewidth=100):
        text = repr(_rounded(value))
    return text if len(text) < 600 else text[:600] + " ..."


def _rounded(value: Any) -> Any:
    """Floats to 4 decimals, inside lists, tuples and dicts too: their last digits differ between CPUs."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(v) for v in value)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def include(path: str) -> None:
    """The text of a file of the repository (bench/BENCHMARKS.md on the site)."""
    import cog

    cog.out((REPO / path).read_text(encoding="utf-8"))


def write(name: str, text: str) -> None:
    """A small file in the scratch folder, for the commands after it."""
    (_scratch() / name).write_text(text, encoding="utf-8")


def tiny(family: str, name: str, **options: Any) -> None:
    """A tiny random `family` model in the scratch folder (the tests' builder, seeded: the same each run)."""
    _tests_on_path()
    from tiny_models import build_tiny_model

    if not (_scratch() / name).exists():
        build_tiny_model(family, _scratch() / name, **options)


def shipping_code(source: str, name: str) -> None:
    """A copy of the model folder `source` whose config maps AutoModel to code the folder ships."""
    import json
    import shutil

    folder = _scratch() / name
    if not folder.exists():
        shutil.copytree(_scratch() / source, folder)
        (folder / "modeling_custom.py").write_text("# the folder's own model code\n")
        config = json.loads((folder / "config.json").read_text())
        config["auto_map"] = {"AutoModel": "modeling_custom.CustomBertModel"}
        (folder / "config.json").write_text(json.dumps(config))


def changed_copy(name: str, tokens: list[str]) -> None:
    """The bundled model's folder copied as `name`, the input rows of `tokens` rescaled and nudged
    (a stand-in for fine-tuning that moved those rows)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from bertscope.core.folder import bundled_path

    folder = _scratch() / name
    if folder.exists():
        return
    shutil.copytree(bundled_path(), folder)
    weights = load_file(folder / "model.safetensors")
    rows = weights["embeddings.word_embeddings.weight"]
    vocab = {line: i for i, line in enumerate((folder / "vocab.txt").read_text().splitlines())}
    generator = torch.Generator().manual_seed(0)
    for k, token in enumerate(tokens):
        i = vocab[token]
        rows[i] = rows[i] * (1 + k) + torch.randn(rows.shape[1], generator=generator) * 0.05
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
