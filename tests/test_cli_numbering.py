"""The command line names a text given as an argument by its number from 1 in every command that prints
no numbers of its own (audit 18g: `tokens` said "text 1" where `embed` said "text 2" of the same text)."""

from __future__ import annotations

import pytest

import bertscope
from console import run_main

LONG = "word " * 300
SECOND_TOO_LONG = "error: text 2 has 302 tokens but the model takes at most"


@pytest.mark.parametrize(
    ("args", "told"),
    [
        (("tokens", "short", " "), "error: text 2 is empty: every text needs a non-space character"),
        (("embed", "short", " "), "error: text 2 is empty: every text needs a non-space character"),
        (
            ("tokens", "short", LONG, "--long", "error"),
            "error: text 2 has 302 tokens but the model takes at most",
        ),
        (
            ("embed", "short", LONG, "--long", "error"),
            "error: text 2 has 302 tokens but the model takes at most",
        ),
        (("anatomy", LONG, "--long", "error"), "error: the text has 302 tokens but the model takes at most"),
    ],
)
def test_a_refused_argument_is_named_from_1(args: tuple[str, ...], told: str) -> None:
    ran = run_main(*args)
    assert ran.code != 0 and ran.stderr.startswith(told), ran.stderr


def test_the_library_still_counts_from_0(bundled: bertscope.Model) -> None:
    with pytest.raises(bertscope.InvalidInput, match=r"^text 1 is empty"):
        bundled.tokenize(["short", " "])
