"""verify: a certificate that the vectors are still the vectors.

Three checks, one per question:

    verify_model(model)                 does this deployment equal the plain Hugging Face float32
                                        forward? (reference.py: per layer max abs, min cosine)
    verify_model(model, against=FP)     is it the model a saved fingerprint describes? (fingerprint.py:
                                        settings, file hashes, canary vectors; each difference named)
    verify_store(store)                 do a store's vectors and this deployment share one space?
                                        (store.py: a stratified sample re-embedded and compared; it
                                        loads a store's model by name through the loader registered
                                        low, core/loaders.py: `from bertscope.verify.store import
                                        verify_store`, or `bertscope.verify_store`)

What decides vectors (precision, stored weight dtype, attention mask, truncation, pooling, prompts,
tokenizer) is read in settings.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from .drift import StoreCheck
from .fingerprint import (
    Difference,
    FingerprintCheck,
    canary_texts,
    check_fingerprint,
    fingerprint,
    read_fingerprint,
    save_fingerprint,
)
from .reference import LayerDrift, Verification, compare_to_reference, reference_texts

__all__ = [
    "Difference", "FingerprintCheck", "LayerDrift", "StoreCheck", "Verification", "canary_texts",
    "check_fingerprint", "compare_to_reference", "fingerprint", "read_fingerprint", "reference_texts",
    "save_fingerprint", "verify_model",
]  # fmt: skip


def verify_model(
    model: Any,
    texts: Sequence[str] | str | None = None,
    *,
    against: dict[str, Any] | str | Path | None = None,
    min_cosine: float | None = None,
) -> Verification | FingerprintCheck:
    """`model` as set up against the plain Hugging Face float32 forward on the calibration sentences, a
    text over its limit, a few short texts (`reference_texts`) and `texts` (a `Verification`; a lossy mode
    held to `min_cosine`, default its fast bound, else 0.98 for int8 and 0.999 for bfloat16/float16); with
    `against` (a fingerprint or its file), against that fingerprint instead (a `FingerprintCheck`: no
    reference forward, no torch needed)."""
    if against is not None:
        return check_fingerprint(model, against)
    number = isinstance(min_cosine, int | float) and not isinstance(min_cosine, bool)
    bounded = number and 0 <= min_cosine <= 1  # type: ignore[operator]
    if min_cosine is not None and not bounded:  # as --min-cosine is bounded: checked on every precision
        raise InvalidInput(f"min_cosine={min_cosine!r}: give a number in [0, 1], such as 0.99, or None")
    given = [texts] if isinstance(texts, str) else [] if texts is None else list(texts)  # a lone string: one
    return compare_to_reference(model, [*reference_texts(model), *given], min_cosine=min_cosine)
