"""A usage line shows what --help shows: calibrate's hidden positional (the older form of -i/--input,
still read) is left out of it, as it is left out of the help rows."""

from __future__ import annotations

from pathlib import Path

from console import run_main


def test_calibrate_usage_leaves_the_hidden_positional_out(tmp_path: Path) -> None:
    shown = run_main("calibrate", "--help")
    assert shown.code == 0, shown
    usage = next(line.strip() for line in shown.stdout.splitlines() if "Usage:" in line)
    assert usage == "Usage: bertscope calibrate [OPTIONS]", usage
    assert "pairs_file" not in shown.stdout.lower() and "PAIRS" not in shown.stdout
    # still read: the older form reaches the command, which refuses it beside -i in its own words
    pairs = str(Path(__file__).parent / "data" / "labelled_pairs.tsv")
    both = run_main("calibrate", pairs, "-i", pairs, "-o", str(tmp_path / "t.json"))
    assert both.code != 0 and "give the pairs file once" in both.stderr, both
