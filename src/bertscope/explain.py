"""Why two texts score what they score: the cosine split exactly into token-pair contributions.

With a pooling that is a weighted sum of token vectors (mean, mean_sqrt_len, first_last_avg), the sentence
vector is S = sum_i p_i, so cos(S_A, S_B) = sum_ij p_i . q_j / (|S_A| |S_B|): each term c_ij belongs to
one token pair and the terms add up to the score. Normalising scales every p_i by the same 1/|S|; an
affine post-processing (x - mu) W (whitening, PCA, all-but-the-top) maps each part p_i to
(p_i - w_i mu / sum w) W, still summing to the post-processed vector. Max pooling takes each dimension
from one token, so dimension d (and its share of mu) goes to the token that holds the maximum: exact by
dimension. cls and pooler read one vector that depends on every token through the layers: no exact
split exists, and the explanation shows the [CLS] row of the attention instead, marked as not exact. At
layer 0 (the embedding output) no attention has run: that vector is the first token's own row, so the
whole score sits, exactly, on the pair of first tokens ([CLS] and [CLS]: the same vector for every text).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .core.cut_said import WINDOW_KEEPS
from .core.finite import refuse_non_finite
from .core.pooling import POOLING_RULES, exact_poolings
from .core.post import PostKind, PostProcessor
from .core.renamed import top_k_given
from .core.similarity import cos_sim
from .core.spec import EmbedOptions, EmbedSpec, LongText, resolve
from .core.texts_given import text_refusal
from .core.tokens import Tokens, named_as, say_cut
from .core.writable import refuse_unwritable
from .errors import InvalidInput, InvalidSpec

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .core.encoder import Encoder
    from .core.spec import RecipeKeywords

__all__ = [
    "PICTURE_TOKENS",
    "Explanation",
    "explain",
    "token_parts",
    "plot_explanation",
    "picture_file",
    "texts_named",
]

# Contributions made and ranked a block of about this many at a time: the product's temporaries and the
# top pairs' ordering stay this size, not tokens_a x tokens_b (the matrix itself is the answer).
_BLOCK = 1 << 20
# The most tokens a side a picture draws: past it its labels no longer fit a picture of bounded size.
PICTURE_TOKENS = 100
# The picture's largest side, inches (1,760 pixels at its 110 dpi), whatever the texts' lengths.
_PICTURE_INCHES = 16.0


@dataclass(repr=False)
class Explanation:
    """The score of (a, b), and how it splits over token pairs (exact) or a labelled approximation.

    contributions: (tokens of a, tokens of b), summing to `score` (None when not exact);
    share_a (tokens of a,) and share_b (tokens of b,): row and column sums (each sums to the score),
    or, when not exact, the [CLS] row of the attention (each sums to 1); n_dropped: the tokens cut from the
    end of a and of b (a text past the model's limit, long="truncate"), as `embed` counts them.
    """

    score: float
    exact: bool
    method: str
    note: str
    tokens_a: list[str]
    tokens_b: list[str]
    offsets_a: list[tuple[int, int]]
    offsets_b: list[tuple[int, int]]
    share_a: np.ndarray
    share_b: np.ndarray
    contributions: np.ndarray | None
    top_pairs: list[dict[str, Any]]
    spec: dict[str, Any] = field(default_factory=dict)
    text_a: str = ""
    text_b: str = ""
    n_dropped: list[int] = field(default_factory=lambda: [0, 0])

    def __repr__(self) -> str:
        """One line for a notebook cell: the texts, the score, how it splits, the shape and the top pairs."""
        if self.contributions is None:  # the attention view: the model's own first token's row
            kind = f"not exact: {self.tokens_a[0] if self.tokens_a else '[CLS]'} attention"
        else:
            kind = f"{'exact' if self.exact else 'not exact'}, {self.method}"
        shape = "none" if self.contributions is None else "x".join(map(str, self.contributions.shape))
        return (
            f"<Explanation {_clip(self.text_a)} vs {_clip(self.text_b)}: score {self.score:.4f} ({kind}); "
            f"contributions {shape}, {len(self.top_pairs)} top pairs>"
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-able values."""
        return {
            "score": self.score,
            "exact": self.exact,
            "method": self.method,
            "note": self.note,
            "text_a": self.text_a,
            "text_b": self.text_b,
            "tokens_a": self.tokens_a,
            "tokens_b": self.tokens_b,
            "offsets_a": [list(o) for o in self.offsets_a],
            "offsets_b": [list(o) for o in self.offsets_b],
            "share_a": self.share_a.astype(float).tolist(),
            "share_b": self.share_b.astype(float).tolist(),
            "contributions": None
            if self.contributions is None
            else self.contributions.astype(float).tolist(),
            "top_pairs": self.top_pairs,
            "spec": self.spec,
            "n_dropped": list(self.n_dropped),
        }


def _clip(text: str, width: int = 30) -> str:
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def explain(
    model: Encoder,
    a: str,
    b: str,
    *,
    top_k: int | None = None,
    exact: bool = False,
    top: int | None = None,
    **options: Unpack[RecipeKeywords],
) -> Explanation:
    """Split `model.similarity(a, b, **options)` into token pairs, the `top_k` largest listed (default
    10; `top=` is its older spelling, still read); `exact` refuses the rest."""
    if not isinstance(a, str) or not isinstance(b, str):
        raise InvalidSpec("explain takes two texts (strings); pairs of segments are not explained")
    if not isinstance(exact, (bool, np.bool_)):  # "no" is truthy: it asked for the refusal it names
        raise InvalidSpec(f"exact must be True or False, not {exact!r}")
    _check_texts(model, a, b)
    top = top_k_given(top_k, top, old="top", default=10, least=0)
    recipe = resolve(model, EmbedOptions.given(**options))
    spec, processor = recipe.spec, recipe.post
    # Each text alone, as `similarity` embeds them, so the score is the one it reports.
    with texts_named("a"):
        left = model.embed_with([a], recipe)
    with texts_named("b"):  # alone, it was refused as "text 0"
        right = model.embed_with([b], recipe)
    refuse_non_finite([left.vectors[0], right.vectors[0]])  # text 0 is a, text 1 is b
    dropped = np.concatenate([left.n_dropped, right.n_dropped])
    split = spec.pooling in exact_poolings() or max(spec.layers) == 0
    # The attention view refuses long='window' (it is within one window): it is no fix to offer there.
    say_cut(dropped, model.max_tokens, WINDOW_KEEPS if split else _ONE_WINDOW)
    # Said in the answer too (the service's /explain, the explorer's tab), not only in a warning.
    cut = [int(n) for n in dropped]
    score = float(cos_sim(left.vectors, right.vectors)[0, 0])
    if spec.pooling not in exact_poolings():
        if max(spec.layers) == 0:
            with texts_named("a", "b"):
                first_rows = _first_rows_view(model, a, b, spec, processor, score, top)
            return replace(first_rows, n_dropped=cut)
        if exact:
            raise InvalidSpec(
                f"pooling {spec.pooling.value!r} has no exact split into tokens (the vector depends on "
                f"every token through the layers); exact: {_exact_names()}"
            )
        return replace(_attention_view(model, a, b, spec, processor, score), n_dropped=cut)
    found = _pairs_view(model, a, b, spec, processor, score, top)
    if exact and not found.exact:  # measured, not assumed: the refusal exact=True asks for
        total = float(np.sum(found.contributions)) if found.contributions is not None else float("nan")
        raise InvalidSpec(
            f"the contributions sum to {total:.6f} and the score is {score:.6f}: this runtime's token "
            "vectors do not make its sentence vectors exactly, and exact=True refuses that; use the "
            "float32 exact default (no quantize, no --fast) for an exact split"
        )
    return replace(found, n_dropped=cut)


# The truncation warning's fix where the explanation is the attention view, which long='window' refuses.
_ONE_WINDOW = (
    "this pooling's explanation, an attention row, is read within one window: an exact pooling "
    "(pooling='mean') with long='window' explains every token"
)


def _pairs_view(
    model: Encoder,
    a: str,
    b: str,
    spec: EmbedSpec,
    processor: PostProcessor | None,
    score: float,
    top: int,
) -> Explanation:
    """The exact split of `score` into token-pair contributions, each text's tokens read alone."""
    # Each text alone, as `score` was made: in one batch, a runtime whose numbers depend on the batch
    # (int8's activation scales are the batch's) gave contributions that summed to another score.
    with texts_named("a"):
        ((tok_a, mat_a),) = model.engine.token_matrices([a], spec)
    with texts_named("b"):
        ((tok_b, mat_b),) = model.engine.token_matrices([b], spec)
    parts_a = token_parts(mat_a, tok_a.special_tokens_mask, spec, processor)
    parts_b = token_parts(mat_b, tok_b.special_tokens_mask, spec, processor)
    tok_a, tok_b = _in_given_text(tok_a, spec), _in_given_text(tok_b, spec)
    norm = np.linalg.norm(parts_a.sum(axis=0)) * np.linalg.norm(parts_b.sum(axis=0))
    contributions = _pair_contributions(parts_a, parts_b, max(float(norm), 1e-24))
    linear = POOLING_RULES[spec.pooling].linear
    how = "token pairs" if linear else f"dimension by dimension ({spec.pooling.value} pooling)"
    # Exact as measured, not as assumed: the sum against the score `similarity` gives. Said as a bound:
    # the sum's sixth decimal is float32 rounding, which differs between CPUs.
    total = float(contributions.sum())
    agrees = abs(total - score) < 1e-5
    if agrees:
        note = f"exact: the {contributions.size} contributions sum to the score (within 1e-5)"
    else:
        note = (
            f"not exact: the {contributions.size} contributions sum to {total:.6f}, the score is "
            f"{score:.6f}: this runtime's token vectors do not make its sentence vectors exactly"
        )
    return Explanation(
        score=score,
        exact=agrees,
        method=how,
        note=note + _prompt_said(spec),
        **_split(contributions, tok_a, tok_b, top),
        spec=_spec(spec, processor),
        text_a=a,
        text_b=b,
    )


def texts_named(*names: str) -> AbstractContextManager[None]:
    """Refusals raised inside name text i as the caller gave it, "text a" or "text b", not by its index in
    the one or two texts embedded (the library's explain and the service's /explain alike)."""
    return named_as(lambda kind, i: f"{kind} {names[i]}")


def _check_texts(model: Encoder, a: str, b: str) -> None:
    """Both texts checked before either is embedded, each named as the caller gave it (text a, text b):
    embedded alone, the second was refused as "text 0"."""
    for name, text in (("a", a), ("b", b)):
        problem = text_refusal(text, tokenizer=model.tokenizer)
        if problem:
            raise InvalidInput(f"text {name} {problem}")


def token_parts(
    vectors: np.ndarray, special: list[bool], spec: EmbedSpec, processor: PostProcessor | None
) -> np.ndarray:
    """(tokens, k) float64 parts that sum to the text's (post-processed) sentence vector.

    vectors: (tokens, d) combined-layer token vectors of one text, as pooling sees them (its prompt first,
    where `spec` has one: the first `spec.prompt_length` tokens then hold no part).
    """
    x = np.asarray(vectors, dtype=np.float64)
    keep = np.array([not (s and spec.mask_special) for s in special], dtype=np.float64)
    keep[: spec.prompt_length] = 0.0  # include_prompt false: the engine's pooling leaves the prompt out
    rule = POOLING_RULES[spec.pooling]
    if rule.weights is not None:
        weights = rule.weights(keep)
        pooled = weights @ x
        scale = 1.0 / max(float(np.linalg.norm(pooled)), 1e-12) if spec.normalize else 1.0
        parts = scale * weights[:, None] * x
        if processor is not None:
            # The mean is shared out in proportion to each token's weight, so the parts still sum.
            parts -= (weights / weights.sum())[:, None] * processor.mean[None, :]
    elif rule.owners is not None:
        # Each dimension is one token's value: it (and its share of the mean) goes to that token.
        owner = rule.owners(x, keep)
        pooled = x[owner, np.arange(x.shape[1])]
        scale = 1.0 / max(float(np.linalg.norm(pooled)), 1e-12) if spec.normalize else 1.0
        shift = processor.mean if processor is not None else np.zeros(x.shape[1])
        parts = np.zeros_like(x)
        parts[owner, np.arange(x.shape[1])] = scale * pooled - shift
    else:
        raise InvalidSpec(f"pooling {spec.pooling.value!r} has no exact split into tokens")
    return parts if processor is None else _linear(processor, parts)


def _linear(processor: PostProcessor, parts: np.ndarray) -> np.ndarray:
    """The linear part of the post-processing (its mean already subtracted from the parts)."""
    matrix = np.asarray(processor.matrix, dtype=np.float64)
    if processor.kind is PostKind.ABTT:
        return parts - (parts @ matrix) @ matrix.T
    return parts @ matrix


def _pair_contributions(parts_a: np.ndarray, parts_b: np.ndarray, norm: float) -> np.ndarray:
    """(tokens of a, tokens of b) float64 contributions parts_a @ parts_b.T / norm, made block by block
    into the one matrix: no temporary of its size."""
    out = np.empty((len(parts_a), len(parts_b)))
    rows = max(1, _BLOCK // max(len(parts_b), 1))
    for start in range(0, len(parts_a), rows):
        block = out[start : start + rows]
        np.matmul(parts_a[start : start + rows], parts_b.T, out=block)
        block /= norm
    return out


def _top_flat(contributions: np.ndarray, top: int) -> np.ndarray:
    """The flat indices of the `top` largest contributions, largest first (a tie: the earlier pair
    first), kept as the blocks are read: no ordering, and no copy, of the whole matrix."""
    n_b = contributions.shape[1]
    rows = max(1, _BLOCK // max(n_b, 1))
    best = np.empty(0, dtype=np.int64)
    values = np.empty(0)
    for start in range(0, len(contributions) if top > 0 else 0, rows):
        flat = contributions[start : start + rows].ravel()
        if flat.size > top:  # every value tied with the top-th too, so a tie keeps the earlier pair
            pick = np.flatnonzero(flat >= np.partition(flat, flat.size - top)[flat.size - top])
        else:
            pick = np.arange(flat.size)
        best = np.concatenate([best, pick + start * n_b])
        values = np.concatenate([values, flat[pick]])
        keep = np.lexsort((best, -values))[:top]
        best, values = best[keep], values[keep]
    return best


def _top_pairs(contributions: np.ndarray, tok_a: Tokens, tok_b: Tokens, top: int) -> list[dict[str, Any]]:
    order = _top_flat(contributions, top)
    pairs = []
    for flat in order:
        i, j = np.unravel_index(flat, contributions.shape)
        pairs.append(
            {
                "i": int(i),
                "j": int(j),
                "token_a": tok_a.tokens[i],
                "token_b": tok_b.tokens[j],
                "offsets_a": list(tok_a.offsets[i]),
                "offsets_b": list(tok_b.offsets[j]),
                "contribution": float(contributions[i, j]),
            }
        )
    return pairs


def _attention_view(
    model: Encoder, a: str, b: str, spec: EmbedSpec, processor: PostProcessor | None, score: float
) -> Explanation:
    from .attention import attention_of

    layer = max(1, max(spec.layers))
    rows = []
    for name, text in (("a", a), ("b", b)):
        # The attention of the text the sentence vector was made from: its prompt first.
        read = spec.prompt + text if spec.prompt else text
        # attention is within one window: under long="window" a text that fits is read whole
        long = "truncate" if spec.long is LongText.WINDOW else spec.long.value
        with texts_named(name):
            counted = model.tokenize([read], long=long)[0]
        if spec.long is LongText.WINDOW and counted.n_dropped:
            raise InvalidInput(
                f"text {name} is {counted.n_dropped} tokens past the model's limit ({model.max_tokens}) and "
                f"{spec.pooling.value} pooling has no exact split: its view, the first token's attention, "
                "is within one window; use long='truncate', or an exact pooling (mean) to explain it window "
                "by window"
            )
        tokens, weights = attention_of(model, read, long=long, tokens=counted)
        rows.append((_in_given_text(tokens, spec), weights[layer - 1].mean(axis=0)[0].astype(np.float64)))
    (tok_a, row_a), (tok_b, row_b) = rows
    first = tok_a.tokens[0]  # the model's own first token: [CLS], or <s> (RoBERTa, XLM-R, MPNet)
    note = (
        f"not an exact attribution: {spec.pooling.value} pooling reads one vector that depends on every "
        f"token through the layers, so no exact split exists; shown is layer {layer}'s {first} attention "
        f"row, averaged over heads (what {first} read in its last step). Exact splits: "
        f"{_exact_names()}{_prompt_said(spec, attention=True)}"
    )
    return Explanation(
        score=score,
        exact=False,
        method=f"{first} attention at layer {layer} (approximate)",
        note=note,
        tokens_a=tok_a.tokens,
        tokens_b=tok_b.tokens,
        offsets_a=tok_a.offsets,
        offsets_b=tok_b.offsets,
        share_a=row_a,
        share_b=row_b,
        contributions=None,
        top_pairs=[],
        spec=_spec(spec, processor),  # the post that made the score, as similarity's spec says it
        text_a=a,
        text_b=b,
    )


def _in_given_text(tokens: Tokens, spec: EmbedSpec) -> Tokens:
    """`tokens` of the prompted text with offsets in the text as given: the prompt's own tokens at (0, 0),
    as specials are, so a highlight lands on the caller's characters."""
    if not spec.prompt:
        return tokens
    shift = len(spec.prompt)
    offsets = [
        (0, 0) if end <= shift else (max(start - shift, 0), end - shift) for start, end in tokens.offsets
    ]
    return replace(tokens, offsets=offsets)


def _prompt_said(spec: EmbedSpec, *, attention: bool = False) -> str:
    """The note's sentence on a prompt the model read before each text (empty without one); `attention`:
    the shares shown are an attention row, which weighs the prompt's tokens whatever pooling does."""
    if not spec.prompt:
        return ""
    if attention:
        why = "false: pooling leaves them out, attention reads them" if spec.prompt_length else "true"
        pooled = f"the attention row weighs them as any token (include_prompt {why})"
    elif spec.prompt_length:
        pooled = "they hold no share: the model's include_prompt is false, so pooling leaves them out"
    else:
        pooled = "they are pooled with the text (include_prompt true)"
    return (
        f"; the model read the prompt {spec.prompt!r} before each text: its tokens come first, at offsets "
        f"(0, 0), and {pooled}"
    )


def _split(contributions: np.ndarray, tok_a: Any, tok_b: Any, top: int) -> dict[str, Any]:
    """An exact explanation's fields drawn from its token-pair `contributions` (rows: A's tokens)."""
    return {
        "tokens_a": tok_a.tokens,
        "tokens_b": tok_b.tokens,
        "offsets_a": tok_a.offsets,
        "offsets_b": tok_b.offsets,
        "share_a": contributions.sum(axis=1),
        "share_b": contributions.sum(axis=0),
        "contributions": contributions,
        "top_pairs": _top_pairs(contributions, tok_a, tok_b, top),
    }


def _first_rows_view(
    model: Encoder,
    a: str,
    b: str,
    spec: EmbedSpec,
    processor: PostProcessor | None,
    score: float,
    top: int,
) -> Explanation:
    """cls or pooler at layer 0, the embedding output: each vector is its text's first token's own row
    (through the pooler, the post-processing and the norm), which reads no other token, so the score is
    exactly the first pair's, and 1 where both texts open with the same token."""
    tok_a, tok_b = (_in_given_text(t, spec) for t in model.engine.prepare([a, b], spec))
    contributions = np.zeros((len(tok_a), len(tok_b)))
    contributions[0, 0] = score
    first_a, first_b = tok_a.tokens[0], tok_b.tokens[0]
    if tok_a.ids[0] == tok_b.ids[0]:
        why = (
            f"both texts open with {first_a}, so the two vectors are the same for every text and the "
            "score is 1 by construction"
        )
    else:
        why = f"the texts open with {first_a} and {first_b}, and the score compares those two rows alone"
    note = (
        f"exact, and trivial: at layer 0 (the embedding output, before any attention) {spec.pooling.value} "
        "pooling reads the first token's own embedding row, which depends on no other token; "
        f"{why}. A layer above 0 shows what {first_a} reads{_prompt_said(spec)}."
    )
    return Explanation(
        score=score,
        exact=True,
        method="the first tokens' own rows (layer 0)",
        note=note,
        **_split(contributions, tok_a, tok_b, min(top, 1)),
        spec=_spec(spec, processor),
        text_a=a,
        text_b=b,
    )


def _exact_names() -> str:
    return ", ".join(p.value for p in exact_poolings())


def _spec(spec: EmbedSpec, processor: PostProcessor | None) -> dict[str, Any]:
    settings = spec.as_dict()
    return settings if processor is None else {**settings, "post": processor.describe()}


def plot_explanation(result: Explanation, path: str | Path, *, overwrite: bool = False) -> Path:
    """A heatmap PNG of the contributions (or, when not exact, the two attention rows); an existing file
    at `path` is replaced only with overwrite=True."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n, m = len(result.tokens_a), len(result.tokens_b)
    if max(n, m) > PICTURE_TOKENS:
        raise InvalidInput(
            f"a picture draws at most {PICTURE_TOKENS} tokens a side, and text a has {n}, text b {m}: "
            "explain shorter texts, or leave the picture out and read the top pairs (top_k)"
        )
    path = picture_file(path, overwrite=overwrite)
    # Each token's cell as wide as fits the picture's bounded size, and its label as tall as the cell.
    cell_b = min(0.45, (_PICTURE_INCHES - 1.5) / max(m, 1))
    cell_a = min(0.4, (_PICTURE_INCHES - 1.2) / max(n, 1))
    figure = Figure(figsize=(1.5 + cell_b * m, 1.2 + cell_a * n))
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    if result.contributions is not None:
        values = result.contributions
        bound = float(np.abs(values).max()) or 1.0
        image = ax.imshow(values, cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="auto")
        ax.set_xticks(range(m), result.tokens_b, rotation=60, ha="right", fontsize=_label_points(cell_b))
        ax.set_yticks(range(n), result.tokens_a, fontsize=_label_points(cell_a))
        ax.set_title(f"cosine {result.score:.4f} = sum of these {values.size} token-pair contributions")
        figure.colorbar(image, ax=ax, label="contribution")
    else:
        width = max(n, m)
        grid = np.full((2, width), np.nan)
        grid[0, :n], grid[1, :m] = result.share_a, result.share_b
        ax.imshow(grid, cmap="viridis", aspect="auto")
        for row, (tokens, values) in enumerate(
            ((result.tokens_a, result.share_a), (result.tokens_b, result.share_b))
        ):
            size = min(7.0, _label_points(cell_b))
            for col, (token, value) in enumerate(zip(tokens, values, strict=True)):
                ax.text(col, row, f"{token}\n{value:.2f}", ha="center", va="center", fontsize=size, color="w")
        ax.set_yticks([0, 1], ["a", "b"])
        ax.set_xticks([])
        ax.set_title(f"cosine {result.score:.4f}; NOT exact: {result.method}")
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path


def _label_points(cell: float) -> float:
    """A label's font size, points, that fits a cell `cell` inches wide (10, matplotlib's, where it fits)."""
    return max(3.0, min(10.0, 0.8 * 72 * cell))


def picture_file(path: str | Path, *, overwrite: bool = False) -> Path:
    """`path` checked as a picture to write: not a folder, a suffix matplotlib writes (.png, .svg, .pdf
    ...), a folder that exists, and no file there unless overwrite=True, else InvalidInput. Commands call
    it on their -o (or default name) before the work, so no run ends in it and no picture is replaced
    unasked; every function here and in research/ that saves a picture calls it too.

    Here, not in research/plots.py (which uses it too), so that `plot_explanation` one floor down shares it.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = Path(path)
    if path.is_dir():  # before its suffix or --overwrite are asked for: neither can make a folder a file
        raise InvalidInput(
            f"{path} is a folder, not a file: give a picture's file name (inside it, or beside it)"
        )
    formats = sorted(FigureCanvasAgg.get_supported_filetypes())
    suffix = path.suffix.lower().removeprefix(".")
    if suffix not in formats:
        got = f"its suffix .{suffix} is not" if suffix else "it has no suffix naming"
        shown = ", ".join(f".{name}" for name in formats)
        raise InvalidInput(
            f"cannot write the picture {path}: {got} a picture format; end it with one of {shown}"
        )
    if not path.parent.exists():
        raise InvalidInput(f"cannot write {path}: the folder {path.parent} does not exist")
    if not overwrite and (path.exists() or path.is_symlink()):
        # the wording of every other writer's refusal (fit-post, embed -o); the CLI reads --overwrite
        raise InvalidInput(f"{path} exists; pass overwrite=True to replace it, or choose another name")
    refuse_unwritable(path, "the picture")  # a read-only folder fails here, not after the work
    return path
