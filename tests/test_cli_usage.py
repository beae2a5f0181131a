"""A usage line shows what --help shows: a command's hidden positional (the older form of -i/--input,
still read) is left out of it, as it is left out of the help rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import run_main

HIDDEN_POSITIONAL = [("calibrate",), ("eval", "pairs"), ("contextuality",), ("fit-post",)]


@pytest.mark.parametrize("command", HIDDEN_POSITIONAL, ids=" ".join)
def test_the_usage_line_leaves_the_hidden_positional_out(command: tuple[str, ...]) -> None:
    shown = run_main(*command, "--help")
    assert shown.code == 0, shown
    usage = next(line.strip() for line in shown.stdout.splitlines() if "Usage:" in line)
    assert usage == f"Usage: bertscope {' '.join(command)} [OPTIONS]", usage
    assert "PAIRS_FILE" not in shown.stdout.upper() and "[CORPUS]" not in shown.stdout.upper()


def test_the_hidden_positional_is_still_read(tmp_path: Path) -> None:
    # the older form reaches the command, which refuses it beside -i in its own words
    pairs = str(Path(__file__).parent / "data" / "labelled_pairs.tsv")
    both = run_main("calibrate", pairs, "-i", pairs, "-o", str(tmp_path / "t.json"))
    assert both.code != 0 and "give the pairs file once" in both.stderr, both
