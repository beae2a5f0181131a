"""What fine-tuning changed: a base model against its fine-tuned child (same vocabulary, widths, depth).

Static rows: the cosine between each piece's two input-embedding rows and their norms, most moved (lowest
cosine) first; rows left exactly as they were are not listed (`vocabulary` counts them). A row zero in one
model and not the other has no cosine (nan, listed first: it lost or gained all its direction). Layers: per
layer, linear CKA between the two models' token vectors on the same texts (streamed, see `research.cka`; the
debiased estimator with `debiased=True`, and a `note` when the tokens are too few for the linear one) and
the mean cosine between the two vectors of each token (nan where a token's vector is zero in either model:
a zero vector has no direction; the note names the layers). Vocabularies that differ are compared on the
pieces they share (said in `vocabulary`); the layers then need texts that both tokenizers cut the same
way, or the comparison stops with a clear error.

Weights: which parts of the model fine-tuning changed, read from the two folders' safetensors without
torch (`weight_changes`): per part (the embeddings with their norm or projection, each encoder block,
ALBERT's layers shared by every block, the position tables every block reads, the rest: pooler, final
norm) the relative change |W_b - W_a| / |W_a| over its parameters, summed a block of rows at a time.
The layers cannot say it: layer k is the output of block k - 1 (layer 0 the embedding layer's), so a
change in block k moves every layer from k + 1 on, the last often most. `first_changed_layer` is the
first layer whose token vectors differ (or are not finite).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.renamed import top_k_given
from ..core.similarity import unit
from ..errors import InvalidInput
from .cka import CkaLevel, Counted, Moments, cka_note, debiased_given, paired_rows
from .states import model_given, text_stream
from .weight_changes import weight_changes

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = ["Comparison", "compare", "moved_rows", "output_of", "weight_changes"]


@dataclass
class Comparison:
    """Static rows most moved first, per layer CKA and mean token cosine between the two models (each
    layer with the part whose output it is: `output_of`), and per part the weights' relative change
    (`weights`, `weight_changes`'s rows); `first_changed_layer` is the first layer whose token vectors
    differ (None: none do). `note` says when the tokens were too few for the linear CKA to be trusted, as
    `CkaResult.note`, which figures are undefined (nan) and why, and what of the weights was not read."""

    static: list[dict[str, Any]]
    layers: list[dict[str, Any]]
    vocabulary: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    weights: list[dict[str, Any]] = field(default_factory=list)
    first_changed_layer: int | None = None
    n_rows: int = 0  # token rows the layers were measured on (settings["n_tokens"] too, its older place)
    n_texts: int = 0

    @property
    def changed_parts(self) -> list[str]:
        """The parts whose weights changed ('block 3'), in the model's order."""
        return [row["part"] for row in self.weights if row["changed"]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: static (token, id, cosine: None where a row is zero in one model; norm_a, norm_b),
        layers (layer, output_of, cka, mean_cosine: None where undefined), as `CkaResult.to_dict` gives an
        undefined cell, weights (part, block, parameters, relative_change, changed), changed_parts,
        first_changed_layer, the vocabulary overlap, n_rows and n_texts, how it was measured, and the note
        (null when none)."""
        return {
            "static": [_defined(row) for row in self.static],
            "layers": [_defined(row) for row in self.layers],
            "weights": [_defined(row) for row in self.weights],
            "changed_parts": self.changed_parts,
            "first_changed_layer": self.first_changed_layer,
            "vocabulary": self.vocabulary,
            "n_rows": self.n_rows,
            "n_texts": self.n_texts,
            "settings": self.settings,
            "note": self.note,
        }


def _defined(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with each nan figure None: JSON has no nan (json.dumps would write a bare NaN)."""
    return {k: None if isinstance(v, float) and np.isnan(v) else v for k, v in row.items()}


def moved_rows(
    a: Encoder, b: Encoder, *, top_k: int | None = None, top: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The `top_k` (default 20; `top=` is its older spelling, still read) shared pieces whose input rows
    moved most (lowest cosine), and the vocabulary overlap.

    Only rows that changed are listed: fewer than `top_k` when fewer changed, none for two equal models.
    """
    top = top_k_given(top_k, top, old="top", default=20, meaning="moved rows to list")
    vocab_a, vocab_b = a.vocab, b.vocab
    shared = sorted(set(vocab_a) & set(vocab_b), key=vocab_a.__getitem__)
    if not shared:
        raise InvalidInput("the two models share no word piece: their static rows cannot be compared")
    width_a, width_b = a.static_shape[1], b.static_shape[1]
    if width_a != width_b:
        raise InvalidInput(
            f"static rows are {width_a} and {width_b} wide: compare takes a model and its "
            "fine-tuned child; for any two models use `bertscope cka --model-b`"
        )
    # `embedding_rows` reads a light model's rows from its safetensors, without loading the module
    ids_a = [vocab_a[t] for t in shared]
    x = a.embedding_rows(ids_a).astype(np.float64)
    y = b.embedding_rows([vocab_b[t] for t in shared]).astype(np.float64)
    norm_a, norm_b = np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)
    # pairwise_cos_sim's cosine in float64 (it rounds to float32, and a row's move in fine-tuning can be
    # in the 8th digit), clipped as `row_cosines` clips: rounding takes a negated row past -1
    cosine = np.clip(np.sum(unit(x, dtype=np.float64) * unit(y, dtype=np.float64), axis=1), -1.0, 1.0)
    # A zero row (the pad row of many models) has no direction: its cosine with a row that moved is
    # undefined (nan), as the layers' mean cosine with a zero token vector; two zero rows did not move.
    cosine[(norm_a == 0) | (norm_b == 0)] = np.nan
    unchanged = np.all(x == y, axis=1)
    changed = np.flatnonzero(~unchanged)
    # most moved first: a row that lost (or gained) all its direction before any with a cosine
    order = changed[np.lexsort((cosine[changed], ~np.isnan(cosine[changed])))][:top]
    static = [
        {
            "token": shared[k],
            "id": ids_a[k],
            "cosine": float(cosine[k]),
            "norm_a": float(norm_a[k]),
            "norm_b": float(norm_b[k]),
        }
        for k in order
    ]
    same = vocab_a == vocab_b
    vocabulary = {
        "same": same,
        "shared": len(shared),
        "only_a": len(vocab_a) - len(shared),
        "only_b": len(vocab_b) - len(shared),
        "unchanged_rows": int(np.sum(unchanged)),
        "note": None if same else "the vocabularies differ: static rows compared on the shared pieces only",
    }
    return static, vocabulary


def compare(
    a: Encoder,
    b: Encoder,
    texts: Iterable[str] | str,
    *,
    top_k: int | None = None,
    debiased: bool = False,
    progress: bool | None = None,
    total: int | None = None,
    top: int | None = None,
) -> Comparison:
    """Static rows that moved most (the `top_k`, default 20; `top=` is its older spelling, still read),
    and per layer CKA (linear, or `debiased` as in `cka`) and mean token cosine of A vs B on `texts`."""
    top = top_k_given(top_k, top, old="top", default=20, meaning="moved rows to list")
    debiased = debiased_given(debiased)  # before any work: a wrong value fails after it otherwise
    model_given(a, "a")
    model_given(b, "b")
    texts = text_stream(texts)
    if a.n_layers != b.n_layers:
        raise InvalidInput(
            f"the models have {a.n_layers} and {b.n_layers} layers: compare pairs layer k with layer k; "
            "for models of other depths use `bertscope cka --model-b` (every layer against every layer)"
        )
    static, vocabulary = moved_rows(a, b, top_k=top)
    weights, weights_note = weight_changes(a.loaded.path, b.loaded.path, a.n_layers)
    moments = Moments(diagonal=True)
    width = 0
    cosines = np.zeros(a.n_layers + 1)
    # per side and layer, the tokens whose vector is zero: a cosine with one is undefined, not 0
    zeros = np.zeros((2, a.n_layers + 1), dtype=np.int64)
    # per layer, the largest difference between a token's two vectors, and the largest value of A's
    apart, size = np.zeros(a.n_layers + 1), np.zeros(a.n_layers + 1)
    counted = Counted(texts)
    paired = paired_rows(
        a, b, _same_pieces(a, b, counted), level=CkaLevel.TOKENS, progress=progress, total=total
    )
    for x, y, keys in paired:
        assert y is not None
        if x.shape[2] != y.shape[2]:
            raise InvalidInput(
                f"the models' layers are {x.shape[2]} and {y.shape[2]} wide; use cka --model-b"
            )
        moments.add(x, y, keys=keys)
        dot = np.einsum("nld,nld->nl", x, y, dtype=np.float64)
        norm_x, norm_y = (np.linalg.norm(v.astype(np.float64), axis=2) for v in (x, y))
        zeros += [(norm_x == 0).sum(axis=0), (norm_y == 0).sum(axis=0)]
        norms = norm_x * norm_y
        cosines += (dot / np.where(norms > 0, norms, 1.0)).sum(axis=0)
        apart = np.maximum(apart, np.abs(x - y).max(axis=(0, 2)))
        size = np.maximum(size, np.abs(x).max(axis=(0, 2)))
        width = x.shape[2]
    per_layer = moments.matrix(debiased=debiased)
    undefined = zeros.sum(axis=0) > 0
    layers = [
        {
            "layer": k,
            "output_of": output_of(k),
            "cka": float(per_layer[k]),
            "mean_cosine": float("nan") if undefined[k] else float(cosines[k] / moments.n),
        }
        for k in range(a.n_layers + 1)
    ]
    settings = {
        "model_a": a.loaded.source,
        "model_b": b.loaded.source,
        "n_tokens": moments.n,
        "estimator": "debiased" if debiased else "linear",
    }
    notes = [
        _zero_rows_note(static),
        cka_note(moments, width, debiased=debiased),
        _zero_vectors_note(zeros, moments.n),
        weights_note,
    ]
    # differs: past float32 rounding of the layer's largest value (a runtime varies a last bit by batch)
    differs = np.flatnonzero(~(apart <= _SAME_OUTPUT * size))  # a layer of nan or inf differs too
    return Comparison(
        static, layers, vocabulary, settings, note="; ".join(n for n in notes if n) or None,
        weights=weights, first_changed_layer=int(differs[0]) if len(differs) else None,
        n_rows=moments.n, n_texts=counted.n,
    )  # fmt: skip


# A layer's token vectors differ between the models where some value differs by more than this, relative
# to the layer's largest value: about 100 of float32's last bits, far below what any fine-tuning moves.
_SAME_OUTPUT = 1e-5


def output_of(layer: int) -> str:
    """The part whose output layer `layer` is: 'embeddings' for 0, else 'block k - 1'."""
    return "embeddings" if layer == 0 else f"block {layer - 1}"


def _zero_rows_note(static: list[dict[str, Any]]) -> str | None:
    """What to say of listed static rows that are zero in one model and not the other: their cosine is
    undefined (nan); None where there are none."""
    said = [
        f"{r['token']!r} is zero in {'A' if r['norm_a'] == 0 else 'B'}"
        for r in static
        if np.isnan(r["cosine"])
    ]
    if not said:
        return None
    its = "its cosine is" if len(said) == 1 else "their cosines are"
    return f"static rows: {', '.join(said)}, so {its} undefined (nan): a zero vector has no direction"


def _zero_vectors_note(zeros: np.ndarray, n_tokens: int) -> str | None:
    """What to say of layers where some token vectors are zero (`zeros`: (2, layers) counts for A and B):
    a cosine with a zero vector is undefined, so their mean cosine is nan; None where there are none."""
    said = []
    for name, counts in zip("AB", zeros, strict=True):
        for k in np.flatnonzero(counts):
            how_many = f"all {n_tokens}" if counts[k] == n_tokens else f"{counts[k]} of the {n_tokens}"
            said.append(f"layer {k} of {name}: {how_many} token vectors are zero")
    if not said:
        return None
    return f"{', '.join(said)}, so the mean cosine there is undefined (nan): a zero vector has no direction"


def _same_pieces(a: Encoder, b: Encoder, texts: Iterable[str]) -> Iterator[str]:
    """The texts, refusing the first that the two tokenizers cut into different pieces: compare pairs
    token k of A with token k of B, which takes a model and its fine-tuned child (one tokenizer)."""
    for number, text in enumerate(texts):
        if isinstance(text, str) and text.strip():
            tok_a, tok_b = (m.tokenizer.encode([text])[0] for m in (a, b))
            if tok_a.ids != tok_b.ids:
                raise InvalidInput(
                    f"text {number} ({text[:30]!r}) is tokenized differently by the two models"
                    f"{_first_difference(text, tok_a, tok_b)}, so compare cannot pair their tokens: it takes "
                    "a model and its fine-tuned child with one tokenizer (a child with words added by "
                    "`vocab add` pairs on texts without them); for any two models use `bertscope cka "
                    "--model-b B --level sentence`"
                )
        yield text


def _first_difference(text: str, tok_a: Any, tok_b: Any) -> str:
    """Where two tokenizations of `text` first part, as the word there and each model's pieces of it:
    " (at 'zebra': A reads 'z', '##eb', '##ra', B reads 'zebra')"; empty where no word is found."""
    at = next((k for k, (x, y) in enumerate(zip(tok_a.ids, tok_b.ids, strict=False)) if x != y), None)
    if at is None or at >= min(len(tok_a.offsets), len(tok_b.offsets)):
        return ""
    (start_a, end_a), (start_b, end_b) = tok_a.offsets[at], tok_b.offsets[at]
    if end_a <= start_a or end_b <= start_b:  # a special token (another family's [CLS] and <s>)
        return ""
    char = min(start_a, start_b)
    begin = text.rfind(" ", 0, char) + 1
    end = text.find(" ", char)
    end = len(text) if end < 0 else end

    def pieces(tok: Any) -> str:
        inside = [
            t for t, (s, e) in zip(tok.tokens, tok.offsets, strict=True) if begin <= s and e <= end and e > s
        ]
        return ", ".join(map(repr, inside))

    read_a, read_b = pieces(tok_a), pieces(tok_b)
    return "" if read_a == read_b else f" (at {text[begin:end]!r}: A reads {read_a}, B reads {read_b})"
