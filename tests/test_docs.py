"""The docs site: every generated output block is what its command prints today, every plain Python block
runs, and the site builds."""

from __future__ import annotations

import contextlib
import difflib
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import bertscope
import bertscope.model

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
# A number with a fraction may move this much between CPUs: float32 rounds differently on AVX2 and
# AVX-512 kernels, and a probe's classifier or a 6-digit sum shows it (0.587 vs 0.584, 0.479281 vs
# 0.479282). Text, integers and the order of rows must match exactly.
FLOAT_SLACK = 0.01
# A table's padding and rules follow its widest cell, and a float32 noise figure's digits (`<1e-5` in the
# pages, docs/cog_run.py) set that width on one CPU and not on another: runs of spaces and of rule
# characters count as one, so a table laid out one column wider reads the same.
LAYOUT = re.compile(r" +|─+|━+|═+")


def same_but_float_noise(current: str, regenerated: str) -> bool:
    """Whether two lines read the same: text and integers exactly, fractions within `FLOAT_SLACK`."""
    current, regenerated = (LAYOUT.sub(lambda run: run.group()[0], line) for line in (current, regenerated))
    if NUMBER.sub("#", current) != NUMBER.sub("#", regenerated):
        return False
    for a, b in zip(NUMBER.findall(current), NUMBER.findall(regenerated), strict=True):
        if a == b:
            continue
        fractional = any(c in a + b for c in ".e")
        if not fractional or abs(float(a) - float(b)) > FLOAT_SLACK * max(1.0, abs(float(a))):
            return False
    return True


def stale_lines(current: str, regenerated: str) -> list[str]:
    """The unified diff of two pages where they differ by more than float noise (empty if they match)."""
    old, new = current.splitlines(), regenerated.splitlines()
    if len(old) == len(new) and all(same_but_float_noise(a, b) for a, b in zip(old, new, strict=True)):
        return []
    return list(difflib.unified_diff(old, new, "current", "regenerated", lineterm=""))


@pytest.mark.parametrize(
    ("current", "regenerated", "same"),
    [
        ("│ 0 │ 0.812 │ 0.658 │", "│ 0 │ 0.815 │ 0.655 │", True),
        ("(0.479281 vs 0.479281)", "(0.479282 vs 0.479281)", True),
        ("│ 0 │ 0.812 │", "│ 0 │ 0.912 │", False),
        ("the 81 contributions", "the 82 contributions", False),
        ("top: bank", "top: river", False),
        ("│ 5     │    <1e-5 │ 1.00000000 │", "│ 5     │   <1e-5  │ 1.00000000 │", True),
        ("└───────┴──────────┴", "└───────┴───────────┴", True),
        ("│ 5 │ <1e-5 │", "│ 5 │ <1e-5 │ 1 │", False),
        ("the cosine", "thecosine", False),
    ],
)
def test_float_noise_is_allowed_and_nothing_else(current: str, regenerated: str, same: bool) -> None:
    """The check's tolerance: a last digit may move, a word, an integer or a real change may not."""
    assert same_but_float_noise(current, regenerated) is same


def test_every_output_block_is_what_its_command_prints(tmp_path: Path) -> None:
    """cog reruns every block's command on a copy of the pages; a stale block shows its diff
    (`make docs` rewrites it). The checkout, its pictures included, is left as it was."""
    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / page, tmp_path / page)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_DOCS_CHECK": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", "-r", "-I", "docs", *(str(tmp_path / p) for p in PAGES)],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    stale = {p: stale_lines((REPO / p).read_text(), (tmp_path / p).read_text()) for p in PAGES}
    report = "\n".join(f"{p} is stale (make docs):\n" + "\n".join(d[:60]) for p, d in stale.items() if d)
    assert not report, report


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """mkdocs with `strict: true`: a broken link, a missing page or a bad docstring reference fails. Not
    with `-q`: it drops the warnings strict mode counts, and the build passed where `make docs` failed."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert (tmp_path / "site" / "index.html").is_file() and (
        tmp_path / "site" / "api" / "index.html"
    ).is_file()


# The plain Python blocks: every ```python block that cog does not write, run page by page -------------

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
COG_REGION = re.compile(r"\[\[\[cog.*?\[\[\[end\]\]\]", re.S)
# The address the service page's client examples call; the check serves the bundled model there instead.
DOCS_SERVER, DOCS_API_KEY = "http://127.0.0.1:8000", "s3cret"


def plain_python_blocks(page: str) -> list[tuple[int, str]]:
    """(line, code) of each ```python block of `page` outside a cog region (cog checks those)."""
    text = (REPO / page).read_text(encoding="utf-8")
    generated = [m.span() for m in COG_REGION.finditer(text)]
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in PYTHON_BLOCK.finditer(text)
        if not any(start <= m.start() < end for start, end in generated)
    ]


PYTHON_PAGES = [page for page in PAGES if plain_python_blocks(page)]


def test_plain_python_blocks_are_found() -> None:
    """The block finder sees the plain blocks (research.md's import among them) and none that cog writes."""
    research = "\n".join(code for _, code in plain_python_blocks("docs/research.md"))
    assert "from bertscope.post import fit_post_on_texts" in research
    assert "add_tokens" not in research  # inside a cog region: cog runs it
    assert {"docs/research.md", "docs/corpus.md", "docs/service.md"} <= set(PYTHON_PAGES)


@contextlib.contextmanager
def standin_load(bundled: bertscope.Model, named: Callable[[], bertscope.Model]) -> Iterator[None]:
    """`bertscope.load` (and the corpus jobs' `open_encoder`) for the blocks: the arguments are checked
    against the real signature, then no name gives the bundled model and a name (a hub id, unreachable
    here) the bundled weights with prompts, each loaded once. `mode="fast"` gives the bundled model too:
    its first measurement takes minutes."""
    import bertscope.core.encoder as encoder

    homes = [(bertscope.model, "load"), (encoder, "open_encoder")]
    swaps = []
    for home, attr in homes:
        signature = inspect.signature(getattr(home, attr))

        def standin(*args: Any, _signature: inspect.Signature = signature, **kwargs: Any) -> bertscope.Model:
            name = _signature.bind(*args, **kwargs).arguments.get("name")
            return bundled if name is None else named()

        swaps.append((home, attr, getattr(home, attr), standin))

    def rebind(attr: str, old: object, new: object) -> None:
        for module in list(sys.modules.values()):
            ours = getattr(module, "__name__", "").startswith("bertscope")
            if ours and getattr(module, attr, None) is old:
                setattr(module, attr, new)

    for _, attr, original, standin in swaps:
        rebind(attr, original, standin)
    try:
        yield
    finally:
        # modules first imported by a block took a stand-in: they get the real function back too
        for _, attr, original, standin in swaps:
            rebind(attr, standin, original)


@contextlib.contextmanager
def docs_world(
    tmp_path: Path, bundled: bertscope.Model, bundled_path: Path, code: str
) -> Iterator[dict[str, str]]:
    """Where the blocks run: a scratch folder with examples/ (pos.conllu: its first 20 sentences, enough for
    5 folds in a few seconds), the files the pages name (corpus.txt: the examples' news and the bank
    contexts; docs.jsonl: examples/docs.jsonl), the stand-in `load`, and the
    service on the bundled model where a block calls it. Yields the text replacements for the code."""
    (tmp_path / "examples").mkdir()
    for example in (REPO / "examples").iterdir():
        (tmp_path / "examples" / example.name).symlink_to(example)
    (tmp_path / "examples" / "pos.conllu").unlink()
    sentences = (REPO / "examples" / "pos.conllu").read_text(encoding="utf-8").split("\n\n")
    (tmp_path / "examples" / "pos.conllu").write_text("\n\n".join(sentences[:20]) + "\n", encoding="utf-8")
    lines = [(REPO / f).read_text(encoding="utf-8") for f in ("examples/news.txt", "tests/data/contexts.txt")]
    (tmp_path / "corpus.txt").write_text("".join(lines), encoding="utf-8")
    shutil.copyfile(REPO / "examples" / "docs.jsonl", tmp_path / "docs.jsonl")
    named: dict[str, bertscope.Model] = {}
    real_load = bertscope.model.load

    def prompted_model() -> bertscope.Model:
        if not named:
            from prompted import with_prompts

            folder = with_prompts(bundled_path, tmp_path / "named-model", include_prompt=True, default=None)
            named["model"] = real_load(folder, device="cpu")
        return named["model"]

    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.chdir(tmp_path))
        replace = {}
        if DOCS_SERVER in code:
            from test_server import serving

            replace[DOCS_SERVER] = stack.enter_context(serving(bundled, api_key=DOCS_API_KEY))
        stack.enter_context(standin_load(bundled, prompted_model))
        yield replace


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_every_plain_python_block_runs(
    page: str, bundled: bertscope.Model, bundled_path: Path, tmp_path: Path
) -> None:
    """A page's blocks run in order in one namespace, as a reader follows the page; a moved import, a
    renamed option or a name the block never defines fails here, with the page and line."""
    blocks = plain_python_blocks(page)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    with docs_world(tmp_path, bundled, bundled_path, "\n".join(code for _, code in blocks)) as replace:
        for line, code in blocks:
            for old, new in replace.items():
                code = code.replace(old, new)
            try:
                exec(compile(code, f"{page}:{line}", "exec"), namespace)  # noqa: S102
            except Exception as exc:
                pytest.fail(f"the Python block at {page}:{line} fails: {type(exc).__name__}: {exc}")
