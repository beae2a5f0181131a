"""A command that needs texts and got none is a usage error, as click's own missing argument: exit 2 and
`see bertscope CMD --help` (docs/errors.md's scheme), not exit 1 as a refused value (audit 19f)."""

from __future__ import annotations

from pathlib import Path

from console import run_main


def test_embed_with_no_texts_is_a_usage_error() -> None:
    ran = run_main("embed")
    assert ran.code == 2, ran
    assert ran.stderr.startswith("error: no texts given: pass them as arguments, or -i FILE"), ran.stderr
    assert "see `bertscope embed --help`" in " ".join(ran.stderr.split()), ran.stderr


def test_a_corpus_job_with_no_texts_is_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    ran = run_main("embed", "-o", str(out))
    assert ran.code == 2, ran
    assert ran.stderr.startswith("error: no texts given: pass them as arguments, or -i FILE"), ran.stderr
    assert not out.exists()
