"""The model as it is set up against the plain Hugging Face float32 forward, layer by layer.

The reference is what a tutorial runs: `AutoTokenizer` + `AutoModel.from_pretrained(folder)` in float32
on the CPU, `output_hidden_states=True`, truncated at the model's limit (texts of like length batched).
The model runs exactly as loaded (runtime, dtype, quantization, batching). Exact modes must match every
token vector of every layer within `EXACT_ATOL`; lossy modes (bfloat16, float16, int8) must keep the
sentence vectors' cosine to the reference at or above their floor (fast mode's bound).

`reference_texts` is what `verify` measures: the fingerprint's canaries (the calibration sentences, all of
8 words or more, and one text over the limit) and `SHORT_TEXTS` (backends/quantize.py), a few texts of one
to four words, where int8 drifts most, which mode="fast" measures too.
The short texts are not canaries: a saved fingerprint holds its canaries' token counts and vectors, so
adding texts there would fail every fingerprint saved before.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backends.exact import EXACT_ATOL
from ..backends.quantize import SHORT_TEXTS
from ..core._enums import Combine, Pooling
from ..core.families import decoder_note
from ..core.finite import non_finite_read
from ..core.layers import combine_layers
from ..core.pooling import pool_sentences
from ..core.renamed_fields import renamed_field
from ..core.text_pieces import cuts_for, head_of
from ..core.texts_given import check_text, text_items
from ..errors import InvalidInput, InvalidSpec, TruncatedTextsWarning
from .drift import pairwise_cosines
from .settings import environment, is_lossy, is_static, lossy_floor, vector_settings, weights_dtype

__all__ = [
    "SHORT_TEXTS", "LayerDrift", "Verification", "compare_to_reference", "reference_states",
    "reference_texts", "static_refusal",
]  # fmt: skip

# Texts per reference forward, sorted by length: a pad is masked out exactly, so only the last bits move.
_REFERENCE_BATCH = 16


@dataclass
class LayerDrift:
    """How far one layer's token vectors are from the reference's: max abs difference, min cosine."""

    layer: int
    max_abs: float
    min_cosine: float


@dataclass
class Verification:
    """The model against the plain Hugging Face float32 forward: per layer, per sentence, and the verdict."""

    ok: bool
    layers: list[LayerDrift]
    sentence_min_cosine: float
    tolerance: dict[str, Any]
    n_texts: int
    n_tokens: int
    settings: dict[str, Any]
    environment: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ok, layers [{layer, max_abs, min_cosine}], settings, and the rest by name."""
        return {
            "ok": self.ok,
            "layers": [dict(d.__dict__) for d in self.layers],
            "settings": self.settings,
            "sentence": {"min_cosine": self.sentence_min_cosine},
            "tolerance": self.tolerance,
            "n_texts": self.n_texts,
            "n_tokens": self.n_tokens,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "environment": self.environment,
        }

    @property
    def texts(self) -> int:
        """Deprecated: the old name of `n_texts` (a count, where `texts` names a list elsewhere)."""
        return renamed_field(self.n_texts, owner="Verification", name="n_texts", old="texts")

    @property
    def tokens(self) -> int:
        """Deprecated: the old name of `n_tokens` (a count, where `tokens` names a list elsewhere)."""
        return renamed_field(self.n_tokens, owner="Verification", name="n_tokens", old="tokens")


def reference_texts(model: Any) -> list[str]:
    """What `verify` compares with the reference before the caller's texts: canaries, then `SHORT_TEXTS`."""
    from .fingerprint import canary_texts

    return [*canary_texts(model), *SHORT_TEXTS]


def reference_states(model: Any, texts: Sequence[str]) -> tuple[list[list[int]], list[np.ndarray]]:
    """Per text, the reference's token ids and hidden states (L+1, tokens, d) float32."""
    import torch
    import transformers
    from transformers import AutoModel, AutoTokenizer

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    target = str(model.loaded.path or model.loaded.source)
    remote = {"trust_remote_code": bool(model.loaded.trust_remote_code)}
    # bertscope reads "[SEP]" written in a text as characters, never as the special token
    tokenizer = AutoTokenizer.from_pretrained(target, split_special_tokens=True, **remote)
    if getattr(model.loaded, "st_lower_case", False):  # do_lower_case, as sentence-transformers reads it
        from ..core.st_settings import lowercase_first

        lowercase_first(tokenizer.backend_tokenizer)
    hf = AutoModel.from_pretrained(target, dtype=torch.float32, **remote).eval()
    encoded = tokenizer(_heads(model, texts), truncation=True, max_length=model.max_tokens)
    ids: list[list[int]] = [list(row) for row in encoded["input_ids"]]
    states: list[np.ndarray] = [np.empty(0)] * len(ids)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # like lengths together: little padding
    with torch.inference_mode():
        for start in range(0, len(order), _REFERENCE_BATCH):
            chosen = order[start : start + _REFERENCE_BATCH]
            batch = tokenizer.pad({k: [encoded[k][i] for i in chosen] for k in encoded}, return_tensors="pt")
            hidden = torch.stack(hf(**batch, output_hidden_states=True).hidden_states, dim=1).float().numpy()
            for row, index in enumerate(chosen):
                states[index] = hidden[row, :, : len(ids[index])]
    return ids, states


def _heads(model: Any, texts: Sequence[str]) -> list[str]:
    """Each text, a long one cut to a prefix that makes more tokens than the model keeps, as the embed
    engine bounds it (core/text_pieces.py): the reference tokenizer then keeps the same first tokens in
    memory bounded by the prefix, not by the text (a 30 MB line took 5 GB tokenized whole)."""
    backend: Any = getattr(model.tokenizer, "backend", None)
    long_chars: int = getattr(model.tokenizer, "long_chars", 0)
    cuts = cuts_for(backend) if backend is not None and long_chars else None
    if cuts is None:  # a tokenizer that cannot be cut (text_pieces.cuts_for): whole, as embed tokenizes it
        return list(texts)
    return [
        text
        if len(text) <= long_chars
        else text[: head_of(backend, cuts, text, max_tokens=model.max_tokens)[0]]
        for text in texts
    ]


def static_refusal(model: Any) -> InvalidSpec:
    """The one line for a static model asked to match a forward it has not got, and its check instead."""
    return InvalidSpec(
        f"{model.source} is a static model (model2vec): there is no Hugging Face forward to verify it "
        "against (nor -i/--input or --min-cosine); fingerprint it with `bertscope verify --save FILE` "
        "(save_fingerprint) and check it with `--against FILE` (check_fingerprint), or a store with --store"
    )


def compare_to_reference(
    model: Any, texts: Sequence[str], *, min_cosine: float | None = None, reference: int = 0
) -> Verification:
    """Run `texts` through `model` as set up and through the reference; see the module docstring.

    `min_cosine` is a lossy mode's floor where given (default: fast mode's bound, else its precision's floor,
    `settings.lossy_floor`: 0.98 for int8, 0.999 for bfloat16 and float16). `reference`: how many of the
    first `texts` are `reference_texts`; problems name those `reference text i` and the caller's own after
    them `text j` from 0, as the caller numbers them (default 0: every text by its place in `texts`).
    """
    from .fingerprint import model_checked

    model_checked(model)
    if is_static(model):
        raise static_refusal(model)
    _check_min_cosine(min_cosine)
    start = time.perf_counter()
    settings = vector_settings(model)
    if min_cosine is not None and not is_lossy(settings):  # read by no exact check: refused, not dropped
        raise InvalidSpec(
            f"min_cosine={min_cosine!r} bounds a lossy mode's drift; this model runs exact (float32: every "
            f"token vector held to max abs {EXACT_ATOL:g}): leave it out"
        )
    items = list(text_items(texts))  # a lone string is one text; a number, bytes or a set refused
    texts = [*items[:reference], *(check_text(text, i) for i, text in enumerate(items[reference:]))]
    tokens = model.tokenize(texts)
    with warnings.catch_warnings():
        # The canaries hold a text over the limit on purpose, cut alike on both sides: no vector is handed
        # back, so the cut is no news to the caller.
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        with non_finite_read():  # a NaN is verify's finding (a problem line), not an error
            found = model.embed_tokens(texts, layers="all", combine="concat")
    ref_ids, ref_states = reference_states(model, texts)
    n_layers = model.n_layers + 1
    max_abs = np.zeros(n_layers)
    min_cos = np.ones(n_layers)
    sentence_cos = 1.0
    problems: list[str] = []
    mismatched: list[str] = []
    spec = model.spec()
    for index, (tok, emb, want_ids, want) in enumerate(zip(tokens, found, ref_ids, ref_states, strict=True)):
        named = f"reference text {index}" if index < reference else f"text {index - reference}"
        if list(tok.ids) != want_ids:
            mismatched.append(_token_problem(named, tok.ids, want_ids))
            continue
        got = emb.vectors.reshape(len(tok.ids), n_layers, -1).transpose(1, 0, 2)
        if got.shape != want.shape:
            problems.append(f"{named}: hidden states {got.shape} here, {want.shape} in the reference")
            continue
        if not np.isfinite(got).all():  # NaN compares as neither near nor far: named, never passed
            problems.append(f"{named}: the model's vectors hold values that are not finite (NaN or inf)")
            continue
        max_abs = np.maximum(max_abs, np.abs(got - want).max(axis=(1, 2)))
        min_cos = np.minimum(min_cos, pairwise_cosines(got, want).min(axis=1))
        mask = np.array([0.0 if s else 1.0 for s in tok.special_tokens_mask]) if spec.mask_special else None
        pair = [_sentence(states, mask, spec) for states in (got, want)]
        sentence_cos = min(sentence_cos, float(pairwise_cosines(pair[0], pair[1])))
    tolerance = _tolerance(model, settings, min_cosine)
    within = (
        sentence_cos >= tolerance["min_cosine"]
        if "min_cosine" in tolerance
        else bool((max_abs <= tolerance["max_abs"]).all())
    )
    if mismatched:
        problems.insert(
            0,
            f"{len(mismatched)} of {len(texts)} texts tokenized otherwise than by the reference's "
            f"tokenizer (first: {mismatched[0]}); they are left out of the figures",
        )
    problems += _setting_problems(settings, model)
    layers = [LayerDrift(i, float(max_abs[i]), float(min_cos[i])) for i in range(n_layers)]
    return Verification(
        ok=within and not problems,
        layers=layers,
        sentence_min_cosine=sentence_cos,
        tolerance=tolerance,
        n_texts=len(texts),
        n_tokens=sum(len(t.ids) for t in tokens),
        settings=settings,
        environment=environment(model),
        problems=problems,
        warnings=_setting_warnings(settings, model),
        seconds=time.perf_counter() - start,
    )


def _check_min_cosine(min_cosine: object) -> None:
    """Refuse a floor that is not a number in [0, 1], as --min-cosine is refused, on every precision (an
    exact mode reads no floor, so a wrong one passed unread there)."""
    number = isinstance(min_cosine, int | float) and not isinstance(min_cosine, bool)
    if min_cosine is not None and not (number and 0 <= min_cosine <= 1):  # type: ignore[operator]
        raise InvalidInput(f"min_cosine={min_cosine!r}: give a number in [0, 1], such as 0.99, or None")


def _tolerance(model: Any, settings: dict[str, Any], min_cosine: float | None) -> dict[str, Any]:
    if is_lossy(settings):
        floor = lossy_floor(model) if min_cosine is None else float(min_cosine)
        return {"min_cosine": floor, "of": "sentence vectors (the model's own pooling)"}
    return {"max_abs": EXACT_ATOL, "of": "every token vector of every layer"}


def _sentence(states: np.ndarray, mask: np.ndarray | None, spec: Any) -> np.ndarray:
    """(d,) one text's sentence vector from (L+1, tokens, d) states with the spec's layers and pooling
    (the model's pooler is not rerun: pooler pooling is measured as cls)."""
    selected = [states[layer][None] for layer in spec.layers]
    hidden = combine_layers(selected, Combine(spec.combine)).astype(np.float32)
    pooling = Pooling.CLS if spec.pooling is Pooling.POOLER else spec.pooling
    weights = np.ones(hidden.shape[1], dtype=np.float32) if mask is None else mask.astype(np.float32)
    return pool_sentences(hidden, weights[None], pooling)[0]


def _token_problem(named: str, got: Sequence[int], want: Sequence[int]) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want))
    )
    tokens = f"{len(got)} tokens" if len(got) == len(want) else f"{len(got)} tokens here, {len(want)} there"
    return f"{named}, {tokens}, ids differ from token {at} on"


def _setting_problems(settings: dict[str, Any], model: Any) -> list[str]:
    """The settings that make the model other than it was trained: is_decoder, in the load's words."""
    if settings["attention"]["is_decoder"]:
        return [decoder_note(model.config) or "config.json sets is_decoder; remove is_decoder"]
    return []


def _setting_warnings(settings: dict[str, Any], model: Any) -> list[str]:
    stored = settings["weights_dtype"] or weights_dtype(model.loaded.path)
    if stored and stored != "float32":
        return [
            f"the weights are stored in {stored}: float32 runs on the rounded weights, and any copy saved "
            "in float32 gives other vectors"
        ]
    return []
