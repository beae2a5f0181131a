"""`plot static --limit N` draws the first N whole-word pieces: `--limit` is "the first N" as in `bench` and
`eval pairs` (`--top` is its old spelling, still read, and elsewhere the old spelling of `--top-k`)."""

from __future__ import annotations

from pathlib import Path

from console import run_main


def test_limit_draws_the_first_pieces_and_top_is_its_old_spelling(tmp_path: Path) -> None:
    ran = run_main("plot", "static", "--limit", "12", "-o", str(tmp_path / "a.png"))
    assert ran.code == 0 and (tmp_path / "a.png").stat().st_size > 0, ran.stderr
    old = run_main("plot", "static", "--top", "12", "-o", str(tmp_path / "b.png"))
    assert old.code == 0 and (tmp_path / "b.png").read_bytes() == (tmp_path / "a.png").read_bytes()
    both = run_main("plot", "static", "--limit", "12", "--top", "12", "-o", str(tmp_path / "c.png"))
    assert both.code == 1 and "--top is the old spelling of --limit; give --limit only" in both.stderr
    neither = run_main("plot", "static", "-o", str(tmp_path / "d.png"))
    assert (
        neither.code == 1 and "name word pieces (e.g. king queen bread), or give --limit N" in neither.stderr
    )


def test_too_few_pieces_are_counted_in_words(tmp_path: Path) -> None:
    one = run_main("plot", "static", "king", "-o", str(tmp_path / "one.png"))
    assert one.code == 1 and "error: 1 piece given; a 2-D picture needs at least 3" in one.stderr
    two = run_main("plot", "static", "king", "queen", "-o", str(tmp_path / "two.png"))
    assert two.code == 1 and "2 pieces given" in two.stderr and not (tmp_path / "two.png").exists()
