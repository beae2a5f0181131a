"""`long` on the views of one window (anatomy, attention) and on `tokens`, in the library and on the
command line as /anatomy and /attention take it: truncate (said) or error, whose refusal offers only the
fixes one window has; `tokens --long window` shows every token, as embed's window reads them."""

from __future__ import annotations

import json
import warnings

import pytest

import bertscope
from bertscope.errors import InputTooLong, InvalidInput, TruncatedTextsWarning

LONG = "word " * 300  # 302 tokens on the bundled model, whose limit is 256


def test_anatomy_cuts_by_default_and_says_so(bundled: bertscope.Model) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        anatomy = bundled.anatomy(LONG)
    assert anatomy.n_dropped == 46 and len(anatomy.tokens) == 256
    assert any(isinstance(w.message, TruncatedTextsWarning) for w in caught)
    assert anatomy.proof_holds


@pytest.mark.parametrize("view", ["anatomy", "attentions"])
def test_error_refuses_a_long_text_offering_what_one_window_has(bundled: bertscope.Model, view: str) -> None:
    with pytest.raises(InputTooLong) as refused:
        getattr(bundled, view)(LONG, long="error")
    said = str(refused.value)
    assert "302 tokens" in said and "at most 256" in said and "long='truncate'" in said
    assert "long='window'" not in said  # one window: it cannot read the text in overlapping windows
    fits = getattr(bundled, view)("a short text", long="error")
    assert fits is not None


@pytest.mark.parametrize("view", ["anatomy", "attentions"])
def test_window_is_refused_by_name(bundled: bertscope.Model, view: str) -> None:
    with pytest.raises(InvalidInput, match="reads one window: use long='truncate' or 'error', not 'window'"):
        getattr(bundled, view)("a short text", long="window")


def test_the_anatomy_of_a_batch_takes_long_too(bundled: bertscope.Model) -> None:
    with pytest.raises(InputTooLong, match="text 1 has 302 tokens"):
        bundled.anatomy(["short", LONG], long="error")
    with pytest.warns(TruncatedTextsWarning, match="1 of 2 text"):
        assert [a.n_dropped for a in bundled.anatomy(["short", LONG], long="truncate")] == [0, 46]


@pytest.mark.parametrize("command", ["anatomy", "attention"])
def test_the_commands_take_long_error(bundled: bertscope.Model, command: str) -> None:
    from console import run_main

    ran = run_main(command, LONG, "--long", "error")
    assert ran.code == 1 and ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and "--long truncate" in ran.stderr
    assert "--long window" not in ran.stderr
    window = run_main(command, "a short text", "--long", "window")
    assert window.code == 1 and "not window" in window.stderr
    ran = run_main(command, "a short text", "--long", "error", "--json")
    assert ran.code == 0, ran.stderr
    assert json.loads(ran.stdout)["tokens"] == ["[CLS]", "a", "short", "text", "[SEP]"]


def test_tokens_long_window_shows_every_token_and_error_refuses(bundled: bertscope.Model) -> None:
    from console import run_main

    cut = run_main("tokens", LONG, "--json")
    assert cut.code == 0 and "truncated (46 tokens dropped)" in cut.stderr
    assert len(json.loads(cut.stdout)["items"][0]["tokens"]) == 256
    whole = run_main("tokens", LONG, "--long", "window", "--json")
    assert whole.code == 0 and whole.stderr == ""
    item = json.loads(whole.stdout)["items"][0]
    assert len(item["tokens"]) == 302 and item["n_dropped"] == 0
    refused = run_main("tokens", LONG, "--long", "error")
    assert refused.code == 1 and "302 tokens" in refused.stderr and "--long window" in refused.stderr
