"""A cut at the model's limit said once, in one wording: the library's `TruncatedTextsWarning` (`say_cut`),
pointed at the caller's own line, and the summary every other report of a cut uses (`cut_summary`)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import TruncatedTextsWarning

__all__ = ["REPORTERS", "WINDOW_KEEPS", "cut_summary", "cut_warning", "say_cut", "say_cut_sums"]


# Where a cut is reported in other words (encode's and the integrations' sentence-transformers warning, a
# command-line line, a field of the service's answer): a call made through these is not said again here.
REPORTERS = ("bertscope.encode", "bertscope.integrations", "bertscope.server")
WINDOW_KEEPS = "long='window' keeps every token"


def say_cut(n_dropped: Iterable[int] | np.ndarray, max_tokens: int, instead: str = WINDOW_KEEPS) -> None:
    """The one `TruncatedTextsWarning` for texts cut at `max_tokens` (n_dropped: per text, (n_texts,)),
    in encode's words (`bertscope.encode.say_truncated`), if any text was cut: never in silence.

    It points at the first line outside bertscope (the user's call, however deep the library went),
    and is not said where a call came through a module that reports the cut itself (`REPORTERS`).
    """
    dropped = np.fromiter(n_dropped, dtype=np.int64) if not isinstance(n_dropped, np.ndarray) else n_dropped
    cut = int(np.count_nonzero(dropped > 0))
    if cut:
        _say(cut_warning(cut, len(dropped), max_tokens, instead, int(dropped.sum())), sys._getframe(1))


def say_cut_sums(cut: int, texts: int, tokens: int, max_tokens: int, instead: str = WINDOW_KEEPS) -> None:
    """`say_cut` of a stream's running sums (`cut` of `texts` texts, `tokens` dropped): no per-text record."""
    if cut:
        _say(cut_warning(cut, texts, max_tokens, instead, tokens), sys._getframe(1))


def _say(warning: TruncatedTextsWarning, frame: Any) -> None:
    """Warn at the first line outside bertscope above `frame`, unless a `REPORTERS` module is on the way."""
    level = 3
    while frame is not None and _module(frame).partition(".")[0] == "bertscope":
        if any(_module(frame) == name or _module(frame).startswith(name + ".") for name in REPORTERS):
            return
        frame, level = frame.f_back, level + 1
    warnings.warn(warning, stacklevel=level)


def cut_warning(
    cut: int, texts: int, max_tokens: int, instead: str, tokens: int | None = None
) -> TruncatedTextsWarning:
    """The `TruncatedTextsWarning` with its counts, its text `cut_summary`, what it costs, and `instead`
    (what keeps every token)."""
    said = f"{cut_summary(cut, texts, max_tokens, tokens)}: their ends are not in the vectors; {instead}"
    return TruncatedTextsWarning(said, cut=cut, texts=texts, max_tokens=max_tokens, tokens=tokens)


def cut_summary(cut: int, texts: int, max_tokens: int, tokens: int | None = None) -> str:
    """How many of `texts` texts (and, where counted, tokens) a cut at the model's limit dropped: the one
    wording every cut is said in, by the library's warning (`say_cut`, encode's `say_truncated`) and by a
    command's own line."""
    counted = f" ({tokens} tokens dropped)" if tokens is not None else ""
    return f"{cut} of {texts} text(s) ran past the model's {max_tokens} tokens and were truncated{counted}"


def _module(frame: Any) -> str:
    return str(frame.f_globals.get("__name__", ""))
