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

from ..core.texts_given import text_items
from ..errors import InvalidInput
from .drift import StoreCheck
from .fingerprint import (
    Difference,
    FingerprintCheck,
    canary_texts,
    check_fingerprint,
    fingerprint,
    fingerprint_given,
    model_checked,
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
    model_checked(model)
    if against is not None:
        fingerprint_given(against, "against")
        # as --against refuses -i and --min-cosine: read by no fingerprint check, they were dropped unsaid
        if unread := [
            name for name, value in (("texts", texts), ("min_cosine", min_cosine)) if value is not None
        ]:
            them = "them" if len(unread) > 1 else "it"
            raise InvalidInput(
                f"{' and '.join(unread)}: for the check against the reference forward; against= compares "
                f"fingerprints: leave {them} out"
            )
        return check_fingerprint(model, against)
    # the caller's texts, checked there and named from their first (text 0), not after the reference's
    given = [] if texts is None else list(text_items(texts))
    reference = reference_texts(model)
    return compare_to_reference(
        model, [*reference, *given], min_cosine=min_cosine, reference=len(reference)
    )  # min_cosine bounded to [0, 1] there, as --min-cosine is, on every precision
