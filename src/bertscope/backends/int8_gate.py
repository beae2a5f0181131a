"""int8 fitted on the caller's own calibration texts earns its drift: measured once against float32, refused
under `INT8_MIN_COSINE` (texts of a few tokens under `INT8_SHORT_MIN_COSINE`).

The shipped texts' graphs are the ones measured in docs/fast-modes.md (held-out min cosine 0.9915-0.995 on
the bundled model). The caller's own texts are not: a few short ones fit scales that clip ordinary
sentences (`quantize="int8_static", calibration=["x"]` read a min cosine of 0.67 on the held-out
sentences; five news sentences 0.90 on "Ok."). So a graph fitted on them is measured once, as mode="fast"
measures its candidates (sentence vectors, the model's own pooling, against torch float32, on the shipped
held-out sentences and the caller's texts), the figure kept in the record beside the graph, and a load
under the bound refused in one line naming the figure, the bound and the fix. mode="fast" reads each
way's drift itself, under its own bound, so its candidates are not gated here (runtimes.apply_way).

The gate judges the calibration, not int8 itself: a text of a few word pieces ("No.", "Thanks!") drifts
to ~0.988 under any int8 graph, the shipped one included, so the caller's texts that short are held to
the int8 floor `bertscope verify` holds every int8 vector to (0.98), the rest and the held-out sentences
to int8's bound 0.99; a refusal's fix (the shipped calibration) then passes the bounds it is refused by.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.finite import non_finite_read
from ..core.folder import read_json_object
from ..core.similarity import unit
from ..errors import InvalidSpec
from .onnx import record_export
from .quantize import heldout_texts

__all__ = [
    "DRIFT_RECORD",
    "INT8_MIN_COSINE",
    "INT8_SHORT_MIN_COSINE",
    "SHORT_PIECES",
    "check_own_calibration",
    "fitted_drift",
    "kept_key",
]

# int8's bound (docs/fast-modes.md: min cosine ~0.99; the shipped texts' graphs read 0.9915-0.995 on the
# held-out sentences): a graph fitted on the caller's own calibration texts must keep every sentence vector
# of the held-out sentences and of those texts at least this close to float32, or it is refused.
INT8_MIN_COSINE = 0.99
# The bound of the caller's texts of at most `SHORT_PIECES` word pieces (special tokens not counted): int8's
# floor in `bertscope verify` (verify/settings.py STORE_FLOORS), since any int8 graph, the shipped one
# included, reads ~0.987-0.990 on such texts (the shipped graph 0.9874 on "No." where one fitted on the
# shipped texts and "No." read 0.9893): held to 0.99, a calibration as good as the shipped one was refused.
INT8_SHORT_MIN_COSINE = 0.98
SHORT_PIECES = 4
# At most this many of the caller's texts are measured, beside the held-out sentences.
_MEASURED_OWN = 400
# The key, in the record beside a graph, of its measured drifts (one per model settings).
DRIFT_RECORD = "own_calibration_drift"


def check_own_calibration(
    encoder: Any, runner: Any, record: Path, calibration: Sequence[str], *, asked: str, key: str
) -> None:
    """Refuse, in one line, an int8 graph (`runner`, of `encoder`) fitted on the caller's own `calibration`
    texts whose sentence vectors fall under `INT8_MIN_COSINE` to float32's on the held-out sentences or
    those texts (texts of at most `SHORT_PIECES` word pieces under `INT8_SHORT_MIN_COSINE`; a few short
    texts fit scales that clip ordinary ones). The measured figures are kept in `record` (the JSON beside
    the graph) under `key` (the model's settings that pool its vectors), so a second load reads them
    instead of measuring again; `asked` names the option in the message."""
    about = read_json_object(record)
    kept = about.get(DRIFT_RECORD)
    found = kept.get(key) if isinstance(kept, dict) else None
    if isinstance(found, dict) and _complete(found):
        verdict: dict[str, Any] = found
    else:
        verdict = _measured(encoder, runner, calibration)
        _remember_drift(record, key, verdict)
    count = f"{len(calibration)} calibration text{'' if len(calibration) == 1 else 's'}"
    fix = (
        "give more and longer calibration texts like your corpus, "
        "or leave calibration= out to fit on the shipped ones"
    )
    if verdict["cos_min"] < INT8_MIN_COSINE:
        raise InvalidSpec(
            f"{asked} fitted on your {count} reads a min cosine of {verdict['cos_min']:.4f} to float32 "
            f"(lowest on {_shown(verdict['text'])}, over the held-out sentences and your texts), under "
            f"int8's bound {INT8_MIN_COSINE}; {fix}"
        )
    short_min = verdict["short_cos_min"]
    if short_min is not None and short_min < INT8_SHORT_MIN_COSINE:
        raise InvalidSpec(
            f"{asked} fitted on your {count} reads a min cosine of {short_min:.4f} to float32 "
            f"(lowest on {_shown(verdict['short_text'])}, over your texts of at most {SHORT_PIECES} word "
            f"pieces), under int8's bound {INT8_SHORT_MIN_COSINE} for texts that short; {fix}"
        )


def kept_key(record: Path, prefix: str, suffix: str) -> str | None:
    """The key of a drift verdict kept in `record` that starts with `prefix` and ends with `suffix` (the
    last kept), or None: an install without torch reads the verdict a process with torch kept for the same
    settings, machine and runtimes, whatever torch it had (it measured against that torch's float32
    forward, as any would)."""
    kept = read_json_object(record).get(DRIFT_RECORD)
    found = (
        [key for key in kept if key.startswith(prefix) and key.endswith(suffix)]
        if isinstance(kept, dict)
        else []
    )
    return found[-1] if found else None


def _measured(encoder: Any, runner: Any, calibration: Sequence[str]) -> dict[str, Any]:
    """The min cosine (and its text) of the held-out sentences and the caller's longer texts, and apart
    those of the caller's short texts (None where there are none)."""
    measured = list(calibration[:_MEASURED_OWN])
    short = _short(encoder, measured)
    longer = [text for text, is_short in zip(measured, short, strict=True) if not is_short]
    cos_min, text = fitted_drift(encoder, runner, [*heldout_texts(), *longer])
    verdict: dict[str, Any] = {"cos_min": cos_min, "text": text, "short_cos_min": None, "short_text": None}
    shorts = [text for text, is_short in zip(measured, short, strict=True) if is_short]
    if shorts:
        verdict["short_cos_min"], verdict["short_text"] = fitted_drift(encoder, runner, shorts)
    return verdict


def _complete(verdict: dict[str, Any]) -> bool:
    """Whether a kept verdict holds both figures (one kept before short texts were held apart is not)."""
    return (
        isinstance(verdict.get("cos_min"), float)
        and isinstance(verdict.get("text"), str)
        and "short_cos_min" in verdict
        and (verdict["short_cos_min"] is None or isinstance(verdict["short_cos_min"], float))
        and (verdict["short_cos_min"] is None or isinstance(verdict.get("short_text"), str))
    )


def _short(encoder: Any, texts: Sequence[str]) -> list[bool]:
    """Whether each text is at most `SHORT_PIECES` word pieces, special tokens not counted."""
    return [
        len(tokens) - sum(tokens.special_tokens_mask) <= SHORT_PIECES
        for tokens in encoder.tokenize(list(texts))
    ]


def fitted_drift(encoder: Any, runner: Any, texts: Sequence[str]) -> tuple[float, str]:
    """(min cosine, the text it fell on) of `encoder`'s sentence vectors (its own pooling and layer) run
    on `runner` against its torch float32 forward, as mode="fast" measures: `runner` stays on."""
    texts = list(texts)
    with warnings.catch_warnings(), non_finite_read():
        warnings.simplefilter("ignore")  # a long calibration text cut at the model's limit is measured cut
        try:
            encoder.engine.runner = None
            reference = np.asarray(encoder.embed(texts, progress=False).vectors, dtype=np.float64)
        finally:
            encoder.engine.runner = runner
        fitted = np.asarray(encoder.embed(texts, progress=False).vectors, dtype=np.float64)
        cos = (unit(reference, dtype=np.float64) * unit(fitted, dtype=np.float64)).sum(axis=1)
    # a vector that is not finite (an overflowed int8 graph) is as far from float32's as a cosine goes: it
    # fails the bound, where a NaN would pass every comparison with it
    cos = np.nan_to_num(cos, nan=-1.0, posinf=-1.0, neginf=-1.0)
    worst = int(cos.argmin())
    return float(cos[worst]), texts[worst]


def _remember_drift(record: Path, key: str, verdict: dict[str, Any]) -> None:
    """Add `verdict` under `key` to the record beside a graph, atomically; a cache that cannot be written
    only costs a measurement next time."""
    about = read_json_object(record)
    kept = about.get(DRIFT_RECORD)
    about[DRIFT_RECORD] = {**(kept if isinstance(kept, dict) else {}), key: verdict}
    with contextlib.suppress(OSError):
        record_export(record, about)


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
