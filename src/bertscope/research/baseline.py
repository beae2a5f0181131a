"""How high is high: a score's percentile among unrelated pairs, and a threshold calibrated on labels.

Raw BERT cosines sit high for everything (anisotropy), so 0.62 says little alone. `fit_baseline` embeds
a reference corpus (default: the sentences shipped in bertscope/calibration.txt) with the same model,
layers, pooling and post-processing, and keeps the cosines of its random pairs; `percentile(score)`
is the share of those at or below the score. `calibrate` finds the threshold that best separates
labelled pairs (highest F1), with its precision and recall; a `Threshold` is saved to JSON and refuses
to be applied to scores made with other settings.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.fingerprint_facts import model_files
from ..core.post import PostProcessor, prepare_post
from ..core.renamed_fields import renamed_field
from ..core.similarity import unit
from ..core.text_files import is_column_name, read_utf8, shown_path
from ..core.texts_given import text_refusal, type_named
from ..core.tokens import by_pair, named_as
from ..errors import InvalidInput, InvalidSpec

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = [
    "Baseline",
    "Threshold",
    "fit_baseline",
    "calibrate",
    "check_threshold_file",
    "best_threshold",
    "load_threshold",
    "read_pairs",
    "reference_sentences",
    "score_settings",
]

_MAX_PAIRS = 20_000
_FORMAT = "bertscope-threshold/1"
# The settings that change a score: a threshold made with other values does not apply.
_KEYS = ("layers", "combine", "pooling", "mask_special", "normalize", "post")
# How a text over the model's limit was read, which moves its score: a threshold file records them (a
# file from before does not, and is checked without them)
_CUT_KEYS = ("long", "stride")
# a float32 cosine may pass 1 (or -1) by a few ulps, and calibrate's lowest cut sits 1e-6 under the
# lowest score: a saved threshold is a cosine within this of [-1, 1]
_CUT_SLACK = 1e-5


def reference_sentences() -> list[str]:
    """The calibration sentences shipped with bertscope (one per line)."""
    text = resources.files("bertscope").joinpath("calibration.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def check_threshold_file(path: Path, *, overwrite: bool = False) -> None:
    """Refuse a threshold file that cannot be written, or one that exists (without `overwrite`)."""
    if not path.parent.exists():
        raise InvalidInput(f"cannot write {path}: the folder {path.parent} does not exist")
    if path.is_dir():
        raise InvalidInput(f"cannot write {path}: it is a folder; give a .json file name")
    if path.exists() and not overwrite:
        raise InvalidInput(f"{path} exists; pass overwrite=True to replace it, or choose another name")


@dataclass
class Baseline:
    """Sorted cosines (pairs,) of random pairs of distinct reference texts, with the settings used."""

    cosines: np.ndarray
    settings: dict[str, Any]

    def percentile(self, scores: float | np.ndarray) -> Any:
        """The share (0..1) of unrelated pairs scoring at or below each score (same shape as scores)."""
        values = np.asarray(scores, dtype=np.float64)
        share = np.searchsorted(self.cosines, values, side="right") / len(self.cosines)
        return float(share) if share.ndim == 0 else share

    def describe(self) -> dict[str, Any]:
        """Pairs (n_pairs), reference texts (n_texts), median and 95th/99th percentile cosines, and the
        settings; counts are n_* as docs/names.md names them."""
        return {
            "n_pairs": len(self.cosines),
            "median": float(np.median(self.cosines)),
            "p95": float(np.quantile(self.cosines, 0.95)),
            "p99": float(np.quantile(self.cosines, 0.99)),
            **self.settings,
        }


def fit_baseline(
    model: Encoder,
    *,
    reference: Sequence[str] | None = None,
    post: PostProcessor | str | Path | None = None,
    seed: int = 0,
    **options: Any,
) -> Baseline:
    """Cosines of up to 20,000 random pairs of distinct reference texts, embedded with `options`."""
    texts = list(dict.fromkeys(reference if reference is not None else reference_sentences()))
    if len(texts) < 3:
        raise InvalidInput(f"the reference corpus has {len(texts)} distinct texts; give at least 3")
    spec = model.spec(**options)
    processor = prepare_post(post, spec.as_dict(), model=model)
    vectors = unit(model.embed(texts, post=processor, **options).vectors)
    left, right = np.triu_indices(len(texts), k=1)
    if len(left) > _MAX_PAIRS:
        pick = np.random.default_rng(seed).choice(len(left), _MAX_PAIRS, replace=False)
        left, right = left[pick], right[pick]
    cosines = np.sort(np.einsum("nd,nd->n", vectors[left], vectors[right]).astype(np.float64))
    settings = {
        "model": model.loaded.source,
        "n_texts": len(texts),  # the reference texts
        **score_settings(spec.as_dict(), processor),
    }
    return Baseline(cosines, settings)


def score_settings(
    spec: dict[str, Any], processor: PostProcessor | None, *, cut: bool = False
) -> dict[str, Any]:
    """The settings that change a score: layers, combine, pooling, mask_special, normalize, post, and with
    `cut` (a threshold's) how long texts were read: long, stride."""
    post = None if processor is None else processor.describe()
    cuts = {k: spec.get(k) for k in _CUT_KEYS} if cut else {}
    return json.loads(json.dumps({**{k: spec.get(k) for k in _KEYS[:-1]}, "post": post, **cuts}))


@dataclass
class Threshold:
    """A cosine threshold (same >= threshold) with how well it separated the calibration pairs."""

    threshold: float
    precision: float
    recall: float
    f1: float
    n_positives: int
    n_negatives: int
    model: str
    settings: dict[str, Any]
    # the model's files (`model_files`): a model is the same whatever path names it (None: a file from
    # before they were recorded, checked by the name alone)
    model_files: str | None = None

    @property
    def positives(self) -> int:
        """Deprecated: `n_positives`."""
        return renamed_field(self.n_positives, owner="Threshold", name="n_positives", old="positives")

    @property
    def negatives(self) -> int:
        """Deprecated: `n_negatives`."""
        return renamed_field(self.n_negatives, owner="Threshold", name="n_negatives", old="negatives")

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-able values."""
        return asdict(self)

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the threshold and its settings as JSON (an existing file only with `overwrite`)."""
        path = Path(path)
        check_threshold_file(path, overwrite=overwrite)
        path.write_text(json.dumps({"format": _FORMAT, **self.to_dict()}, indent=2) + "\n")
        return path

    def check(
        self, model: str, settings: dict[str, Any], *, store: str | None = None, files: str | None = None
    ) -> None:
        """Raise InvalidSpec when scores made by `model` (whose files' digest is `files`, where known)
        with `settings` (those `store` was made with, where given) are not what this was fitted on."""
        # Unit length leaves a cosine as it is: normalize counts only where a post-processor reads it.
        unread = ("normalize",) if settings.get("post") is None and self.settings.get("post") is None else ()
        recorded = [k for k in _CUT_KEYS if k in self.settings and k in settings]
        differ = {
            k: (settings.get(k), self.settings.get(k))
            for k in (*_KEYS, *recorded)
            if k not in unread and settings.get(k) != self.settings.get(k)
        }
        known = files is not None and self.model_files is not None
        if (files != self.model_files) if known else (model != self.model):
            # by their files where both are known: a name is a path, and two paths name one model
            differ["model"] = (
                (model, self.model) if model != self.model else (f"{model} (other files)", model)
            )
        if differ:
            shown = "; ".join(
                f"{k}: {_said(k, got)} here, {_said(k, want)} in the file"
                for k, (got, want) in differ.items()
            )
            if store is not None:  # a store's vectors are made: only the calibration can move to them
                raise InvalidSpec(
                    f"the threshold file was calibrated with other settings than {store} was made with "
                    f"({shown.replace(' here,', ' in the store,')}); calibrate again with the store's model "
                    "and settings, or search a store made with the file's"
                )
            raise InvalidSpec(
                f"the threshold file was calibrated with other settings ({shown}); to apply it, "
                f"{_as_calibrated(differ)}, or calibrate again with the settings used here"
            )


def _said(key: str, value: Any) -> str:
    """A setting's value as a message shows it: a post-processing by its kind and fingerprint (its whole
    record was a Python dict), none for no post, a switch as true or false (not Python's True)."""
    if key == "post":
        if not isinstance(value, dict):
            return "none"
        fingerprint = str(value.get("fingerprint"))[:12]
        return f"{value.get('kind')} to {value.get('dim_out')} dims (fingerprint {fingerprint})"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _as_calibrated(differ: dict[str, tuple[Any, Any]]) -> str:
    """What to pass to score as the file was calibrated, in keyword form (`pooling='mean'`): the command
    line shows each as its flag (`--pooling mean`, `--no-normalize`). Where the model differs, the
    settings go with the file's model: passed to this one they may ask what it lacks (a layer 6 of 2)."""
    steps, keywords = [], []
    for key, (_, want) in differ.items():
        if key == "model":
            continue
        elif key == "post":
            steps.append(
                "pass post= (--post), the file it was calibrated with" if want else "leave post= (--post) out"
            )
        elif key == "mask_special" and not want:
            steps.append("leave mask_special=True (--mask-special) out")
        else:
            keywords.append(f"{key}={want!r}")
    if keywords:
        steps.insert(0, "pass " + " ".join(keywords))
    if "model" in differ:
        want = differ["model"][1]
        # first: the settings go with the file's model (the command line shows model= as -m)
        load = (
            f"load the model it was calibrated with ({want}) by model= (-m): it is another model "
            "than this one"
        )
        return ", and ".join([load, ", ".join(steps)] if steps else [load])
    return ", ".join(steps)


def load_threshold(path: str | Path) -> Threshold:
    """Read a threshold written by `Threshold.save` (`bertscope calibrate -o`)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read the threshold file {path} ({exc.strerror or exc})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:  # not UTF-8, or not JSON
        data = None
    if not isinstance(data, dict) or data.pop("format", None) != _FORMAT:
        raise InvalidInput(f"{path} is not a bertscope threshold file; make one with `bertscope calibrate`")
    for old in ("positives", "negatives"):  # a file from before the counts were named n_*
        if old in data and f"n_{old}" not in data:
            data[f"n_{old}"] = data.pop(old)
    try:
        threshold = Threshold(**data)
    except TypeError:  # fields missing or unknown
        threshold = None
    numbers = ("threshold", "precision", "recall", "f1", "n_positives", "n_negatives")
    if (
        threshold is None
        or not all(
            isinstance(getattr(threshold, name), int | float)
            and not isinstance(getattr(threshold, name), bool)
            for name in numbers
        )
        or not isinstance(threshold.settings, dict)
        or not isinstance(threshold.model, str)
    ):
        raise InvalidInput(
            f"{path} is a damaged threshold file (its fields are not calibrate's); make it again with "
            "`bertscope calibrate`"
        )
    # NaN, 5 or -3 would label every pair the same way, a text with itself "diff"
    cut = threshold.threshold
    if not (math.isfinite(cut) and -1.0 - _CUT_SLACK <= cut <= 1.0 + _CUT_SLACK):
        raise InvalidInput(
            f"{path} is a damaged threshold file (its threshold {cut!r} is no cosine in "
            "[-1, 1]); make it again with `bertscope calibrate`"
        )
    return threshold


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, float, float]:
    """(threshold, precision, recall, f1) of the cut `score >= threshold` with the highest F1.

    Candidate cuts lie halfway between consecutive distinct scores; ties go to the higher threshold.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    if labels.all() or not labels.any():
        only = "same (1)" if labels.any() else "different (0)"
        given = f"all {len(labels)} pairs are" if len(labels) > 1 else "the one pair is"
        raise InvalidInput(f"{given} labelled {only}: a threshold needs pairs of both classes")
    order = np.argsort(-scores, kind="stable")
    ranked, hits = scores[order], labels[order]
    true_pos = np.cumsum(hits)
    predicted = np.arange(1, len(ranked) + 1)
    # A cut can only fall where the next score differs.
    last = np.r_[ranked[1:] != ranked[:-1], True]
    precision = true_pos / predicted
    recall = true_pos / hits.sum()
    # 2tp / (predicted + positives): equal F1s are equal doubles (one rounding of equal fractions), so a
    # tie goes to the higher threshold as said; 2PR/(P+R) rounds twice and split ties by the last bit
    f1 = 2.0 * true_pos / (predicted + hits.sum())
    f1 = np.where(last, f1, -1.0)
    k = int(np.argmax(f1))
    cut = (ranked[k] + ranked[k + 1]) / 2 if k + 1 < len(ranked) else ranked[k] - 1e-6
    return float(cut), float(precision[k]), float(recall[k]), float(f1[k])


def calibrate(
    model: Encoder,
    pairs: Sequence[tuple[str, str, int]],
    *,
    post: PostProcessor | str | Path | None = None,
    **options: Any,
) -> Threshold:
    """The threshold that best separates labelled pairs (text, text, 0/1) by F1, for these settings."""
    pairs = _labelled_rows(pairs)
    for index, pair in enumerate(pairs):
        for column, text in zip(("first", "second"), pair[:2], strict=False):
            # by pair and column: the embedding of one column would name "text 0" of a list never given
            problem = text_refusal(text) if isinstance(text, str) else "is not a string"
            if problem is not None:
                raise InvalidInput(f"pair {index}: the {column} text {problem}; give both texts of the pair")
    given = [label for _, _, label in pairs]
    if not all(not isinstance(label, bool) and label in (0, 1) for label in given):  # 0.5 was read as 0
        bad = next(label for label in given if isinstance(label, bool) or label not in (0, 1))
        raise InvalidInput(f"labels must be 0 (different) or 1 (same), got {bad!r}")
    labels = np.array([int(label) for label in given])
    spec = model.spec(**options)
    processor = prepare_post(post, spec.as_dict(), model=model)
    first, second = [p[0] for p in pairs], [p[1] for p in pairs]
    unique = list(dict.fromkeys([*first, *second]))  # each text through the model once
    with named_as(by_pair(first, second)):  # a refusal names a text by its pair, not "text 6" of `unique`
        vectors = unit(model.embed(unique, post=processor, **options).vectors)
    where = {text: i for i, text in enumerate(unique)}
    left, right = vectors[[where[t] for t in first]], vectors[[where[t] for t in second]]
    scores = np.einsum("nd,nd->n", left, right)
    cut, precision, recall, f1 = best_threshold(scores, labels)
    return Threshold(
        threshold=cut,
        precision=precision,
        recall=recall,
        f1=f1,
        n_positives=int(labels.sum()),
        n_negatives=int(len(labels) - labels.sum()),
        model=model.loaded.source,
        settings=score_settings(spec.as_dict(), processor, cut=True),
        model_files=model_files(model),
    )


def _labelled_rows(pairs: object) -> list[tuple[str, str, int]]:
    """`pairs` as a list of (text, text, 0/1) rows, or one InvalidInput line: a string was iterated as
    its characters, a row of two fields failed to unpack (a ValueError)."""
    rows = "pass a list of (text, text, 0/1) rows"
    if isinstance(pairs, str | bytes) or not isinstance(pairs, Iterable):
        raise InvalidInput(f"pairs is {type_named(pairs)}, not a list of (text, text, 0/1) rows; pass one")
    given = list(pairs)
    if not given:
        raise InvalidInput(f"no labelled pairs given: {rows}")
    for index, row in enumerate(given):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) != 3:
            shown = repr(row) if len(repr(row)) <= 60 else repr(row)[:57] + "..."
            raise InvalidInput(f"pair {index} is {shown}, not a (text, text, 0/1) row; {rows}")
    return given


def read_pairs(path: str | Path) -> list[tuple[str, str, int]]:
    """Labelled pairs from a TSV file: `read_numbered_pairs` without the line numbers."""
    return read_numbered_pairs(path)[0]


def read_numbered_pairs(path: str | Path) -> tuple[list[tuple[str, str, int]], list[int]]:
    """Labelled pairs from a TSV file, text, text, 0/1 per line (1.0 and 0.0 read as 1 and 0), and the
    line number of each pair.

    The first line is a header, skipped, only when it is one beyond doubt: its third field names a label
    column (`label`, `score`, `is_duplicate` ... see `LABEL_COLUMNS`), or it and both text fields read as
    column names (`sentence1<TAB>sentence2<TAB>gold_label`: no spaces, a name of a text column). Any other
    line that is not a labelled pair (a label 'maybe', a missing one: 'n/a', '-', empty; an empty text) is
    refused with its line number, never dropped; a first line that may be a header says how to name its
    label column. A file with no pair is refused naming it; one not UTF-8, at the line of its first bad byte.
    """
    path = Path(path)
    text = read_utf8(path)
    name = shown_path(path)  # <stdin> for -
    rows: list[tuple[str, str, int]] = []
    numbers: list[int] = []
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    for index, (number, line) in enumerate(lines):
        cells = line.split("\t")
        if index == 0 and _is_header(cells):
            continue
        label = _number(cells[2]) if len(cells) == 3 else None
        if label is None or label not in (0.0, 1.0):
            hint = ""
            if index == 0 and len(cells) == 3 and label is None and is_column_name(cells[2]):
                hint = "; if this line is a header, name its third column 'label'"
            raise InvalidInput(f"{name}:{number}: expected text<TAB>text<TAB>0 or 1, got {line[:60]!r}{hint}")
        for column, cell in zip(("first", "second"), cells[:2], strict=True):
            # here, by its line and column: the embedding would say "text 0", of a list the user never saw
            if (problem := text_refusal(cell)) is not None:
                raise InvalidInput(
                    f"{name}:{number}: the {column} text {problem}; give both texts of the pair"
                )
        rows.append((cells[0], cells[1], int(label)))
        numbers.append(number)
    if not rows:
        raise InvalidInput(f"{name} holds no labelled pairs: give lines TEXT<TAB>TEXT<TAB>0/1")
    first, second, labels = zip(*rows, strict=True)
    warn_repeated_pairs(name, list(first), list(second), list(labels), numbers, value="label")
    return rows, numbers


def warn_repeated_pairs(
    name: str, left: list[str], right: list[str], given: Sequence[float], numbers: list[int], *, value: str
) -> None:
    """Warn once of a pairs file's pairs that repeat an earlier line's two texts (in either order), saying
    how many carry another `value` ("gold score" for `eval pairs`, "label" for `calibrate`): each is
    counted as a pair of its own, which weighs it twice; kept, since they are the user's data."""
    first: dict[tuple[str, str], int] = {}
    repeats: list[tuple[int, int]] = []  # (index, index of the line it repeats)
    for i, (a, b) in enumerate(zip(left, right, strict=True)):
        key = (a, b) if a <= b else (b, a)
        if key in first:
            repeats.append((i, first[key]))
        else:
            first[key] = i
    if not repeats:
        return
    shown = ", ".join(f"line {numbers[i]} repeats line {numbers[j]}" for i, j in repeats[:3])
    contradicting = sum(given[i] != given[j] for i, j in repeats)
    other = f"; {contradicting} with another {value}" if contradicting else ""
    warnings.warn(
        f"{name}: {len(repeats)} pair(s) repeat an earlier line's texts ({shown}"
        f"{' ...' if len(repeats) > 3 else ''}{other}); each is scored as a pair of its own: drop the "
        "repeats if they were not meant",
        UserWarning,
        stacklevel=3,
    )


# The third column's name in a header: what pair datasets call their label (a word no label value is).
LABEL_COLUMNS = frozenset(
    {"label", "labels", "score", "scores", "gold", "gold_label", "target", "y", "class", "is_duplicate",
     "is_same", "is_paraphrase", "is_similar", "similarity", "relatedness", "relevance"}
)  # fmt: skip
# A text column's name in a header (with a header's label name in the third): sentence1, text_a, query ...
_TEXT_COLUMN = re.compile(
    r"(?:text|sentence|sent|question|query|document|doc|passage|premise|hypothesis|anchor|positive|"
    r"left|right|first|second)[_ -]?(?:\d|a|b|left|right)?|[sq]\d",
    re.IGNORECASE,
)
_NAME = re.compile(r"[^\W\d][\w.-]*")


def _is_header(cells: list[str]) -> bool:
    """Whether a first line is a header beyond doubt (see `read_pairs`): never a pair a user meant."""
    if len(cells) != 3:
        return False
    label = cells[2].strip()
    if label.lower() in LABEL_COLUMNS:
        return True
    return _NAME.fullmatch(label) is not None and is_column_name(label) and names_text_columns(cells)


def names_text_columns(cells: Sequence[str]) -> bool:
    """Whether a line's two text fields name text columns (`sentence1`, `left` ...), as a header's do."""
    return all(_TEXT_COLUMN.fullmatch(cell.strip()) for cell in cells[:2])


def _number(cell: str) -> float | None:
    """The cell read as a number, or None when it is not one."""
    try:
        return float(cell)
    except ValueError:
        return None
