"""Structural probes (Hewitt & Manning 2019): is a parse tree a linear map away from a layer?

The distance probe learns a rank-k map B whose squared distances ||B(h_i - h_j)||^2 between the word
vectors of a sentence approximate the path lengths between the words in its dependency tree; the depth
probe learns ||B h_i||^2 ~ each word's depth. One probe per layer (and the `static` row: the input
embedding rows alone) is trained on one CoNLL-U file and scored on another (UUAS and DSpr, root
accuracy and NSpr: see structural_metrics), beside the linear-chain baseline that reads word order only.

A word's vector is the mean (or first, last ...) of its word pieces, aligned by character offsets into
the words joined by spaces: a piece goes to the word its first non-space character is in (word_pieces).
The vectors of every asked layer go to temporary files (one per row of the table, appended to as the
sentences stream through the model), and the fits read them a batch of sentences at a time: memory is
bounded by a batch, not by the treebank (see row_file). The files are in a folder under TMPDIR, removed
when the probe ends or fails; over LARGE_BYTES their size is warned of before they are written. A
sentence over the model's limit is read in windows (states.layer_states), and warned of.
"""

from __future__ import annotations

import math
import numbers
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import StrEnum, SubwordPooling
from ..core.layers import LayerSpec, parse_layers
from ..core.pooling import pool_words
from ..core.progress import step_progress
from ..errors import InvalidInput
from .conllu import Punct, Tree, check_trees, read_trees, tree_depths, tree_distances, with_punct
from .probe_data import no_pieces, shared_sentences
from .row_file import RowFile
from .states import check_seed, layer_states, layered, static_rows
from .structural_fit import fit_probe, predict_depths, predict_distances, zero_map_loss
from .structural_metrics import chain_depths, chain_distances, depth_scores, distance_scores
from .word_pieces import word_pieces

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = ["StructuralTask", "StructuralResult", "structural_probe", "tree_word_vectors"]

HELD_OUT_EVERY = 5
# Fewer training targets than one sentence of 5 words gives (10 word pairs for the distance probe, 5 depths
# for the depth probe) are warned of: 5 words is the shortest sentence Hewitt & Manning's Spearman scores
# (DSpr, NSpr) count, so a treebank below one such sentence cannot show the probe even one scored shape.
FEW_WORDS = 5
# Word vectors over this many bytes are announced before they are written to the temporary folder.
LARGE_BYTES = 10**9


class StructuralTask(StrEnum):
    """What a structural probe reads from a layer: distances between words, or each word's depth."""

    DISTANCE = "distance"
    DEPTH = "depth"


@dataclass
class StructuralResult:
    """Per row (static, then each layer) the test scores, and the linear-chain baseline's."""

    task: str
    rows: list[dict[str, Any]]
    baseline: dict[str, Any]
    n_train: int
    n_test: int
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: task, rows, baseline, sentence counts and how the probes were trained."""
        return {
            "task": self.task,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "rows": self.rows,
            "baseline": self.baseline,
            "settings": self.settings,
        }


def tree_word_vectors(
    model: Encoder,
    trees: Sequence[Tree],
    folder: Path,
    *,
    layers: Sequence[int],
    subword: SubwordPooling | str = SubwordPooling.MEAN,
    progress: bool | None = None,
    what: str = "given",
) -> tuple[RowFile, list[RowFile], np.ndarray]:
    """(static (words, e'), one (words, d') per layer of `layers`, offsets (sentences + 1,)): every
    word's vectors, in float32 files in `folder` read a run of rows at a time; sentence s is rows
    offsets[s]:offsets[s+1]. e' and d' are the pooled widths (2e and 2d for first_last). `what` names
    the trees in an error about a tree read from no file ("training", "test"). The caller closes the
    files."""
    # pool_words tells the poolings apart by enum: a plain "first_last" would be pooled as a mean into
    # the first_last width, and fail later with NumPy's broadcast error
    subword = SubwordPooling.parse(subword, what="subword pooling")
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in trees])]).astype(np.int64)
    static: RowFile | None = None
    stacked: list[RowFile] = []
    texts = (t.text for t in trees)
    states_of = layer_states(model, texts, progress=progress, total=len(trees))
    windowed = 0
    for number, (tree, (tok, states)) in enumerate(zip(trees, states_of, strict=True)):
        windowed += len(tok) > model.max_tokens  # the engine reads such a text in windows (segments_of)
        groups = _word_pieces(tok, tree, number, what)
        local, start = [], 0
        for group in groups:
            local.append(list(range(start, start + len(group))))
            start += len(group)
        rows = static_rows(model, [tok.ids[j] for group in groups for j in group])
        static_words = pool_words(rows, local, subword)
        layer_words = [pool_words(states[k], groups, subword) for k in layers]
        if static is None:  # the pooled widths are known now: one file per row of the table
            static = RowFile(folder / "static.f32", static_words.shape[1])
            stacked = [
                RowFile(folder / f"layer{k}.f32", w.shape[1])
                for k, w in zip(layers, layer_words, strict=True)
            ]
            _say_size(int(offsets[-1]), [static_words.shape[1], *(w.shape[1] for w in layer_words)], folder)
        static.append(static_words)
        for out, words in zip(stacked, layer_words, strict=True):
            out.append(words)
    if static is None:
        raise InvalidInput("no sentence to probe: give a CoNLL-U file with trees")
    if windowed:
        warnings.warn(
            f"{windowed} of the {len(trees)} {what} sentences {'is' if windowed == 1 else 'are'} longer "
            f"than the model's {model.max_tokens} tokens: read in overlapping windows (each token from the "
            "window it is most central in), never whole",
            stacklevel=3,
        )
    return static.finish(), [out.finish() for out in stacked], offsets


def _say_size(words: int, widths: Sequence[int], folder: Path) -> None:
    """Warn, before they are written, of word vectors over LARGE_BYTES: words x (static + layers) rows x
    width x 4 bytes go to `folder` (under TMPDIR) until the probe ends."""
    size = words * sum(widths) * 4
    if size > LARGE_BYTES:
        warnings.warn(
            f"the word vectors take {size / 1e9:.1f} GB in {folder} until the probe ends ({words} words x "
            f"{sum(widths)} floats over {len(widths)} rows x 4 bytes); TMPDIR chooses the disk",
            stacklevel=4,
        )


def _word_pieces(tok: Any, tree: Tree, number: int, what: str = "given") -> list[list[int]]:
    """Each word's token indices (`word_pieces`: the non-special pieces whose first non-space character
    lies in its span). A word with none is refused at its sentence: path:line where the tree came from a
    file, else the 1-based sentence number (`number` is 0-based) among the `what` trees."""
    groups = word_pieces(tok, tree.spans())
    for word, group in enumerate(groups):
        if not group:
            where = tree.source or f"sentence {number + 1} of the {what} trees"
            raise no_pieces(where, tree.words[word], word + 1)
    return groups


def structural_probe(
    model: Encoder,
    train: str | Path | Sequence[Tree],
    test: str | Path | Sequence[Tree] | None = None,
    *,
    task: StructuralTask | str = StructuralTask.DISTANCE,
    layers: LayerSpec = "all",
    rank: int = 128,
    subword: SubwordPooling | str = SubwordPooling.MEAN,
    epochs: int = 40,
    batch_size: int = 20,
    lr: float = 0.005,
    seed: int = 0,
    progress: bool | None = None,
    punct: Punct | str = Punct.UPOS,
) -> StructuralResult:
    """Train a structural probe per layer (and the static row) on `train` and score it on `test`.

    `train` and `test` are CoNLL-U files with trees (or lists of Tree). Without `test`, every 5th
    distinct sentence of `train` is held out for testing (with its repeats: a sentence given twice is
    one, never on both sides) and the others train. With `test`, the test sentences that also occur in
    `train` are counted (settings `test_overlap`) and warned of. `rank` is cut to the width. `punct`
    names the punctuation the scores leave out: UPOS `PUNCT` (upos), or Hewitt & Manning's Penn
    Treebank XPOS tags (xpos; see conllu).
    """
    layered(model, "structural probes", plural=True)
    kind = StructuralTask.parse(task, what="structural probe task")
    how = SubwordPooling.parse(subword, what="subword pooling")
    chosen = list(dict.fromkeys(parse_layers(layers, model.n_layers)))
    _check_numbers(rank=rank, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    train_trees = read_trees(train) if isinstance(train, (str, Path)) else check_trees(train, "training")
    overlap = 0
    if test is None:
        train_trees, test_trees = held_out_split(train_trees, train)
    else:
        test_trees = read_trees(test) if isinstance(test, (str, Path)) else check_trees(test, "test")
        overlap = shared_sentences(
            [t.text for t in train_trees], [t.text for t in test_trees], train=train, test=test
        )
    rule = Punct.parse(punct, what="punctuation rule")
    test_trees = with_punct(test_trees, rule)
    distance = kind is StructuralTask.DISTANCE
    _warn_few_targets(train_trees, train, distance=distance)
    settings: dict[str, Any] = {
        "model": model.loaded.source, "subword": how.value, "epochs": epochs, "batch_size": batch_size,
        "lr": lr, "seed": seed, "test": "given" if test is not None else f"every {HELD_OUT_EVERY}th",
        "test_overlap": overlap, "punct": rule.value, "rank": {}, "train_loss": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bertscope-structural-") as scratch:
        folder = Path(scratch)
        (folder / "train").mkdir()
        (folder / "test").mkdir()
        feats = tree_word_vectors(
            model, train_trees, folder / "train", layers=chosen, subword=how, progress=progress,
            what="training",
        )  # fmt: skip
        tested = tree_word_vectors(
            model, test_trees, folder / "test", layers=chosen, subword=how, progress=progress, what="test"
        )
        golds = [tree_distances(t.heads) if distance else tree_depths(t.heads) for t in train_trees]
        named: list[tuple[str | int, RowFile, RowFile]] = [("static", feats[0], tested[0])]
        named += [(k, feats[1][i], tested[1][i]) for i, k in enumerate(chosen)]
        # the loss of predicting every distance (depth) 0: a fit that ends above it diverged (_check_loss)
        floor = zero_map_loss(golds, distance=distance)
        rows = []
        with step_progress(len(named) * epochs, "training structural probes", enabled=progress) as step:
            for layer, x, x_test in named:
                fit = Fit(distance, rank, epochs, batch_size, lr, seed)
                scores, k, loss = _layer_row(x, feats[2], golds, x_test, tested[2], test_trees, fit, step)
                _check_loss(loss, layer, lr, floor, distance=distance)
                rows.append({"layer": layer, **scores})
                settings["rank"][str(layer)] = k
                settings["train_loss"][str(layer)] = round(loss, 6)
        for _, x, x_test in named:
            x.close()
            x_test.close()
    chain = [chain_distances(len(t)) if distance else chain_depths(len(t)) for t in test_trees]
    baseline = {"name": "linear chain", **_scores(test_trees, chain, distance=distance)}
    return StructuralResult(kind.value, rows, baseline, len(train_trees), len(test_trees), settings)


def held_out_split(trees: list[Tree], source: Any) -> tuple[list[Tree], list[Tree]]:
    """(train, test): every HELD_OUT_EVERY-th distinct sentence (by text, in order of first appearance)
    and all its repeats test, the others train, so that no test sentence is also a training one."""
    group: dict[str, int] = {}
    for tree in trees:
        group.setdefault(tree.text, len(group))
    held = [(group[t.text] + 1) % HELD_OUT_EVERY == 0 for t in trees]
    train = [t for t, h in zip(trees, held, strict=True) if not h]
    test = [t for t, h in zip(trees, held, strict=True) if h]
    if not test or not train:
        name = source if isinstance(source, (str, Path)) else "the training list of Tree"
        raise InvalidInput(
            f"{name} has {len(trees)} sentence(s): give test='TEST.conllu' (held-out trees), or at least "
            f"{HELD_OUT_EVERY} sentences so that every {HELD_OUT_EVERY}th can be held out ({len(group)} "
            "distinct: a repeated sentence counts once)"
        )
    return train, test


@dataclass(frozen=True)
class Fit:
    """How each layer's probe is trained."""

    distance: bool
    rank: int
    epochs: int
    batch_size: int
    lr: float
    seed: int


def _layer_row(
    x: RowFile,
    offsets: np.ndarray,
    golds: list[np.ndarray],
    x_test: RowFile,
    test_offsets: np.ndarray,
    test_trees: Sequence[Tree],
    fit: Fit,
    step: Any,
) -> tuple[dict[str, Any], int, float]:
    """One row's test scores, the rank used and the last training loss: the probe trained on (words, d)
    `x` (sentence s: rows offsets[s]:offsets[s+1]) and scored on `x_test`."""
    scale = _scale(x)
    width = x.shape[1]
    rank = min(fit.rank, width)
    # a learning rate too high overflows the steps: NumPy's warnings would precede the one-line refusal
    # (_check_loss) that says so, so they are silenced here and the result checked
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        b, loss = fit_probe(
            lambda s: x[offsets[s] : offsets[s + 1]] / scale, golds, distance=fit.distance, rank=rank,
            width=width, epochs=fit.epochs, batch=fit.batch_size, lr=fit.lr, seed=fit.seed, step=step,
        )  # fmt: skip
    if not np.isfinite(b).all():  # the last step overflowed after the last loss was taken: no fit either
        loss = float("nan")
    predict = predict_distances if fit.distance else predict_depths
    predicted = [
        predict(b, x_test[test_offsets[s] : test_offsets[s + 1]] / scale) for s in range(len(test_trees))
    ]  # fmt: skip
    return _scores(test_trees, predicted, distance=fit.distance), rank, loss


def _scores(trees: Sequence[Tree], predicted: list[np.ndarray], *, distance: bool) -> dict[str, Any]:
    return distance_scores(trees, predicted) if distance else depth_scores(trees, predicted)


def _scale(x: RowFile, chunk: int = 4096) -> float:
    """The root mean squared norm of the training vectors, read a chunk at a time: each layer's vectors
    are divided by it, so one learning rate suits layers whose norms differ tenfold."""
    total = 0.0
    for first in range(0, len(x), chunk):
        part = np.asarray(x[first : first + chunk], dtype=np.float64)
        total += float((part * part).sum())
    return float(np.sqrt(total / max(len(x), 1))) or 1.0


def _check_numbers(*, rank: int, epochs: int, batch_size: int, lr: float, seed: int) -> None:
    for name, value in (("rank", rank), ("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidInput(f"{name}={value!r}: give a whole number of 1 or more")
    # a string or None would fail in `lr > 0` with Python's own TypeError
    if not isinstance(lr, numbers.Real) or isinstance(lr, bool):
        raise InvalidInput(f"lr={lr!r}: a learning rate is a number above 0 (e.g. 0.005)")
    # inf passes `lr > 0` (its first step makes the map inf, then NaN): a rate is a finite number
    if not math.isfinite(lr):
        raise InvalidInput(f"lr={lr!r}: a learning rate is a finite number above 0 (e.g. 0.005)")
    if not lr > 0:
        raise InvalidInput(f"lr={lr!r}: a learning rate is a number above 0 (e.g. 0.005)")
    check_seed(seed)


def _check_loss(loss: float, layer: str | int, lr: float, floor: float, *, distance: bool) -> None:
    """Refuse a probe whose training loss overflowed (NaN or inf), or diverged: ended above `floor`, the
    loss of B = 0 (every prediction 0). Its map is no fit, and its scores (a UUAS of 0, no DSpr, or a
    chance-level one) would read as a layer's result. Any fit that learned from the trees ends below
    `floor`: the start is near B = 0 and the rate falls to 0. A floor of 0 (every gold 0: sentences of
    one word) has nothing to diverge from."""
    row = "static row" if layer == "static" else f"layer {layer}"
    if not math.isfinite(loss):
        raise InvalidInput(
            f"the {row} probe's training loss became {loss} with lr={lr:g}: the steps overflowed; give a "
            f"lower lr= (e.g. {lr / 100:g})"
        )
    if floor > 0 and loss > floor:
        what = "distance" if distance else "depth"
        raise InvalidInput(
            f"the {row} probe's training loss ended at {loss:.4g} with lr={lr:g}, above the {floor:.4g} of "
            f"predicting every {what} 0: the steps diverged; give a lower lr= (e.g. {lr / 100:g})"
        )


def _warn_few_targets(trees: Sequence[Tree], source: Any, *, distance: bool) -> None:
    """Warn when the training trees give fewer targets (word pairs, or words for depth) than one
    sentence of FEW_WORDS words does: the probe is fitted to almost nothing."""
    n_words = [len(t) for t in trees]
    given = sum(n * (n - 1) // 2 for n in n_words) if distance else sum(n_words)
    floor = FEW_WORDS * (FEW_WORDS - 1) // 2 if distance else FEW_WORDS
    if given < floor:
        name = source if isinstance(source, (str, Path)) else "the training trees"
        what = "word pairs" if distance else "words"
        warnings.warn(
            f"the training sentences of {name} give {given} {what} to fit (one sentence of {FEW_WORDS} "
            f"words gives {floor}): the probe is fitted to almost nothing; train on a treebank",
            stacklevel=3,
        )
