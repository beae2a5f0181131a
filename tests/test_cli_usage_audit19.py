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


def test_a_command_missing_its_input_is_a_usage_error() -> None:
    """contextuality without -i exited 1 where geometry (click's required option) exits 2 (review)."""
    for args, said in (
        (("contextuality",), "error: name the sentences with -i/--input FILE"),
        (("calibrate",), "error: name the pairs file with -i/--input FILE"),
        (("similar", "a cat"), "error: name the store to search with --store FILE"),
        (("senses", "bank"), "error: name the token or word store with --store FILE"),
    ):
        ran = run_main(*args)
        assert ran.code == 2 and ran.stderr.startswith(said), ran
