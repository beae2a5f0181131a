"""The exceptions bertscope raises; every one says what was asked, what is allowed and what to do.

BertscopeError
├── ModelLoadError            a path, folder or hub id that does not give a model
│   └── UnsupportedArchitecture   a model that is not a BERT-family encoder
├── InvalidSpec               an unknown layer, pooling, combine or other option value
├── BackendUnavailable        a backend whose optional packages are not installed
├── InvalidInput              an empty text, a non-string item, an empty list
│   ├── UnknownToken          a token or id that is not in the vocabulary
│   └── InputTooLong          a text longer than the model allows, with long="error"
├── NonFiniteVectors          vectors that came out holding NaN or infinity (a float16 overflow)
├── NotPicklable              a loaded model given to pickle or copy (load it in each process)
├── CorpusError               a corpus file that cannot be read, or a malformed line in it
└── JobInterrupted            a corpus job stopped on Ctrl-C, every batch before the stop saved
"""

from __future__ import annotations

import sys

__all__ = [
    "BertscopeError",
    "ModelLoadError",
    "UnsupportedArchitecture",
    "InvalidSpec",
    "UnknownOption",
    "BackendUnavailable",
    "InvalidInput",
    "UnknownToken",
    "InputTooLong",
    "NonFiniteVectors",
    "NotPicklable",
    "CorpusError",
    "JobInterrupted",
    "Terminated",
    "TruncatedTextsWarning",
]


class BertscopeError(Exception):
    """The root of every error bertscope raises on purpose."""


class ModelLoadError(BertscopeError):
    """The name or folder given does not load as a model."""


class UnsupportedArchitecture(ModelLoadError):
    """The model loads but is not one of the BERT families bertscope knows."""


class InvalidSpec(BertscopeError, ValueError):
    """An option value (layer spec, pooling, combine, ...) is not one of the allowed ones."""


class UnknownOption(InvalidSpec, TypeError):
    """A keyword that names no option (a TypeError too, as Python's own for an unexpected keyword)."""


class BackendUnavailable(BertscopeError, ImportError):
    """A backend was asked for whose optional packages are not installed; the message names the extra."""


class InvalidInput(BertscopeError, ValueError):
    """The texts, tokens or ids given cannot be embedded as they are."""


class UnknownToken(InvalidInput, KeyError):
    """A token string or id is not in the model's vocabulary."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InputTooLong(InvalidInput):
    """A text has more tokens than the model's positions allow and long="error" was asked for."""


class NonFiniteVectors(BertscopeError, FloatingPointError):
    """Vectors came out holding NaN or infinity (a lower precision's overflow, a broken model): refused,
    not returned. `bad` holds the positions of the texts whose vectors are not finite, of `n_texts`."""

    def __init__(self, message: str, *, bad: tuple[int, ...] = (), n_texts: int = 0) -> None:
        super().__init__(message)
        self.bad, self.n_texts = bad, n_texts


class NotPicklable(BertscopeError, TypeError):
    """A loaded model given to pickle or copy.deepcopy: a TypeError, as pickle's own refusals are."""


class CorpusError(BertscopeError):
    """A corpus file is missing, of an unknown type, or has a malformed record."""


class JobInterrupted(BertscopeError):
    """The job stopped on Ctrl-C with every batch before the stop saved (none, where it stopped before its
    first); `--resume` continues it. A stop asked during the input's last batch finishes the job instead."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is (the command line installs the handler): every finally and
    context manager runs (temporary word vectors, a job's parts), what catches a Ctrl-C catches it too, and
    a corpus job says what it saved (`JobInterrupted`)."""


class TruncatedTextsWarning(UserWarning):
    """Texts over the model's limit were truncated (long="truncate"): their last tokens were not read.

    Besides its text it carries the counts: `cut` of `texts` texts ran past `max_tokens`, dropping
    `tokens` tokens (None where the caller did not count them)."""

    def __init__(
        self, message: str, *, cut: int = 0, texts: int = 0, max_tokens: int = 0, tokens: int | None = None
    ) -> None:
        super().__init__(message)
        self.cut, self.texts, self.max_tokens, self.tokens = cut, texts, max_tokens, tokens


def caller_level(passed_over: tuple[str, ...] = ("bertscope",)) -> int:
    """`warnings.warn`'s stacklevel, given by the function that calls it, naming the first frame whose
    module is in none of the `passed_over` packages (a package `x` also passes over `x_*`: langchain_core):
    the caller's own line, however deep the library went; where a thread holds no such frame, its
    outermost one."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None:
        top = str(frame.f_globals.get("__name__", "")).partition(".")[0]
        if not any(top == name or top.startswith(name + "_") for name in passed_over):
            break
        frame, level = frame.f_back, level + 1
    return level
