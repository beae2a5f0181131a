"""Options that ran silently wrong and are now refused in one line: pooler pooling on a layer it was not
trained on, chunk options without the chunking that reads them, non-positive contextuality counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bertscope
from bertscope.research.contextuality import contextuality
from console import run_main


def test_pooler_pooling_is_refused_on_a_layer_it_was_not_trained_on(bundled: bertscope.Model) -> None:
    assert bundled.embed("a cat", pooling="pooler", layers=-1).vectors.shape[0] == 1
    for layers in (3, "0", "5,6"):
        with pytest.raises(bertscope.InvalidSpec, match="trained on the last layer .*pooling='cls'"):
            bundled.embed("a cat", pooling="pooler", layers=layers)


def test_pooler_pooling_on_layer_3_is_refused_on_the_command_line(bundled: bertscope.Model) -> None:
    ran = run_main("embed", "a cat", "--pooling", "pooler", "--layers", "3")
    assert ran.code == 1
    assert "trained on the last layer" in ran.stderr and "--pooling cls" in ran.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--chunk-size", "4"], "--chunk-size 4: it applies with --level chunks, --chunks tokens"),
        (["--chunk-overlap", "1"], "--chunk-overlap 1: it applies with --level chunks, --chunks tokens"),
        (
            ["--chunks", "sentence", "--chunk-size", "4"],
            r"--chunk-size 4: it applies with --chunks tokens \(--chunks sentence here\); add --chunks "
            "tokens or drop --chunk-size",
        ),
        (["--naive"], "--late/--naive apply with --chunks"),
        (["--chunks", "sentence", "--long", "truncate"], "needs the whole document.*--long window"),
    ],
)
def test_chunk_options_the_run_would_not_read_are_refused(flags: list[str], message: str) -> None:
    ran = run_main("embed", "Berlin is big. The city is old.", *flags)
    assert ran.code == 1
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert re.search(message, ran.stderr), ran.stderr


def test_chunk_options_that_apply_still_run(bundled: bertscope.Model) -> None:
    for flags in (
        ["--chunks", "tokens", "--chunk-size", "4", "--chunk-overlap", "1"],
        ["--chunks", "sentence", "--naive", "--long", "truncate"],
        ["--chunks", "sentence", "--long", "window"],
    ):
        ran = run_main("embed", "Berlin is big. The city is old.", *flags, "--json")
        assert ran.code == 0, (flags, ran.stderr)


@pytest.mark.parametrize(
    ("keyword", "value"), [("top", -5), ("top", 0), ("min_contexts", -3), ("max_contexts", 1)]
)
def test_contextuality_refuses_non_positive_counts(
    bundled: bertscope.Model, keyword: str, value: int
) -> None:
    with pytest.raises(bertscope.InvalidSpec, match=f"{keyword} must be a whole number of at least"):
        contextuality(bundled, ["a cat sat", "a cat ran"], **{keyword: value})


@pytest.mark.parametrize(("flag", "value"), [("--top", "-5"), ("--top", "0"), ("--min-contexts", "-3")])
def test_contextuality_command_refuses_non_positive_counts(tmp_path: Path, flag: str, value: str) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a cat sat\na cat ran\n")
    ran = run_main("contextuality", "-i", str(corpus), flag, value, "--no-plot")
    assert ran.code == 1
    least = 2 if flag == "--min-contexts" else 1  # a word's self-similarity needs two contexts
    assert f"{flag} must be a whole number of at least {least}" in ran.stderr
