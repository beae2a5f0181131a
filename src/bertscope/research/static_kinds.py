"""The kinds of static vector one model gives, and how they compare on word similarity.

    rows            the input embedding matrix: a word is the mean of its pieces' rows (`Model.static_word`)
    decontextualized  the word alone through the model, [CLS] w [SEP], its pieces' mean at a layer
    aggregated      the word's mean layer-L vector over a corpus (`research.aggregate`, Bommasani et al. 2020)
    distilled       a model2vec static model (`research.distill`): decontextualized pieces, PCA, Zipf weights

Decontextualized vectors run bertscope's own exact forward (the engine, float32 equal to Hugging Face):
the mean of the word's own pieces at the layer asked, the specials left out. model2vec's distillation
instead averages [CLS], the piece and [SEP] of the last layer; the distilled kind is model2vec's.
"""

from __future__ import annotations

import os
import unicodedata
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core._enums import LongText
from ..core.layers import LayerSpec, parse_layers
from ..core.texts_given import text_named
from ..errors import InvalidInput, caller_level
from ..static import spelled_pieces
from .aggregate import AggregatedStatic, layer_column, word_key
from .analysis import correlations, indexed_word_pairs
from .contextuality import given_words

__all__ = [
    "DecontextualizedStatic", "static_decontextualized", "KindsEval", "compare_kinds", "distilled_for",
    "plot_kinds",
]  # fmt: skip


@dataclass
class DecontextualizedStatic:
    """Items alone through the model: items (n,), their pieces, vectors (n, layers, d) float32."""

    items: list[str]
    pieces: list[list[str]]
    layers: tuple[int, ...]
    vectors: np.ndarray

    def layer(self, layer: int) -> np.ndarray:
        """(n, d) vectors at one of the layers computed: its absolute number, or -1 for the last of them."""
        return self.vectors[:, layer_column(self.layers, layer, "computed")]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the items, their pieces and the layers (not the vectors: `layer(n)` has them)."""
        return {"items": self.items, "pieces": self.pieces, "layers": list(self.layers)}

    def __repr__(self) -> str:
        return (
            f"DecontextualizedStatic({len(self.items)} items x {len(self.layers)} layers {list(self.layers)})"
        )


def static_decontextualized(
    model: Any, items: str | int | Sequence[str | int], *, layers: LayerSpec = "all", pieces: bool = False
) -> DecontextualizedStatic:
    """[CLS] item [SEP] through the model: the mean of the item's pieces at each of `layers`.

    Items are words (split by the tokenizer) or, with `pieces=True`, vocabulary pieces or ids
    (`##ing` alone, as model2vec distils). `model` is a loaded Model. A word the vocabulary cannot spell
    (a piece of it read as [UNK], `static.stand_in`) is refused, as `static_word` refuses it.
    """
    chosen = parse_layers(layers, model.n_layers)
    many = [items] if isinstance(items, (str, int)) else list(items)
    if not many:
        raise InvalidInput("no words given: pass a word, or a list of them")
    if pieces:
        ids = model.static_ids(many)
        tokens = [model.tokenizer.from_ids([i], index=n) for n, i in enumerate(ids)]
    else:
        for n, word in enumerate(many):
            if not isinstance(word, str) or not word.strip():
                raise InvalidInput(f"item {n} ({word!r}) is not a word: pass non-empty strings")
            spelled_pieces(model, word)  # a word read as [UNK] has no vector of its own, alone or not
        tokens = model.tokenizer.encode_fitted(many, LongText.TRUNCATE)
    spec = model.spec(
        layers=list(chosen),
        combine="concat" if len(chosen) > 1 else "mean",
        pooling="mean",
        mask_special=True,
        normalize=False,
    )
    pooled = model.engine.fitted_sentences(tokens, spec).vectors
    vectors = pooled.reshape(len(tokens), len(chosen), -1)
    found = [[p for p, s in zip(t.tokens, t.special_tokens_mask, strict=True) if not s] for t in tokens]
    return DecontextualizedStatic([str(i) for i in many], found, chosen, vectors)


@dataclass
class KindsEval:
    """One record per kind x layer: kind, layer, n_pairs_covered, coverage (their share), spearman, pearson,
    and spearman_common on the n_pairs_common pairs every kind covers."""

    records: list[dict[str, Any]]
    coverage: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the records, the coverage and the settings."""
        return {"records": self.records, "coverage": self.coverage, "settings": self.settings}

    @property
    def best(self) -> dict[str, Any]:
        """The record with the highest Spearman."""
        valid = [r for r in self.records if np.isfinite(r["spearman"])]
        return max(valid or self.records, key=lambda r: r["spearman"] if np.isfinite(r["spearman"]) else -2)


def compare_kinds(
    model: Any,
    pairs: Sequence[tuple[str, str, float]],
    *,
    layers: LayerSpec = "all",
    aggregated: AggregatedStatic | None = None,
    distilled: str | Path | Any = None,
) -> KindsEval:
    """Spearman of cosine vs gold for every static kind on the same word pairs, with coverage.

    Rows and decontextualized vectors cover every pair (a word the vocabulary lacks is its pieces'
    mean); aggregated vectors cover the pairs whose two words the corpus held (keyed as the tokenizer
    normalises them); the distilled model (a model2vec folder, or one `distilled_for` read) covers
    every pair.
    """
    folder = isinstance(distilled, (str, os.PathLike))
    if not (folder or distilled is None or callable(getattr(distilled, "encode", None))):
        raise InvalidInput(
            f"distilled={distilled!r}: give a model2vec folder (bertscope distill wrote it) or the model "
            "distilled_for read from one"
        )
    words, ia, ib, gold = indexed_word_pairs(pairs, "word evaluation")
    everyone = np.ones(len(pairs), dtype=bool)
    static: Any = distilled_for(model, distilled) if folder else distilled  # else one distilled_for read

    def record(kind: str, layer: int | None, vectors: np.ndarray, covered: np.ndarray) -> dict[str, Any]:
        scores = {"spearman": float("nan"), "pearson": float("nan")}
        if covered.sum() >= 3:  # too few pairs covered: no correlation, not an error
            scores = correlations(vectors[ia][covered], vectors[ib][covered], gold[covered])
        share = float(covered.mean())
        found = {
            "kind": kind,
            "layer": layer,
            "n_pairs_covered": int(covered.sum()),
            "coverage": share,
            **scores,
        }
        return {**found, "_covered": covered, "_vectors": vectors}

    found = _spelled_words(model, words, pairs)
    rows = np.stack([f.vector for f in found])
    records = [record("rows", None, rows, everyone)]
    alone = static_decontextualized(model, words, layers=layers)
    records += [record("decontextualized", k, alone.layer(k), everyone) for k in alone.layers]
    if aggregated is not None:
        key = word_key(model)
        slots = np.array([aggregated.index.get(key(w), -1) for w in words])
        covered = (slots[ia] >= 0) & (slots[ib] >= 0)
        for k in aggregated.layers:
            matrix = np.vstack([aggregated.layer(k), np.zeros((1, aggregated.vectors.shape[2]), np.float32)])
            records.append(record("aggregated", k, matrix[slots], covered))
    if static is not None:
        records.append(record("distilled", None, static.encode(words), everyone))
    # Kinds that cover fewer pairs are also scored on the pairs every kind covers, to compare like with like.
    common = np.logical_and.reduce([r.pop("_covered") for r in records])
    for r in records:
        r["n_pairs_common"] = int(common.sum())
        r["spearman_common"] = _spearman_on(r.pop("_vectors"), ia, ib, gold, common)
    settings = {"model": model.loaded.source, "n_words": len(words)}
    if aggregated is not None:
        settings["corpus"] = {k: aggregated.settings.get(k) for k in ("n_texts", "n_words_kept", "subword")}
    split = sum(1 for f in found if len(f.ids) > 1)
    coverage = {
        "n_pairs": len(pairs),
        "n_words": len(words),
        "n_words_whole": len(words) - split,
        "n_words_split": split,
    }
    return KindsEval(records, coverage, settings)


def _spelled_words(model: Any, words: list[str], pairs: Sequence[tuple[str, str, float]]) -> list[Any]:
    """Each word's `static_word`, a word read as [UNK] or as several words ("cat dog", "cat,") refused by
    the first pair it is in (the command line: by its file and line), not by the word alone."""
    found = []
    for word in words:
        try:
            found.append(model.static_word(word))
        except InvalidInput as exc:
            raise InvalidInput(f"{_first_use(word, pairs)}: {exc}") from None
    # A phrase or a word with its punctuation was averaged over its words and counted as one word split
    # into pieces: refused, as `senses` and `contextuality` refuse a word the tokenizer reads as several.
    # A word joined inside by a hyphen or an apostrophe (ice-cream, o'clock: datasets hold them) is one
    # word as written, the mean of its pieces as any split word.
    split = given_words(model, words)[1]
    for word in words:
        if _written_apart(word) and (why := split.get(word.strip().lower())) is not None:
            raise InvalidInput(f"{_first_use(word, pairs)} {word!r} is not one word: {why}")
    return found


def _written_apart(word: str) -> bool:
    """Whether `word` holds a space or punctuation at an edge ("cat dog", "cat,"): not one word as written."""
    kept = word.strip()
    edges = {unicodedata.category(kept[0])[0], unicodedata.category(kept[-1])[0]} if kept else set()
    return any(c.isspace() for c in kept) or "P" in edges


def _first_use(word: str, pairs: Sequence[tuple[str, str, float]]) -> str:
    """The first pair holding `word` and its side: "pair 3: the first word" (the command line: its line)."""
    number, column = next((n, c) for n, p in enumerate(pairs) for c in (0, 1) if p[c] == word)
    return f"{text_named('pair', number)}: the {('first', 'second')[column]} word"


def distilled_for(model: Any, folder: str | os.PathLike[str]) -> Any:
    """The model2vec model in `folder`, refused where another tokenizer made it (most of the model's pieces
    are not its own: another model's vectors, scored as this one's) and warned of where config.json's
    `tokenizer_name` names another model of the same vocabulary (bert-base-uncased beside all-MiniLM)."""
    from ..backends.onnx import encoder_digest
    from .distill import SOURCE_DIGEST, load_static, portable_name

    static = load_static(Path(folder))
    source = portable_name(str(model.loaded.source))
    recorded = static.config.get("tokenizer_name")
    digest = static.config.get(SOURCE_DIGEST)  # bertscope distill's record of the weights it read
    if digest is not None and digest == encoder_digest(model):
        return static  # this model's own, under whatever name each was given
    if recorded is None or (recorded == source and digest is None):
        return static
    if recorded == source:  # one name, other weights: two folders named `model`, a fine-tune and its base
        recorded = f"{recorded} (other weights of that name)"
    # distill drops the specials ([CLS], [SEP], [MASK]) and may add words: another tokenizer lacks most pieces
    missing = set(model.tokenizer.backend.get_vocab()) - set(static.tokenizer.get_vocab())
    if len(missing) > model.tokenizer.backend.get_vocab_size() // 2:
        raise InvalidInput(
            f"distilled={str(folder)!r} was distilled from {recorded} (another tokenizer) but the model "
            f"evaluated is {source}; distil this model (bertscope distill) or evaluate {recorded}"
        )
    warnings.warn(
        f"distilled={str(folder)!r} was distilled from {recorded} (the same vocabulary) but the model "
        f"evaluated is {source}: its kind is {recorded}'s vectors",
        UserWarning,
        stacklevel=caller_level(),
    )
    return static


def _spearman_on(
    vectors: np.ndarray, ia: np.ndarray, ib: np.ndarray, gold: np.ndarray, keep: np.ndarray
) -> float:
    if keep.sum() < 3:
        return float("nan")
    return correlations(vectors[ia][keep], vectors[ib][keep], gold[keep])["spearman"]


def plot_kinds(
    result: KindsEval, path: str | Path, *, title: str = "word similarity", overwrite: bool = False
) -> Path:
    """Spearman per layer for the layered kinds (lines), the rows and distilled model as levels; on the
    pairs every kind covers when some kind (aggregated) covers fewer, so the lines compare like with like.
    An existing file at `path` is replaced only with overwrite=True."""
    from matplotlib.figure import Figure

    from .plots import picture_file, save_figure

    picture_file(path, overwrite=overwrite)  # before drawing: a refused path costs no figure
    common = result.records[0]["n_pairs_common"]
    metric = "spearman_common" if common < result.coverage["n_pairs"] else "spearman"
    figure = Figure(figsize=(6.4, 4.0))
    ax = figure.add_subplot()
    for kind in ("decontextualized", "aggregated"):
        points = [r for r in result.records if r["kind"] == kind]
        if points:
            ax.plot([r["layer"] for r in points], [r[metric] for r in points], marker="o", label=kind)
    for kind, style in (("rows", "--"), ("distilled", ":")):
        for r in (r for r in result.records if r["kind"] == kind):
            ax.axhline(r[metric], linestyle=style, color="gray", label=f"{kind} (no layer)")
    ax.set_xlabel("layer (0 = embedding layer output)")
    ax.set_ylabel("Spearman vs gold")
    scope = f"the {common} of {result.coverage['n_pairs']} pairs every kind covers"
    ax.set_title(f"{title}: {scope if metric == 'spearman_common' else str(common) + ' pairs'}", fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(figure, path, overwrite=overwrite)
