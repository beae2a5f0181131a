"""The docs site: every generated output block is what its command prints today, and the site builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


def test_every_output_block_is_what_its_command_prints() -> None:
    """`cog --check` reruns every block's command; a stale block names itself (`make docs` rewrites it)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "--diff", "-I", "docs", *PAGES],
        cwd=REPO, capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


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
