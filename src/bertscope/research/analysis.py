"""Which layer and pooling to trust: layer x pooling (x post-processing) sweeps against gold scores,
word-similarity evaluation per layer, and the Lee document-similarity benchmark.

Every sweep runs the forward once per text of a chunk of pairs: all layers come out of one pass
(`layers="all"`, concatenated) and every layer x pooling is pooled from those token vectors with
`pooling.pool_sentences`. The pairs go `PAIR_CHUNK` at a time: their distinct texts are embedded, each
cell's cosines kept (pairs x cells floats) and the vectors dropped, so memory does not grow with the
pairs; only a post-processing fitted in-sample, which needs every text's vectors of a cell, keeps them
(texts x layers x poolings x d floats).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from ..core._enums import LongText, Pooling
from ..core.layers import LayerSpec, parse_layers
from ..core.pooling import pool_sentences
from ..core.post import PostKind, PostProcessor, fit_post
from ..core.progress import progress_callback
from ..core.similarity import unit
from ..core.text_files import MISSING_VALUES, is_column_name, shown_path
from ..core.tokens import by_pair, check_texts, named_as
from ..errors import CorpusError, InvalidInput, InvalidSpec
from ..static import static_word
from .probe_data import text_lines
from .states import chunked_token_matrices

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.encoder import Encoder
    from ..core.engine import OnBatch
    from ..core.spec import RecipeKeywords

__all__ = [
    "SweepResult",
    "sweep",
    "evaluate_pairs",
    "read_pairs",
    "constant_gold",
    "layer_vectors",
    "WordEval",
    "evaluate_words",
    "word_dataset",
    "read_word_pairs",
    "evaluate_docsim",
    "correlations",
    "nan_note",
]

SWEEP_POOLINGS = (Pooling.CLS, Pooling.MEAN, Pooling.MAX, Pooling.MEAN_SQRT_LEN)
WORD_DATASETS = {"simlex999": "simlex999.txt", "wordsim353": "wordsim353.tsv"}
# Pairs embedded together by a sweep: their vectors (2 texts x layers x poolings x d floats, ~73 KB a pair
# for MiniLM's 7 layers x 3 poolings) are dropped once their cosines are taken
PAIR_CHUNK = 1000


@dataclass
class SweepResult:
    """One record per layer x pooling x post: spearman, pearson and n; `best` is the top by spearman;
    `note` says why cells are NaN (a cosine the same for every pair), or None when none is."""

    records: list[dict[str, Any]]
    layers: list[int]
    poolings: list[str]
    posts: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    note: str | None = None

    @property
    def best(self) -> dict[str, Any] | None:
        """The record with the highest Spearman (NaNs, from constant similarities, never win), with
        `spearman_ci` (its 95% interval, `_spearman_interval`; None under 4 pairs) and
        `n_cells_within_ci` (the other cells whose Spearman falls inside it: a count, not a test, since
        the cells are correlations on the same pairs); None when no cell has a correlation (`note` says
        why)."""
        valid = [r for r in self.records if np.isfinite(r["spearman"])]
        if not valid:
            return None
        top = max(valid, key=lambda r: r["spearman"])
        interval = _spearman_interval(top["spearman"], top["n_pairs"])
        within = (
            None
            if interval is None
            else sum(interval[0] <= r["spearman"] <= interval[1] for r in valid if r is not top)
        )
        return {**top, "spearman_ci": interval, "n_cells_within_ci": within}

    def grid(self, metric: str = "spearman") -> tuple[list[str], list[int], np.ndarray]:
        """(row labels pooling[+post], layers, values (rows, layers)) for a heatmap."""
        rows = [p if post == "none" else f"{p}+{post}" for post in self.posts for p in self.poolings]
        values = np.full((len(rows), len(self.layers)), np.nan)
        for r in self.records:
            label = r["pooling"] if r["post"] == "none" else f"{r['pooling']}+{r['post']}"
            values[rows.index(label), self.layers.index(r["layer"])] = r[metric]
        return rows, self.layers, values

    def to_pandas(self) -> Any:
        """The records as a pandas DataFrame (pandas must be installed)."""
        import pandas as pd

        return pd.DataFrame(self.records)


def _spearman_interval(rho: float, n: int, *, z: float = 1.959964) -> list[float] | None:
    """[low, high]: the 95% interval of a Spearman correlation `rho` over `n` pairs by Fisher's z, with
    Fieller, Hartley & Pearson's (1957) variance for Spearman, 1.06 / (n - 3); None under 4 pairs."""
    if n < 4 or not np.isfinite(rho):
        return None
    centre = float(np.arctanh(np.clip(rho, -1 + 1e-12, 1 - 1e-12)))  # |rho| = 1 would be infinite
    half = z * float(np.sqrt(1.06 / (n - 3)))
    return [float(np.tanh(centre - half)), float(np.tanh(centre + half))]


def read_pairs(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    """Two texts and a gold score per line of a TSV file: `read_numbered_pairs` without the line numbers."""
    left, right, gold, _ = read_numbered_pairs(path)
    return left, right, gold


def read_numbered_pairs(path: str | Path) -> tuple[list[str], list[str], np.ndarray, list[int]]:
    """Two texts and a gold score per tab-separated line (exactly three fields: a fourth, or a tab inside a
    text, is refused by its line); blank lines and lines starting with # (comments, as gensim's word-pair
    files have them) are skipped.

    The first line is a header, skipped, only when its score field reads as a column name and it is one
    beyond doubt: the score field names a score column (`score`, `similarity` ..., as `calibrate` reads
    its label column) or both text fields name text columns (`sentence1`, `left` ...). Any other line that
    is not a scored pair (a word for a score, a missing one: 'n/a', 'NA', '-', empty) is refused with its
    line number, never dropped.
    """
    from .baseline import LABEL_COLUMNS, names_text_columns, warn_repeated_pairs

    name = shown_path(path)  # <stdin> for -
    left, right, gold, numbers = [], [], [], []
    commented: list[int] = []
    for index, (number, fields) in enumerate(_tsv(path, 3, commented)):
        if index == 0 and is_column_name(third := fields[2].strip()):
            if third.lower() in LABEL_COLUMNS or names_text_columns(fields):
                continue  # a header line
        try:
            score = float(fields[2])
        except ValueError:
            hint = ""
            if index == 0 and is_column_name(fields[2]):
                hint = "; if this line is a header, name its third column 'score'"
            raise CorpusError(f"{name}:{number}: {_not_a_score(fields[2])}{hint}") from None
        if not fields[0].strip() or not fields[1].strip():
            raise CorpusError(f"{name}:{number}: a text of the pair is empty; give both texts")
        if not math.isfinite(score):
            # a NaN gold score turns every correlation into nan, and the run would still exit 0
            raise CorpusError(
                f"{name}:{number}: the gold score {fields[2]!r} is not a finite number; give a real score"
            )
        left.append(fields[0])
        right.append(fields[1])
        gold.append(score)
        numbers.append(number)
    if commented:
        # a hashtag is text: a pair whose first text starts with # was dropped in silence
        lines = ", ".join(str(n) for n in commented[:5]) + (" ..." if len(commented) > 5 else "")
        warnings.warn(
            f"{name}: {len(commented)} line(s) starting with # read as scored pairs but were skipped as "
            f"comments (line {lines}); to score such a pair, put the text that starts with # second",
            UserWarning,
            stacklevel=2,
        )
    warn_repeated_pairs(name, left, right, gold, numbers, value="gold score")
    if len(gold) < 3:
        raise CorpusError(f"{name} has {len(gold)} scored pairs; a correlation needs at least 3")
    if (why := constant_gold(gold)) is not None:
        raise CorpusError(f"{name}: {why}")
    return left, right, np.array(gold), numbers


def _not_a_score(field: str) -> str:
    """Why a score field that float() refused is no score, and the fix."""
    cell = field.strip()
    if cell.lower() in MISSING_VALUES:
        return f"the gold score is missing ({field!r}); give the pair a score, or leave the line out"
    if re.fullmatch(r"[+-]?\d*,\d+", cell):  # 0,5: a decimal comma
        return f"the third field {field!r} is not a number; write scores with a decimal point (0.5)"
    return f"the third field {field!r} is not a number; give each pair a gold score that is one (3, 0.5)"


def checked_gold(
    left: Sequence[str], right: Sequence[str], gold: Sequence[float] | np.ndarray, who: str
) -> np.ndarray:
    """`gold` as float64, or the one-line refusal of what no correlation can be read from (`who`: the
    function refusing): lists of unequal length, fewer than 3 pairs, a score that is not finite (named by
    its pair), every score the same (a 2-pair Spearman is +-1 whatever the model, a NaN or constant gold
    gives nan)."""
    try:
        scores = np.asarray(gold, dtype=np.float64)
    except (TypeError, ValueError):  # numpy's bare "could not convert string to float" named no pair
        bad = next(i for i, g in enumerate(gold) if not _is_number(g))
        pair = f" ({left[bad]!r}, {right[bad]!r})" if bad < min(len(left), len(right)) else ""
        raise InvalidInput(
            f"{who}: pair {bad}{pair} has the gold score {gold[bad]!r}, which is not a number; give each "
            "pair a number (3, 0.5)"
        ) from None
    if not len(left) == len(right) == len(scores):
        raise InvalidInput(
            f"{who} needs equally long left, right and gold, got {len(left)}, {len(right)} and {len(scores)}"
        )
    if len(scores) < 3:
        raise InvalidInput(f"{who} needs at least 3 scored pairs, got {len(scores)}")
    if not np.isfinite(scores).all():
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise InvalidInput(
            f"{who}: pair {bad} ({left[bad]!r}, {right[bad]!r}) has the gold score {scores[bad]}: every "
            "score must be a finite number (a NaN would make every correlation nan)"
        )
    if (why := constant_gold(scores)) is not None:
        raise InvalidInput(why)
    return scores


def _is_number(value: object) -> bool:
    """Whether numpy reads `value` as one float64."""
    try:
        np.asarray(value, dtype=np.float64).item()
    except (TypeError, ValueError):
        return False
    return True


def indexed_word_pairs(
    pairs: Sequence[tuple[str, str, float]], who: str
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Scored word pairs as their distinct words, each pair's two indices into them and the gold scores
    (`checked_gold`'s refusals, `who` naming the function), so each word is encoded once."""
    left, right = [a for a, _, _ in pairs], [b for _, b, _ in pairs]
    gold = checked_gold(left, right, [g for _, _, g in pairs], who)
    words = list(dict.fromkeys(w for pair in zip(left, right, strict=True) for w in pair))
    where = {w: i for i, w in enumerate(words)}
    return words, np.array([where[a] for a in left]), np.array([where[b] for b in right]), gold


def constant_gold(gold: Sequence[float] | np.ndarray) -> str | None:
    """Why no correlation can be read against `gold` (every score the same), or None."""
    scores = np.asarray(gold, dtype=np.float64)
    if len(scores) and np.ptp(scores) == 0:
        return (
            f"all {len(scores)} gold scores are {scores[0]:g}; a correlation needs at least two different "
            "scores"
        )
    return None


def read_word_pairs(path: str | Path) -> list[tuple[str, str, float]]:
    """Word pairs with a gold score from a tab-separated file (same layout as `read_pairs`)."""
    left, right, gold = read_pairs(path)
    return list(zip(left, right, gold.tolist(), strict=True))


def _tsv(path: str | Path, width: int, commented: list[int]) -> Iterator[tuple[int, list[str]]]:
    # the probes' reader: a byte that is not UTF-8 is named at its line (a bare traceback-less
    # UnicodeDecodeError named none), a byte-order mark and CRLF endings read as the probe files' are;
    # a comment line that reads as a scored pair (width fields, a finite number last) goes in `commented`
    for number, line in text_lines(Path(path)):
        if line.startswith("#") and _scored(line.split("\t"), width):
            commented.append(number)
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != width:  # a fourth field, or a tab inside a text, would shift what is read
            raise CorpusError(
                f"{shown_path(path)}:{number}: expected {width} tab-separated fields, found {len(fields)}"
                f"; {_field_fix(fields, width)}"
            )
        yield number, fields


def _field_fix(fields: list[str], width: int) -> str:
    """What to do about a line of `fields` that is not `width` tab-separated fields."""
    if len(fields) == 1 and "," in fields[0]:
        return f"the file looks comma-separated: separate the {width} fields with tabs"
    if len(fields) > width:
        return "drop the extra column, or the tab inside a text"
    return f"give the {width} fields (text, text, score) separated by tabs"


def _scored(fields: list[str], width: int) -> bool:
    """Whether `fields` read as a scored pair: `width` of them, the last a finite number."""
    try:
        return len(fields) == width and math.isfinite(float(fields[-1]))
    except ValueError:
        return False


# Cosines of float32 vectors are exact to about 1e-6: cosines that span less than this (cls at MiniLM's
# layers 1-5, all within 5e-6 of 1) are ordered by rounding, and their Spearman moved 0.03-0.05 with a
# 1e-7 change of one vector; such a cell has no correlation, as a constant one has none
_EXACT_SPREAD = 1e-5  # said as "1e-5" in nan_note


def correlations(a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Spearman and Pearson of row-wise cosine(a_i, b_i) against gold (NaN when the cosines span less than
    `_EXACT_SPREAD`: constant, or apart only by float32 rounding)."""
    return _correlate(_cosines(a, b), gold)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine(a_i, b_i) in float64, (n,)."""
    return np.sum(unit(a, dtype=np.float64) * unit(b, dtype=np.float64), axis=1)


def _correlate(cos: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """`correlations` of cosines already taken."""
    if np.ptp(cos) < _EXACT_SPREAD:
        return {"spearman": float("nan"), "pearson": float("nan")}
    return {
        "spearman": float(stats.spearmanr(cos, gold).statistic),
        "pearson": float(stats.pearsonr(cos, gold)[0]),
    }


def layer_vectors(
    model: Encoder,
    texts: Sequence[str],
    poolings: Sequence[Pooling | str] = SWEEP_POOLINGS,
    *,
    mask_special: bool = False,
    long: LongText | str = "truncate",
    stride: int | None = None,
) -> dict[str, np.ndarray]:
    """Per pooling, (texts, L+1, d) sentence vectors of every layer, from one forward per text."""
    every = list(range(model.n_layers + 1))
    return _layer_vectors(model, texts, poolings, every, mask_special=mask_special, long=long, stride=stride)[
        0
    ]


def _layer_vectors(
    model: Encoder,
    texts: Sequence[str],
    poolings: Sequence[Pooling | str],
    layers: Sequence[int],
    *,
    mask_special: bool,
    long: LongText | str,
    stride: int | None,
    on_batch: OnBatch | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per pooling, (texts, len(layers), d) sentence vectors of `layers` (0..L, in that order), and the
    tokens `long="truncate"` dropped of each text (n_texts,). The engine gets CHUNK texts at a time: it
    holds a chunk's token vectors of every layer, so memory is a chunk's plus the pooled vectors kept."""
    pools = [_sweep_pooling(p) for p in poolings]
    texts = check_texts(texts)
    spec = model.spec(layers="all", combine="concat", pooling="mean", long=long, stride=stride)
    count = model.n_layers + 1
    rows: dict[str, np.ndarray] = {}
    dropped = np.zeros(len(texts), dtype=np.int64)
    for index, (tok, matrix) in enumerate(chunked_token_matrices(model, texts, spec, on_batch=on_batch)):
        hidden = matrix.reshape(len(matrix), count, -1).transpose(1, 0, 2)[list(layers)]
        keep = [0.0 if s and mask_special else 1.0 for s in tok.special_tokens_mask]
        mask = np.broadcast_to(np.array(keep, dtype=np.float32), (len(layers), len(keep)))
        for p in pools:
            pooled = pool_sentences(hidden, mask, p)
            if p.value not in rows:  # the width is known now: one array for every text
                rows[p.value] = np.empty((len(texts), *pooled.shape), dtype=pooled.dtype)
            rows[p.value][index] = pooled
        dropped[index] = tok.n_dropped
    return rows, dropped


def _sweep_pooling(value: Pooling | str) -> Pooling:
    allowed = ", ".join(p.value for p in SWEEP_POOLINGS)
    try:
        pool = Pooling.parse(value, what="pooling")
    except InvalidSpec as exc:
        # Pooling's own list named pooler, first_last_avg and auto, which the sweep then refuses
        every = ", ".join(p.value for p in Pooling)
        said = str(exc).replace(
            f"choose one of: {every}", f"the sweep pools every layer with one of: {allowed}"
        )
        raise InvalidSpec(said) from None
    if pool not in SWEEP_POOLINGS:
        raise InvalidSpec(
            f"the sweep pools every layer with one of: {allowed}; {pool.value} is not per layer "
            "(first_last_avg is layers 1 and -1 with mean, pooler and auto belong to the last layer)"
        )
    return pool


def sweep(
    model: Encoder,
    left: Sequence[str],
    right: Sequence[str],
    gold: Sequence[float] | np.ndarray,
    *,
    layers: LayerSpec = "all",
    poolings: Sequence[Pooling | str] = (Pooling.CLS, Pooling.MEAN, Pooling.MAX),
    post: Sequence[PostKind | str | PostProcessor] = (),
    post_dim: int | None = None,
    mask_special: bool = False,
    long: LongText | str = "truncate",
    stride: int | None = None,
    progress: bool | None = None,
) -> SweepResult:
    """Spearman/Pearson of cosine against gold for every layer x pooling (x post), one forward per text.

    `poolings` is a list, or one comma-separated string ("cls,mean") as the command line takes it. The
    pairs go `PAIR_CHUNK` at a time (memory bounded by a chunk's vectors; a text in pairs of two chunks is
    embedded in each), one chunk where a post kind is fitted in-sample. `progress`: a progress bar or log
    lines on stderr (None: from 256 texts).

    A post kind ("whitening", "abtt", "pca") is fitted on this data's own vectors for each cell, keeping
    `post_dim` dimensions with whitening or pca (default: half the distinct texts, at most d: whitening n
    points in n-1 dimensions would make all their cosines equal) or removing `post_dim` directions with
    abtt (default d/100): each such record says `fitted: "in-sample"`. A count the texts do not allow is
    refused, as `fit_post` refuses it (under its name, dim); only a cell whose vectors are all equal
    scores NaN. A
    fitted PostProcessor applies only to the layer and pooling its file says it was fitted on
    (`fitted: "file"`), to unit vectors where its file was fitted on normalized ones, or, from a file
    that does not say, to every cell of its width.
    """
    gold = checked_gold(left, right, gold, "sweep")
    left, right = list(left), list(right)
    chosen = list(dict.fromkeys(parse_layers(layers, model.n_layers)))
    if isinstance(poolings, str):  # "mean" iterated would be the poolings m, e, a, n
        poolings = [p.strip() for p in poolings.split(",")]
    names = [_sweep_pooling(p).value for p in poolings]
    if twice := next((name for i, name in enumerate(names) if name in names[:i]), None):
        # as a layer named twice is refused: the same records twice, and an empty row in the picture
        raise InvalidSpec(f"pooling {twice} appears twice; name each pooling once")
    posts = [("none", None), *[_post_entry(p) for p in post]]
    for label, processor in posts:  # a file that fits no cell would leave the sweep in silence
        if isinstance(processor, PostProcessor) and not any(
            _fitted_where(processor, layer, name, mask_special) for name in names for layer in chosen
        ):
            spec = processor.settings.get("spec") or {}
            raise InvalidSpec(
                f"the post-processing {label} was fitted on layers {spec.get('layers')}, pooling "
                f"{spec.get('pooling')}, mask_special {bool(spec.get('mask_special'))}: no cell of this "
                "sweep; add that layer and pooling to the sweep, or fit a file on a cell of it"
            )
    unique = list(dict.fromkeys([*left, *right]))
    _check_post_dim(post_dim, [p for _, p in posts], len(unique))
    # a fit in-sample needs every text's vectors of its cell: then the pairs are one chunk
    size = len(gold) if any(isinstance(p, PostKind) for _, p in posts) else PAIR_CHUNK
    cosines, dropped = _sweep_cosines(
        model, left, right, unique, names, chosen, posts, size=size, post_dim=post_dim,
        mask_special=mask_special, long=long, stride=stride, progress=progress,
    )  # fmt: skip
    records = []
    for label, processor in posts:
        for name in names:
            for layer in chosen:
                if (label, name, layer) not in cosines:
                    continue
                scores = _correlate(cosines[label, name, layer], gold)
                fitted = _fitted_where(processor, layer, name, mask_special)
                cell = {"layer": layer, "pooling": name, "post": label, "fitted": fitted}
                records.append({**cell, **scores, "n_pairs": len(gold)})
    return SweepResult(
        records,
        chosen,
        names,
        [label for label, _ in posts],
        settings={
            "model": model.loaded.source,
            "n_texts": len(unique),
            "mask_special": mask_special,
            # long="truncate" cut these texts (and dropped these tokens): said, never silent
            "n_truncated": int((dropped > 0).sum()),
            "n_dropped": int(dropped.sum()),
        },
        note=nan_note(records, left, right),
    )


def _sweep_cosines(
    model: Encoder,
    left: list[str],
    right: list[str],
    unique: list[str],
    names: list[str],
    chosen: list[int],
    posts: list[tuple[str, PostKind | PostProcessor | None]],
    *,
    size: int,
    post_dim: int | None,
    mask_special: bool,
    long: LongText | str,
    stride: int | None,
    progress: bool | None,
) -> tuple[dict[tuple[str, str, int], np.ndarray], np.ndarray]:
    """Each cell's (post label, pooling, layer) cosines of every pair, (pairs,), and the tokens
    `long="truncate"` dropped of each of `unique` (the distinct texts); the pairs go `size` at a time, each
    chunk's distinct texts embedded and their vectors dropped once the cosines are taken."""
    n = len(left)
    spans = [(start, min(start + size, n)) for start in range(0, n, size)]
    where = {t: i for i, t in enumerate(unique)}
    texts_of = [list(dict.fromkeys([*left[a:b], *right[a:b]])) for a, b in spans]
    cosines: dict[tuple[str, str, int], np.ndarray] = {}
    dropped = np.zeros(len(unique), dtype=np.int64)
    whole = by_pair(left, right)  # a refusal names a text by its pair, not "text 6" of a chunk
    with progress_callback(sum(map(len, texts_of)), enabled=progress) as on_batch:
        for (start, stop), texts in zip(spans, texts_of, strict=True):
            at = [where[t] for t in texts]
            with named_as(_shifted(whole, at)):
                vectors, cut = _layer_vectors(  # the chosen layers only, column c for layer chosen[c]
                    model, texts, names, chosen, mask_special=mask_special, long=long, stride=stride,
                    on_batch=on_batch,
                )  # fmt: skip
            dropped[at] = cut
            local = {t: i for i, t in enumerate(texts)}
            ia = np.array([local[t] for t in left[start:stop]])
            ib = np.array([local[t] for t in right[start:stop]])
            for label, processor in posts:
                for name in names:
                    for column, layer in enumerate(chosen):
                        x = vectors[name][:, column]
                        y = _cell_vectors(processor, x, layer, name, mask_special, post_dim)
                        if y is not None:
                            cell = cosines.setdefault((label, name, layer), np.empty(n))
                            cell[start:stop] = _cosines(y[ia], y[ib])
            del vectors  # the chunk's vectors: only the cosines stay
    return cosines, dropped


def _shifted(whole: Callable[[str, int], str], at: list[int]) -> Callable[[str, int], str]:
    """A `named_as` naming of a chunk's text i as `whole` names text at[i] of all the distinct texts."""
    return lambda _kind, i: whole("text", at[i])


def _cell_vectors(
    processor: PostKind | PostProcessor | None,
    x: np.ndarray,
    layer: int,
    pooling: str,
    mask_special: bool,
    dim: int | None,
) -> np.ndarray | None:
    """A cell's (texts, d) vectors `x` post-processed, or None where its post does not apply (a file fitted
    on another cell, or of another width)."""
    if _fitted_where(processor, layer, pooling, mask_special) is None and processor is not None:
        return None  # a file applies only to the cell it was fitted on
    try:
        return _post_apply(processor, x, dim)
    except InvalidInput:
        if not _all_equal(x):
            raise  # the fit's own reason (too few texts for the count asked), never a NaN cell
        # A cell whose vectors are all equal (layer 0 cls) cannot be fitted; it scores NaN.
        return np.zeros_like(x)


def nan_note(records: list[dict[str, Any]], left: Sequence[str], right: Sequence[str]) -> str | None:
    """Why some or all sweep cells have no correlation (NaN), or None when every cell has one. A cell is
    NaN when its cosine is the same for every pair, within float32's exactness (`_EXACT_SPREAD`): then it
    correlates with nothing."""
    empty = [r for r in records if not np.isfinite(r["spearman"])]
    if not empty:
        return None
    if len(empty) == len(records):
        pairs = set(zip(left, right, strict=True))
        if all(a == b for a, b in pairs):
            why = "each pair is one text twice"
        elif len(pairs) == 1:
            a, b = next(iter(pairs))
            why = f"all {len(left)} pairs are the same two texts, {a[:30]!r} and {b[:30]!r}"
        else:
            why = "are the pairs identical texts?"
        return (
            "no correlation in any cell: the cosine is the same for every pair in every cell (within "
            f"1e-5, float32's exactness; {why}); "
            "give pairs of different texts"
        )
    said = (
        "nan: the cell's cosines span less than 1e-5 (float32's exactness: the same for every "
        "pair, or apart only by rounding), so it correlates with nothing"
    )
    if any(r["pooling"] == Pooling.CLS.value and r["layer"] == 0 for r in empty):
        said += "; cls at layer 0 is the same vector for every text (the first token's row, before any layer)"
    return said


def _fitted_where(
    processor: PostKind | PostProcessor | None, layer: int, pooling: str, mask_special: bool
) -> str | None:
    """Where a cell's post-processing was fitted: "in-sample" (on these pairs' own texts), "file"
    (a file fitted on this very layer and pooling, or one that does not say), None (none, or a file
    fitted on another cell: its centre and axes belong to other vectors)."""
    if processor is None:
        return None
    if not isinstance(processor, PostProcessor):
        return "in-sample"
    spec = processor.settings.get("spec")
    if not spec:
        return "file"
    same = list(spec.get("layers") or ()) == [layer] and spec.get("pooling") == pooling
    return "file" if same and bool(spec.get("mask_special")) == mask_special else None


def _post_entry(item: PostKind | str | PostProcessor) -> tuple[str, PostKind | PostProcessor]:
    if isinstance(item, PostProcessor):
        return str(item.settings.get("name", item.kind.value)), item
    kind = PostKind.parse(item, what="post-processing kind")
    return kind.value, kind


def _all_equal(x: np.ndarray) -> bool:
    """Whether every row of (n, d) `x` is the first one (to float32 rounding): a cell with one vector."""
    scale = max(float(np.abs(x).max(initial=0.0)), 1.0)
    return bool(np.abs(x - x[:1]).max(initial=0.0) <= 1e-6 * scale)


def _check_post_dim(dim: int | None, posts: Sequence[PostKind | PostProcessor | None], n_texts: int) -> None:
    """Refuse a whitening or pca `dim` past what `n_texts` centred vectors span (n - 1), before any
    forward: the fit's own bound, min(n, d), named one more (6 texts "allow 1..6", then 6 was refused)."""
    fitted_here = any(p in (PostKind.WHITENING, PostKind.PCA) for p in posts)
    if dim is not None and fitted_here and 1 < n_texts <= dim:
        raise InvalidSpec(
            f"dim={dim} is out of range: the {n_texts} distinct texts span at most {n_texts - 1} "
            f"directions (centring costs one), so whitening and pca keep 1..{n_texts - 1}; give "
            f"dim={n_texts - 1} or fewer, or more pairs"
        )


def _post_apply(
    processor: PostKind | PostProcessor | None, x: np.ndarray, dim: int | None
) -> np.ndarray | None:
    if processor is None:
        return x
    if isinstance(processor, PostProcessor):
        if processor.dim_in != x.shape[1]:
            return None
        # The file was fitted on the vectors its spec made (fit-post's default pooling normalizes): its
        # centre and axes belong to unit vectors there, never to the sweep's raw ones.
        if (processor.settings.get("spec") or {}).get("normalize"):
            x = unit(x)
        return processor.apply(x)
    if dim is None and processor not in (PostKind.ABTT, PostKind.STANDARDIZE):
        dim = max(1, min(x.shape[1], len(x) // 2))
    return fit_post(x, processor, dim=dim).apply(x)


def evaluate_pairs(
    model: Encoder,
    left: Sequence[str],
    right: Sequence[str],
    gold: Sequence[float] | np.ndarray,
    **options: Unpack[RecipeKeywords],
) -> dict[str, Any]:
    """Spearman/Pearson of cosine against gold for one configuration (`model.embed` options).

    A `post` goes through the recipe like everywhere else: checked against the spec it was fitted on.
    """
    gold = checked_gold(left, right, gold, "evaluate_pairs")
    unique = list(dict.fromkeys([*left, *right]))
    with named_as(by_pair(left, right)):
        result = model.embed(unique, **options)
    vectors = result.vectors
    where = {t: i for i, t in enumerate(unique)}
    a = vectors[[where[t] for t in left]]
    b = vectors[[where[t] for t in right]]
    return {
        **correlations(a, b, gold),
        "n_pairs": len(gold),
        "n_truncated": result.n_truncated,
        "spec": result.spec,
    }


@dataclass
class WordEval:
    """Spearman per layer for word vectors of words encoded alone, plus the static rows; and coverage."""

    records: list[dict[str, Any]]
    coverage: dict[str, Any]


def word_dataset(name: str) -> list[tuple[str, str, float]]:
    """SimLex-999 or WordSim-353 word pairs with gold scores, from gensim's bundled test files."""
    if name not in WORD_DATASETS:
        raise InvalidSpec(f"unknown word dataset {name!r}; choose one of: {', '.join(WORD_DATASETS)}")
    try:
        from gensim.test.utils import datapath
    except ImportError:
        raise InvalidInput(
            "the word datasets come with gensim: `pip install gensim`, or pass -i/--input FILE"
        ) from None
    with warnings.catch_warnings():
        # SimLex-999 scores (sly, strange) and (strange, sly) apart, as its authors did: no repeat to drop
        warnings.filterwarnings("ignore", message=".*repeat an earlier line's texts", category=UserWarning)
        return read_word_pairs(datapath(WORD_DATASETS[name]))


def evaluate_words(model: Encoder, pairs: Sequence[tuple[str, str, float]]) -> WordEval:
    """Spearman of cosine against gold for static word vectors and for each layer (each word encoded alone).

    The records are named as `compare_kinds`'s (and `eval words`'s) for these two kinds: `kind` "rows"
    (the input rows; `layer` None), then "decontextualized" at each layer. A word the vocabulary lacks is
    never dropped: its vector is the mean over its word pieces, both for the rows and at every layer.
    `coverage` counts words kept whole and words split into pieces.
    """
    words, ia, ib, gold = indexed_word_pairs(pairs, "word evaluation")
    rows = np.stack([static_word(model, w).vector for w in words])
    layered = layer_vectors(model, words, [Pooling.MEAN], mask_special=True)["mean"]
    # named as compare_kinds (static_kinds.py, a floor above) and `eval words` name these two kinds
    records = [{"kind": "rows", "layer": None, **correlations(rows[ia], rows[ib], gold)}]
    records += [
        {"kind": "decontextualized", "layer": k, **correlations(layered[ia, k], layered[ib, k], gold)}
        for k in range(layered.shape[1])
    ]
    split = [w for w in words if len(static_word(model, w).ids) > 1]
    coverage = {
        "n_pairs": len(pairs),
        "n_words": len(words),
        "n_words_whole": len(words) - len(split),
        "n_words_split": len(split),
        "n_pairs_all_whole": int(sum(1 for a, b, _ in pairs if a not in split and b not in split)),
        "oov": "words the vocabulary lacks are the mean of their word pieces (static and every layer)",
    }
    return WordEval(records, coverage)


def evaluate_docsim(
    model: Encoder,
    **options: Unpack[RecipeKeywords],
) -> dict[str, Any]:
    """Pearson/Spearman of document cosine against human similarity on gensim's Lee corpus (50 documents).

    `options` are `model.embed`'s; a `post` is checked against the spec it was fitted on, as everywhere.
    """
    try:
        from gensim.test.utils import datapath
    except ImportError:
        raise InvalidInput("the Lee corpus comes with gensim: `pip install gensim`") from None
    docs = Path(datapath("lee.cor")).read_text(encoding="latin-1").strip().split("\n")
    human = np.loadtxt(datapath("similarities0-1.txt"))
    upper = np.triu_indices(len(docs), 1)
    result = model.embed(docs, **options)
    rows = unit(result.vectors, dtype=np.float64)
    cos = (rows @ rows.T)[upper]
    truth = human[upper]
    return {
        "pearson": float(stats.pearsonr(cos, truth)[0]),
        "spearman": float(stats.spearmanr(cos, truth).statistic),
        "n_documents": len(docs),
        "n_pairs": len(truth),
        "n_truncated": result.n_truncated,
        "spec": result.spec,
    }
