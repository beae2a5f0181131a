"""The docs site: every generated output block is what its command prints today, and the site builds."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
# A number with a fraction may move this much between CPUs: float32 rounds differently on AVX2 and
# AVX-512 kernels, and a probe's classifier or a 6-digit sum shows it (0.587 vs 0.584, 0.479281 vs
# 0.479282). Text, integers and the order of rows must match exactly.
FLOAT_SLACK = 0.01


def same_but_float_noise(current: str, regenerated: str) -> bool:
    """Whether two lines read the same: text and integers exactly, fractions within `FLOAT_SLACK`."""
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
    """mkdocs with `strict: true`: a broken link, a missing page or a bad docstring reference fails."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert (tmp_path / "site" / "index.html").is_file() and (
        tmp_path / "site" / "api" / "index.html"
    ).is_file()
