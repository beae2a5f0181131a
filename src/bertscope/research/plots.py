"""Pictures (PNG, matplotlib's Agg canvas, no display needed) of sweeps, word evaluations, contextuality,
word occurrences in 2-D, and token-to-token cosine at every layer."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..core._enums import StrEnum
from ..core.layers import parse_layers
from ..core.renamed_fields import renamed_field
from ..core.similarity import unit
from ..errors import BackendUnavailable, InvalidInput, InvalidSpec
from ..explain import picture_file
from ..static import static_rows

if TYPE_CHECKING:
    from ..core.encoder import Encoder
    from .analysis import SweepResult, WordEval
    from .contextuality import Contextuality
    from .senses import Sense, Senses

__all__ = [
    "picture_file",
    "save_figure",
    "LayerCosines",
    "Projection",
    "draw_layers",
    "draw_words",
    "WordPoints",
    "layer_cosines",
    "plot_contextuality",
    "plot_layers",
    "plot_sweep",
    "plot_word_eval",
    "plot_words",
    "word_points",
    "plot_static",
    "plot_senses",
    "each_piece_once",
]


class Projection(StrEnum):
    """How word occurrences are laid out in two dimensions (umap needs the umap-learn package)."""

    PCA = "pca"
    TSNE = "tsne"
    UMAP = "umap"


def save_figure(figure: Figure, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write `figure` to `path` (its suffix picks the format; the folder must exist; an existing file is
    replaced only with overwrite=True, as every function here that saves a picture takes it); the path
    written."""
    path = picture_file(path, overwrite=overwrite)
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    return path


def plot_sweep(
    result: SweepResult, path: str | Path, *, metric: str = "spearman", overwrite: bool = False
) -> Path:
    """Heatmap of `metric` per pooling[+post] (rows) x layer (columns), the best cell outlined."""
    rows, layers, values = result.grid(metric)
    figure = Figure(figsize=(1.1 + 0.75 * len(layers), 1.4 + 0.45 * len(rows)))
    ax = figure.add_subplot()
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=ax, label=metric)
    ax.set_xticks(range(len(layers)), [str(k) for k in layers])
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("layer (0 = embedding layer output)")
    ax.set_ylabel("pooling (+ post-processing)")
    for (i, j), value in np.ndenumerate(values):
        ax.text(
            j, i, "–" if np.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=7, color="w"
        )
    best = result.best
    if best is None:  # no cell has a correlation (result.note says why)
        ax.set_title(f"{metric} of cosine vs gold: no cell has a correlation")
        return save_figure(figure, path, overwrite=overwrite)
    label = best["pooling"] if best["post"] == "none" else f"{best['pooling']}+{best['post']}"
    ax.add_patch(_outline(layers.index(best["layer"]), rows.index(label)))
    ax.set_title(f"{metric} of cosine vs gold; best: layer {best['layer']}, {label} ({best[metric]:.3f})")
    return save_figure(figure, path, overwrite=overwrite)


def _outline(x: int, y: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2)


def plot_word_eval(
    result: WordEval, path: str | Path, *, title: str = "word similarity", overwrite: bool = False
) -> Path:
    """Spearman per layer (line) with the static rows as a dashed reference."""
    layered = [r for r in result.records if r["layer"] != "static"]
    static = next(r for r in result.records if r["layer"] == "static")
    figure = Figure(figsize=(6.4, 4.0))
    ax = figure.add_subplot()
    ax.plot(
        [r["layer"] for r in layered],
        [r["spearman"] for r in layered],
        marker="o",
        label="word alone, layer k",
    )
    ax.axhline(static["spearman"], linestyle="--", color="gray", label="static rows (mean of pieces)")
    ax.set_xlabel("layer (0 = embedding layer output)")
    ax.set_ylabel("Spearman vs gold")
    cov = result.coverage
    split = f"{cov['n_words_split']}/{cov['n_words']} words split into pieces"
    ax.set_title(f"{title}: {cov['n_pairs']} pairs, {split}")
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(figure, path, overwrite=overwrite)


def plot_contextuality(result: Contextuality, path: str | Path, *, overwrite: bool = False) -> Path:
    """Self-similarity, intra-sentence similarity, baseline, adjusted self-similarity and MEV per layer."""
    labels = [str(r["layer"]) for r in result.records]
    figure = Figure(figsize=(7.0, 4.2))
    ax = figure.add_subplot()
    for key in ("self_similarity", "intra_sentence", "baseline", "self_adjusted", "mev"):
        ax.plot(range(len(labels)), [r[key] for r in result.records], marker="o", label=key.replace("_", " "))
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("static rows, then layer (0 = embedding layer output)")
    ax.set_ylabel("cosine / share of variance")
    words = ", ".join(f"{w} ({n})" for w, n in list(result.n_occurrences.items())[:6])
    s = result.settings
    counts = (
        f"\nintra-sentence: {s['n_intra_sentences']} sentences; baseline: {s['n_baseline_pairs']} pairs"
        if {"n_intra_sentences", "n_baseline_pairs"} <= set(s)
        else ""  # a result built by hand, without the counts
    )
    ax.set_title(f"contextuality of {words} (occurrences){counts}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(figure, path, overwrite=overwrite)


@dataclass(frozen=True)
class WordPoints:
    """Each occurrence of each word as a 2-D point: `points` (occurrences, 2), `words` the owner of each."""

    layer: int
    method: str
    words: list[str]
    points: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        """The points as JSON-able lists."""
        return {
            "layer": self.layer,
            "method": self.method,
            "words": self.words,
            "points": self.points.tolist(),
        }


def word_points(
    model: Encoder,
    words: Sequence[str] | str,
    sentences: Iterable[str] | str,
    *,
    layer: int = -1,
    method: Projection | str = "pca",
    seed: int = 0,
) -> WordPoints:
    """Each occurrence of each word in the sentences, projected to 2-D (PCA or t-SNE) at one layer;
    `sentences` stream (a file's lines are never held whole), `seed` seeds the projection."""
    from .contextuality import given_words, word_occurrences

    how = Projection.parse(method, what="projection")
    absolute = parse_layers(layer, model.n_layers)[0]
    # Each word once, lowercased as occurrences are matched (bank,Bank drew every point twice); a lone
    # string is one word and one sentence, as contextuality reads them (not its letters).
    named, split = given_words(model, words)
    texts = [sentences] if isinstance(sentences, str) else sentences
    # sample=0: the picture reads no anisotropy baseline, so no sample of every word is drawn for one
    found = word_occurrences(model, texts, named, sample=0)[0] if named else None
    layered = found.layered if found is not None else {}
    present = [w for w in named if w in layered]
    if found is not None and (capped := found.capped(present)):
        warnings.warn(f"drawn: {capped} (the most a word is drawn with)", UserWarning, stacklevel=2)
    why = {**split, **{w: "0 occurrences in the sentences given" for w in named if w not in present}}
    if not present:
        shown = "; ".join(f"{w}: {reason}" for w, reason in why.items())
        raise InvalidInput(f"none of the words occurs in the sentences given ({shown})")
    if why:
        # The picture is still drawn, but a word left out of it must not go unnoticed.
        shown = "; ".join(f"{w} ({reason})" for w, reason in why.items())
        warnings.warn(f"not in the picture: {shown}", UserWarning, stacklevel=2)
    points = np.stack([v[absolute] for w in present for v in layered[w]])
    owner = [w for w in present for _ in layered[w]]
    if len(points) < 3:
        raise InvalidInput(f"only {len(points)} occurrences found; a 2-D picture needs at least 3")
    return WordPoints(absolute, how.value, owner, _project(points, how, seed))


def plot_words(
    model: Encoder,
    words: Sequence[str] | str,
    sentences: Iterable[str] | str,
    path: str | Path,
    *,
    layer: int = -1,
    method: Projection | str = "pca",
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Each occurrence of each word in the sentences as a point in 2-D (PCA or t-SNE), coloured by word."""
    picture_file(path, overwrite=overwrite)
    found = word_points(model, words, sentences, layer=layer, method=method, seed=seed)
    return draw_words(found, path, overwrite=overwrite)


def draw_words(found: WordPoints, path: str | Path, *, overwrite: bool = False) -> Path:
    """Draw `word_points`' result as a scatter coloured by word."""
    figure = Figure(figsize=(6.4, 5.2))
    ax = figure.add_subplot()
    for w in dict.fromkeys(found.words):
        chosen = [i for i, o in enumerate(found.words) if o == w]
        ax.scatter(found.points[chosen, 0], found.points[chosen, 1], label=f"{w} ({len(chosen)})", alpha=0.75)
    ax.set_xlabel(f"{found.method} 1")
    ax.set_ylabel(f"{found.method} 2")
    note = " (embedding output: occurrences differ only by position)" if found.layer == 0 else ""
    ax.set_title(f"occurrences at layer {found.layer}{note}", fontsize=10)
    ax.legend()
    return save_figure(figure, path, overwrite=overwrite)


def plot_senses(
    senses: Senses,
    path: str | Path,
    *,
    method: Projection | str = "pca",
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """A word's occurrences in 2-D (PCA, t-SNE or UMAP, laid out with `seed`), coloured by sense, each
    sense's size and central example in the legend."""
    how = Projection.parse(method, what="projection")
    picture_file(path, overwrite=overwrite)
    flat = _project(senses.vectors, how, seed)
    figure = Figure(figsize=(6.4, 5.2))
    ax = figure.add_subplot()
    for sense in senses.senses:
        chosen = senses.labels == sense.sense
        ax.scatter(flat[chosen, 0], flat[chosen, 1], label=_sense_label(sense), alpha=0.75)
    ax.set_xlabel(f"{how.value} 1")
    ax.set_ylabel(f"{how.value} 2")
    ax.set_title(f"senses of {senses.word!r}: {senses.criterion}", fontsize=9)
    ax.legend(fontsize=7)
    return save_figure(figure, path, overwrite=overwrite)


def _sense_label(sense: Sense) -> str:
    """A sense's legend entry, one form for every sense: "sense 0: 8 (its central example)", the example
    cut at 40 characters, left out where none is shown (`--examples 0`)."""
    label = f"sense {sense.sense}: {sense.size}"
    if not sense.examples:
        return label
    first = sense.examples[0].snippet
    return f"{label} ({first[:40]}…)" if len(first) > 40 else f"{label} ({first})"


def _project(points: np.ndarray, how: Projection, seed: int) -> np.ndarray:
    """(n, 2) `points` laid out by `how`; InvalidInput where they are all one vector (no layout exists:
    t-SNE crashed the process on them, PCA drew rounding noise)."""
    spread = float(np.ptp(points, axis=0).max()) if len(points) else 0.0
    if spread <= 1e-6 * max(1.0, float(np.abs(points).max(initial=0.0))):
        raise InvalidInput(
            f"the {len(points)} points are all one vector (the same piece at the same place, or the same "
            "row): there is nothing to lay out in 2-D; give points that differ (other sentences or pieces)"
        )
    if how is Projection.PCA:
        from sklearn.decomposition import PCA

        return PCA(n_components=2, random_state=seed).fit_transform(points)
    if how is Projection.UMAP:
        try:
            from umap import UMAP
        except ImportError:
            raise BackendUnavailable(
                "--method umap needs the umap-learn package, which is not installed: "
                "pip install umap-learn (the bertscope extra 'umap'), or use --method pca or tsne"
            ) from None
        neighbours = int(min(15, max(2, len(points) - 1)))
        reducer = UMAP(n_components=2, n_neighbors=neighbours, random_state=seed)
        return np.asarray(reducer.fit_transform(points))
    from sklearn.manifold import TSNE

    perplexity = float(min(30, max(2, (len(points) - 1) // 3)))
    # In float64: the PCA start and the neighbour distances come from BLAS, whose last bits differ between
    # CPUs (AVX-512 and AVX2 kernels sum in other orders). In float32 that noise reached the start t-SNE
    # optimises from, and t-SNE turns one bit into another layout; in float64 it stays far below the
    # float32 that t-SNE rounds the start and distances to, so a seed draws one picture on every machine.
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed)
    return tsne.fit_transform(np.asarray(points, dtype=np.float64))


@dataclass(frozen=True)
class LayerCosines:
    """Token-to-token cosines of one text: `cosines` (layers, tokens, tokens) for the `layers` asked, as
    `/explore/layers` names them (`cosine` is its deprecated old name)."""

    text: str
    tokens: list[str]
    layers: list[int]
    cosines: np.ndarray
    n_dropped: int = 0  # the tokens cut from the text's end (past the model's limit), as /explore/layers

    @property
    def cosine(self) -> np.ndarray:
        """Deprecated: the old name of `cosines` (the same matrices)."""
        return renamed_field(self.cosines, owner="LayerCosines", name="cosines", old="cosine")

    def to_dict(self) -> dict[str, Any]:
        """The matrices as JSON-able lists."""
        return {
            "text": self.text,
            "tokens": self.tokens,
            "layers": self.layers,
            "cosines": self.cosines.tolist(),
            "n_dropped": self.n_dropped,
        }


def layer_cosines(model: Encoder, text: str, *, layers: str = "all") -> LayerCosines:
    """The cosine between every two tokens of one text, at each chosen layer."""
    if not isinstance(text, str):
        raise InvalidSpec("plot_layers takes one text")
    tok = model.embed_tokens(text, layers="all", combine="concat")[0]
    states = tok.vectors.reshape(len(tok.tokens), model.n_layers + 1, -1).transpose(1, 0, 2)
    chosen = list(parse_layers(layers, model.n_layers))
    normed = unit(states[chosen])
    cosines = normed @ normed.transpose(0, 2, 1)
    return LayerCosines(text, list(tok.tokens), chosen, cosines, n_dropped=tok.n_dropped)


def plot_layers(
    model: Encoder, text: str, path: str | Path, *, layers: str = "all", overwrite: bool = False
) -> Path:
    """One heatmap per layer of the cosine between every two tokens of one text."""
    picture_file(path, overwrite=overwrite)
    return draw_layers(layer_cosines(model, text, layers=layers), path, overwrite=overwrite)


def draw_layers(found: LayerCosines, path: str | Path, *, overwrite: bool = False) -> Path:
    """Draw `layer_cosines`' result as one heatmap per layer."""
    n_tokens = len(found.tokens)
    columns = min(4, len(found.layers))
    rows = -(-len(found.layers) // columns)
    size = 0.9 + 0.28 * n_tokens
    figure = Figure(figsize=(columns * size + 1.2, rows * size + 0.6))
    axes = figure.subplots(rows, columns, squeeze=False)
    for ax in axes.flat[len(found.layers) :]:
        ax.set_axis_off()
    for ax, k, matrix in zip(axes.flat, found.layers, found.cosines, strict=False):
        image = ax.imshow(matrix, vmin=-1, vmax=1, cmap="coolwarm")
        ax.set_title(f"layer {k}" + (" (embeddings)" if k == 0 else ""), fontsize=9)
        ax.set_xticks(range(n_tokens), found.tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(n_tokens), found.tokens, fontsize=7)
    figure.colorbar(image, ax=axes, shrink=0.8, label="cosine")
    figure.suptitle(f"token-to-token cosine per layer: {found.text!r}")
    return save_figure(figure, path, overwrite=overwrite)


def each_piece_once(pieces: Sequence[str]) -> None:
    """Refuse a piece named twice (`king king queen`): its second point lies on its first (a PCA axis of
    ~1e-8 noise), and it would count towards the 3 a picture needs, as `static -o` refuses it too."""
    seen: set[str] = set()
    for piece in pieces:
        if piece in seen:
            raise InvalidInput(f"{piece!r} is named twice: a picture draws each piece once; name each once")
        seen.add(piece)


def plot_static(
    model: Encoder,
    ids: Sequence[int],
    path: str | Path,
    *,
    method: Projection | str = "pca",
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """The static rows of word pieces `ids` as labelled points in 2-D (PCA, t-SNE or UMAP)."""
    how = Projection.parse(method, what="projection")
    each_piece_once([model.id_to_token.get(i, str(i)) for i in ids])
    if len(ids) < 3:
        given = "1 piece" if len(ids) == 1 else f"{len(ids)} pieces"
        raise InvalidInput(f"{given} given; a 2-D picture needs at least 3: name more word pieces")
    picture_file(path, overwrite=overwrite)
    flat = _project(static_rows(model, list(ids)), how, seed)
    side = min(14.0, 5.0 + 0.02 * len(ids))
    figure = Figure(figsize=(side, side * 0.8))
    ax = figure.add_subplot()
    ax.scatter(flat[:, 0], flat[:, 1], s=8, alpha=0.6)
    if len(ids) <= 400:  # beyond that the labels hide the points
        for (x, y), i in zip(flat, ids, strict=True):
            ax.annotate(model.id_to_token.get(i, str(i)), (x, y), fontsize=7, alpha=0.85)
    ax.set_xlabel(f"{how.value} 1")
    ax.set_ylabel(f"{how.value} 2")
    ax.set_title(f"static word-piece rows ({len(ids)}), no position, no segment: {how.value}", fontsize=10)
    return save_figure(figure, path, overwrite=overwrite)
