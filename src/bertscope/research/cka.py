"""Linear CKA (Kornblith et al. 2019) between every layer of one model, or every layer of A against every
layer of B, streamed over any number of texts.

Both estimators stream: they need only sums over rows, never the n x n Gram matrices. Per layer pair
(X, Y) the sums are n, sum x, sum y, X^T Y (d_a x d_b), and for the debiased one also sum x |y|^2,
sum y |x|^2 and sum |x|^2 |y|^2, from which the Gram-matrix formulas follow exactly:

    linear    CKA = |Cxy|_F^2 / (|Cxx|_F |Cyy|_F), C the centred cross-covariance (Kornblith et al.)
    debiased  HSIC_1 of Song et al. 2012 with linear kernels (the debiased CKA of Nguyen et al. 2021),
              tr(K~L~) = |X^T Y|_F^2 - sum |x|^2|y|^2,  1^T K~ 1 = |sum x|^2 - sum |x|^2,  and
              1^T K~ L~ 1 = sx^T X^T Y sy - sx^T sum x|y|^2 - sy^T sum y|x|^2 + sum |x|^2|y|^2

Memory is the sums: (L_a+1) x d_a x (L_b+1) x d_b float64 (58 MB for the bundled model against
itself, 0.80 GB for a BERT-base), whatever the number of texts: each batch's X^T Y is added into them one
layer of A at a time (a product their size, made whole before adding it, doubled the peak), and one
model's pairs (i, j >= i) once each. Rows are shifted by the first batch's mean before summing (both
estimators are unchanged by a shift; it keeps float64 sums of large-mean BERT vectors exact).
The linear estimator is biased upward when n is not much larger than d (a linear result over fewer than
`FEW_ROWS` x d rows carries a `note` that says so); the debiased one removes that bias but scatters widely
over few rows (a debiased result over fewer than `DEBIASED_FEW_ROWS` rows carries a `note` with the spread).
Rows are counted distinct: 800 rows of two texts repeated are two points, and CKA over them is 1 by
construction, so the refusal and the notes count distinct rows (keyed by their text's pieces and place,
not their floats, which a runtime may vary in a last bit by batch; in-memory arrays by their bytes; up to
the largest count any of them needs, so memory stays bounded).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import tee
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..core._enums import LevelName
from ..core.tokens import Tokens
from ..errors import InvalidInput, InvalidSpec
from .states import layer_blocks, layered, model_given, text_stream, tokens_key

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = [
    "CkaLevel",
    "CkaResult",
    "DEBIASED_FEW_ROWS",
    "FEW_ROWS",
    "MIN_ROWS",
    "cka",
    "cka_note",
    "debiased_given",
    "debiased_note",
    "debiased_spread",
    "few_rows_note",
    "same_vector_note",
    "too_few_rows",
    "paired_rows",
    "Moments",
    "Counted",
    "cka_of_arrays",
]

# Rows each estimator needs: linear (False), debiased (True). Over 2 rows the centred rows lie on one line,
# so linear CKA is 1 for any two layers by construction (3 rows of independent noise still read .995); the
# debiased estimator divides by n (n - 3). One minimum for both: a run one estimator takes, the other takes.
MIN_ROWS = {False: 4, True: 4}
# why, as the refusal says it: the linear estimator's figure is fixed by so few points; the debiased one's
# unbiased HSIC divides by (n - 1)(n - 2)(n - 3) (Song et al. 2012)
_WHY_FOUR = {
    False: "over 2 rows linear CKA is 1 for any two layers",
    True: "its HSIC divides by (n - 1)(n - 2)(n - 3)",
}
# A side of float32 rows that all lie within this (squared, relative to the rows' size) of their mean is one
# vector repeated (CKA is 0/0): 1e-5 of the size, about 80 of float32's last bits, as a runtime varies a
# text's vector by batch. float64 rows take as many of their own last bits (`_SAME_VECTOR_EPS`): rows 1e5
# from the origin and 1 apart are 1e-10 apart relatively, and differ; narrower floats keep float32's bound.
_SAME_VECTOR = 1e-10
_SAME_VECTOR_EPS = float(np.finfo(np.float32).eps)
# Below this many rows per dimension linear CKA reads high (400 rows of 384 dims: .535 linear, .478
# debiased between two layers): the result says so.
FEW_ROWS = 2
# The debiased estimator is unbiased but not steady: between independent layers its chance readings have a
# standard deviation of about sqrt(2 / (n (n - 3))) (Gaussian noise, 50 seeds of 384 dims: .72 at n=4, .17
# at 10, .034 at 40, as the formula gives). Below this many rows two of them exceed 0.1 (n (n - 3) < 800),
# so a reading is not told from chance to a tenth: the result says so, with the spread at its n.
DEBIASED_SPREAD = 0.1
DEBIASED_FEW_ROWS = 30
_FLUSH = 2048  # rows gathered before one matrix product


class CkaLevel(LevelName):
    """The rows CKA compares: every non-pad token, or one mean-pooled vector per text. Named as the corpus
    levels are (`tokens`, as `bertscope.Level.TOKENS`); `token` reads as `tokens`, and `CkaLevel.TOKEN`
    is its old name."""

    TOKENS = "tokens"
    SENTENCE = "sentence"
    TOKEN: ClassVar[CkaLevel]  # the old member name, set below: not a member, so schemas list tokens once


CkaLevel.TOKEN = CkaLevel.TOKENS


@dataclass
class CkaResult:
    """`cka[i][j]`: layer `layers_a[i]` of A against `layers_b[j]` of B (B is A when one model is given);
    `note` says when the rows were too few for the linear estimator to be trusted (else None)."""

    layers_a: list[int]
    layers_b: list[int]
    cka: np.ndarray
    n_rows: int
    settings: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    n_texts: int | None = None  # the texts the rows came from (None: rows given as arrays)

    def __repr__(self) -> str:
        level = self.settings.get("level")
        said = f", note={self.note!r}" if self.note else ""
        return (
            f"CkaResult({len(self.layers_a)} x {len(self.layers_b)} layers, level={level!r}, "
            f"n_rows={self.n_rows}{said})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: layers_a, layers_b, cka (rows: A's layers), n_rows (tokens or texts, by the level)
        and n_texts, how it was measured, and the note on too few rows (null when none)."""
        return {
            "layers_a": self.layers_a,
            "layers_b": self.layers_b,
            "cka": [[_num(v) for v in row] for row in self.cka],
            "n_rows": self.n_rows,
            "n_texts": self.n_texts,
            "settings": self.settings,
            "note": self.note,
        }


def _num(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


class Moments:
    """Running sums over rows of (L_a, d_a) and (L_b, d_b) vectors for CKA of every layer pair.

    `diagonal` keeps only pairs (i, i) (two models of one depth); `same` means B is A (one model).
    """

    def __init__(self, *, same: bool = False, diagonal: bool = False) -> None:
        self.same, self.diagonal = same, diagonal
        self.n = 0
        self._sums: dict[str, np.ndarray] = {}
        self._shift: tuple[np.ndarray, np.ndarray] | None = None
        # per side, the largest float epsilon of the rows given (their last bit, relative): what "the same
        # vector" allows
        self._eps = {"x": 0.0, "y": 0.0}
        # distinct rows, as their keys (or hashes of their bytes), counted up to `_enough` (the most any
        # check needs)
        self._hashes: set[bytes] = set()
        self._enough = 0

    @property
    def distinct(self) -> int:
        """Distinct rows added (A's and B's vectors together, every layer), counted exactly up to the
        largest count a refusal or note needs (past it, that count): repeats give CKA no new point."""
        return len(self._hashes)

    def _count(self, a: np.ndarray, b: np.ndarray | None, keys: Sequence[bytes] | None) -> None:
        width = max(a.shape[-1], 0 if b is None else b.shape[-1])
        self._enough = max(self._enough, MIN_ROWS[True], DEBIASED_FEW_ROWS, FEW_ROWS * width)
        if len(self._hashes) >= self._enough:
            return
        if keys is not None:  # what each row is (its text's pieces, its place): no float's last bit decides
            for key in keys:
                self._hashes.add(key)
                if len(self._hashes) >= self._enough:
                    return
            return
        rows_a = np.ascontiguousarray(a).reshape(len(a), -1)
        rows_b = None if b is None else np.ascontiguousarray(b).reshape(len(b), -1)
        for k in range(len(rows_a)):
            digest = hashlib.blake2b(rows_a[k].tobytes(), digest_size=16)
            if rows_b is not None:
                digest.update(rows_b[k].tobytes())
            self._hashes.add(digest.digest())
            if len(self._hashes) >= self._enough:
                return

    def _add(self, name: str, value: np.ndarray) -> None:
        if name in self._sums:
            self._sums[name] += value
        else:
            self._sums[name] = value.copy()

    def add(self, a: np.ndarray, b: np.ndarray | None = None, *, keys: Sequence[bytes] | None = None) -> None:
        """Add rows: a (n, L_a, d_a) and b (n, L_b, d_b) (b ignored when `same`); `keys`, one a row, say
        which rows are the same (the rows' own bytes where none are given)."""
        self._count(a, None if self.same else b, keys)
        for side, rows in (("x", a), ("y", a if self.same or b is None else b)):
            self._eps[side] = max(self._eps[side], _last_bit(rows))
        if self._shift is None:
            other = a if self.same or b is None else b
            self._shift = (a.mean(axis=0, dtype=np.float64), other.mean(axis=0, dtype=np.float64))
        x = a.astype(np.float64) - self._shift[0]
        y = x if self.same or b is None else b.astype(np.float64) - self._shift[1]
        self.n += len(x)
        nx = self._side("x", x)
        ny = nx if self.same else self._side("y", y)
        self._add("ab", nx.T @ ny)
        self._add("xb", np.tensordot(x, ny, axes=(0, 0)))
        self._add("ya", np.tensordot(y, nx, axes=(0, 0)))
        if self.diagonal:
            self._add("xy", _gram(x, y))
        else:
            self._add_cross(x, y)

    def _add_cross(self, x: np.ndarray, y: np.ndarray) -> None:
        """X^T Y of every layer pair added into the (L_a, d_a, L_b, d_b) sum one layer of A at a time: a
        product the size of the whole sum, made before adding it, doubled the memory (2.7 GB for BERT-base
        against itself, where the sum is 0.8 GB). One model: only pairs (i, j >= i), `matrix` reads the
        others transposed."""
        n, la, da = x.shape
        lb, db = y.shape[1], y.shape[2]
        if "xy" not in self._sums:
            self._sums["xy"] = np.zeros((la, da, lb, db))
        total = self._sums["xy"]
        for i in range(la):
            start = i if self.same else 0
            right = y[:, start:].reshape(n, -1)
            total[i, :, start:] += (x[:, i].T @ right).reshape(da, lb - start, db)

    def _side(self, name: str, z: np.ndarray) -> np.ndarray:
        """Sums of one side's rows alone; returns their squared lengths (n, L)."""
        lengths = np.einsum("nld,nld->nl", z, z)
        self._add(f"s{name}", z.sum(axis=0))
        self._add(f"a{name}", lengths.sum(axis=0))
        self._add(f"q{name}", (lengths**2).sum(axis=0))
        self._add(f"w{name}", np.einsum("nld,nl->ld", z, lengths))
        self._add(f"g{name}", _gram(z, z))
        return lengths

    def matrix(self, *, debiased: bool = False) -> np.ndarray:
        """CKA per layer pair: (L_a, L_b), or (L,) for `diagonal`."""
        debiased = debiased_given(debiased)
        s = self._sums
        if self.n < MIN_ROWS[debiased]:
            raise InvalidInput(too_few_rows(self.n, debiased, "give more texts"))
        for side in ("x",) if self.same else ("x", "y"):
            if len(self.same_vector_layers(side)) == len(s[f"a{side}"]):
                model = "" if self.same else f" of model {'A' if side == 'x' else 'B'}"
                raise InvalidInput(
                    f"all {self.n} rows are the same vector at every layer{model} (the texts are "
                    "identical?): CKA compares how the rows differ; give texts that differ"
                )
        if self.distinct < MIN_ROWS[debiased]:  # 800 rows of two texts: two points, CKA 1 by construction
            raise InvalidInput(
                too_few_rows(self.n, debiased, "give more distinct texts", distinct=self.distinct)
            )
        la, lb = s["sx"].shape[0], s["ay"].shape[0] if not self.same else s["sx"].shape[0]
        self_x = [self._self_hsic("x", i, debiased) for i in range(la)]
        self_y = self_x if self.same else [self._self_hsic("y", j, debiased) for j in range(lb)]
        sy = s["sx"] if self.same else s["sy"]
        ay = s["ax"] if self.same else s["ay"]
        pairs = (
            [(i, i) for i in range(la)] if self.diagonal else [(i, j) for i in range(la) for j in range(lb)]
        )
        out = np.full(len(pairs), np.nan)
        for k, (i, j) in enumerate(pairs):
            if self.same and j < i:  # one model: CKA(j, i) is CKA(i, j), and only j >= i is summed
                continue
            xy = s["xy"][i] if self.diagonal else s["xy"][i, :, j]
            cross = _hsic(
                xy, s["sx"][i], sy[j], s["xb"][i, :, j], s["ya"][j, :, i], s["ab"][i, j],
                s["ax"][i], ay[j], self.n, debiased,
            )  # fmt: skip
            denominator = self_x[i] * self_y[j]
            out[k] = cross / np.sqrt(denominator) if denominator > 0 else np.nan
        # CKA is at most 1 (Cauchy-Schwarz); float error on a layer against itself gave 1.0000000000000868
        out = np.minimum(out, 1.0)
        if self.diagonal:
            return out
        out = out.reshape(la, lb)
        if not self.same:
            return out
        upper = np.triu(np.ones((la, la), dtype=bool))
        return np.where(upper, out, out.T)  # symmetric exactly: each pair computed once

    def same_vector_layers(self, side: str = "x") -> list[int]:
        """The layers of one side ("x": A, "y": B) whose rows are all the same vector: no spread, so their
        CKA is undefined (0/0). Read from the sums: sum |x - mean|^2 = sum |x|^2 - |sum x|^2 / n."""
        s = self._sums
        side = "x" if self.same else side
        total, lengths = s[f"s{side}"], s[f"a{side}"]
        spread = lengths - np.einsum("ld,ld->l", total, total) / self.n
        assert self._shift is not None
        shift = self._shift[0 if side == "x" else 1]  # the rows' size before the shift
        scale = self.n * np.einsum("ld,ld->l", shift, shift) + lengths
        bound = _SAME_VECTOR * min(1.0, self._eps[side] / _SAME_VECTOR_EPS) ** 2
        return np.flatnonzero(spread <= bound * scale).tolist()

    def _self_hsic(self, side: str, i: int, debiased: bool) -> float:
        s = self._sums
        total, weighted, lengths = s[f"s{side}"][i], s[f"w{side}"][i], s[f"a{side}"][i]
        return _hsic(
            s[f"g{side}"][i], total, total, weighted, weighted, s[f"q{side}"][i], lengths, lengths,
            self.n, debiased,
        )  # fmt: skip


def _last_bit(rows: np.ndarray) -> float:
    """The relative size of the rows' last bit: their float type's epsilon (float64's for integers), and
    float32's for wider floats that are all float32 values (a float32 runtime's output widened), whose
    last bits are float32's rounding, not float64's."""
    if not np.issubdtype(rows.dtype, np.floating):
        return float(np.finfo(np.float64).eps)
    if rows.dtype.itemsize > 4:
        with np.errstate(over="ignore", invalid="ignore"):  # past float32's range: not float32 values
            narrow = rows.astype(np.float32)
        if np.array_equal(narrow, rows):
            return float(np.finfo(np.float32).eps)
    return float(np.finfo(rows.dtype).eps)


def _gram(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(L, d_x, d_y) sums of x y^T per layer from (n, L, d) rows, as one batched BLAS product."""
    return np.matmul(x.transpose(1, 2, 0), y.transpose(1, 0, 2))


def _hsic(
    xy: np.ndarray,
    sx: np.ndarray,
    sy: np.ndarray,
    x_b: np.ndarray,
    y_a: np.ndarray,
    ab: float,
    a: float,
    b: float,
    n: int,
    debiased: bool,
) -> float:
    """Linear HSIC from the sums: |Cxy|_F^2 (linear), or Song et al.'s unbiased HSIC_1 (debiased)."""
    if not debiased:
        centred = xy - np.outer(sx, sy) / n
        return float(np.sum(centred**2))
    t1 = np.sum(xy**2) - ab
    t2 = (sx @ sx - a) * (sy @ sy - b)
    t3 = sx @ xy @ sy - sx @ x_b - sy @ y_a + ab
    return float((t1 + t2 / ((n - 1) * (n - 2)) - 2 * t3 / (n - 2)) / (n * (n - 3)))


def cka_of_arrays(a: np.ndarray, b: np.ndarray | None = None, *, debiased: bool = False) -> np.ndarray:
    """CKA of in-memory rows: a (n, L_a, d_a) against b (n, L_b, d_b), or a against itself."""
    debiased = debiased_given(debiased)
    moments = Moments(same=b is None)
    for start in range(0, len(a), _FLUSH):
        moments.add(a[start : start + _FLUSH], None if b is None else b[start : start + _FLUSH])
    return moments.matrix(debiased=debiased)


def paired_rows(
    model: Encoder,
    other: Encoder | None,
    texts: Iterable[str],
    *,
    level: CkaLevel,
    progress: bool | None = None,
    total: int | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray | None, list[bytes]]]:
    """Rows of A and of B for the same texts, about `_FLUSH` rows at a time: (n, L_a, d_a), (n, L_b, d_b),
    and a key a row that is the same for the same text's same token (`_row_keys`).

    Token level needs both tokenizers to give the same pieces (checked text by text). A long text comes
    a few windows at a time (`layer_blocks`), so memory is bounded by them, not by the text.
    """
    keys: list[bytes] = []  # A's rows' keys, made as _aligned reads each of A's blocks
    if other is None:
        side_a = _row_keys(
            _level_rows(layer_blocks(model, texts, progress=progress, total=total), level), keys
        )
        pairs: Iterator[tuple[np.ndarray, np.ndarray | None]] = ((rows, None) for rows, _ in side_a)
    else:
        first, second = tee(texts)
        side_a = _row_keys(
            _level_rows(layer_blocks(model, first, progress=progress, total=total), level), keys
        )
        side_b = _level_rows(layer_blocks(other, second, progress=False), level)
        pairs = _aligned(side_a, side_b, level)
    rows_a: list[np.ndarray] = []
    rows_b: list[np.ndarray] = []
    count = 0
    for a, b in pairs:
        rows_a.append(a)
        if b is not None:
            rows_b.append(b)
        count += len(a)
        if count >= _FLUSH:
            yield (*_joined(rows_a, rows_b), keys[:count])
            del keys[:count]
            rows_a, rows_b, count = [], [], 0
    if rows_a:
        yield (*_joined(rows_a, rows_b), keys[:count])


def _row_keys(
    side: Iterator[tuple[np.ndarray, _Text]], keys: list[bytes]
) -> Iterator[tuple[np.ndarray, _Text]]:
    """`side` as it is, each block's row keys put in `keys`: its text's pieces' digest and the row's place
    in the text (a sentence row: the text's alone). Repeats of a text give the same keys wherever their
    batch ran, where the rows' float bytes may differ in a last bit with the padding around them."""
    current, start, digest = -1, 0, b""
    for rows, (number, tok) in side:
        if number != current:  # a long text's blocks come one after another
            current, start = number, 0
            digest = tokens_key(tok.ids)
        keys.extend(digest + place.to_bytes(4, "little") for place in range(start, start + len(rows)))
        start += len(rows)
        yield rows, (number, tok)


_Block = tuple[int, Tokens, np.ndarray, bool]
_Text = tuple[int, Tokens]


def _level_rows(blocks: Iterator[_Block], level: CkaLevel) -> Iterator[tuple[np.ndarray, _Text]]:
    """(rows (n, L+1, d), (text number, Tokens)) from layer blocks: every token, or each text's mean."""
    total: np.ndarray | None = None
    for number, tok, states, last in blocks:
        if level is CkaLevel.TOKENS:
            yield _rows(states, level), (number, tok)
            continue
        if last and total is None:  # the whole text in one block
            yield _rows(states, level), (number, tok)
            continue
        summed = states.sum(axis=1)
        total = summed if total is None else total + summed
        if last:
            yield (total / len(tok))[None], (number, tok)
            total = None


def _aligned(
    side_a: Iterator[tuple[np.ndarray, _Text]],
    side_b: Iterator[tuple[np.ndarray, _Text]],
    level: CkaLevel,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Rows of A and B paired one to one, whatever blocks each side came in."""
    held_b: list[np.ndarray] = []
    seen: tuple[dict[int, Tokens], dict[int, Tokens]] = ({}, {})
    for rows_a, text_a in side_a:
        _same_pieces(seen, 0, text_a, level)
        while sum(len(r) for r in held_b) < len(rows_a):
            rows_b, text_b = next(side_b)
            held_b.append(rows_b)
            _same_pieces(seen, 1, text_b, level)
        joined_b = np.concatenate(held_b)
        held_b = [joined_b[len(rows_a) :]]
        yield rows_a, joined_b[: len(rows_a)]


def _same_pieces(
    seen: tuple[dict[int, Tokens], dict[int, Tokens]], side: int, text: _Text, level: CkaLevel
) -> None:
    """Refuse a text that the two models tokenize differently (token rows pair one to one)."""
    number, tok = text
    other = seen[1 - side].pop(number, None)  # both sides seen: nothing more to keep of this text
    if other is None:
        seen[side].setdefault(number, tok)
    if level is CkaLevel.TOKENS and other is not None and other.ids != tok.ids:
        raise InvalidInput(
            f"text {number} ({tok.text[:30]!r}) is tokenized differently by model B, so its tokens "
            "cannot be paired; use level='sentence' (one vector per text) or models with one tokenizer"
        )


def _rows(states: np.ndarray, level: CkaLevel) -> np.ndarray:
    """(rows, L+1, d) from one text's (L+1, tokens, d): every token, or their mean (specials included)."""
    if level is CkaLevel.SENTENCE:
        return states.mean(axis=1)[None]
    return states.transpose(1, 0, 2)


def _joined(rows_a: list[np.ndarray], rows_b: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
    return np.concatenate(rows_a), (np.concatenate(rows_b) if rows_b else None)


def cka(
    model: Encoder,
    texts: Iterable[str] | str,
    other: Encoder | None = None,
    *,
    level: CkaLevel | str = CkaLevel.TOKENS,
    debiased: bool = False,
    progress: bool | None = None,
    total: int | None = None,
) -> CkaResult:
    """Linear CKA between every layer of `model` (0 = embedding output .. L), or against every layer of
    `other`; streamed (see the module docstring for the sums kept and their memory)."""
    layered(model, "CKA between layers")
    debiased = debiased_given(debiased)  # before any work: a wrong value fails after it otherwise
    how = CkaLevel.parse(level, what="level")
    texts = text_stream(texts)
    if other is not None:
        model_given(other, "other")
    moments = Moments(same=other is None)
    width = 0
    counted = Counted(texts)
    for a, b, keys in paired_rows(model, other, counted, level=how, progress=progress, total=total):
        moments.add(a, b, keys=keys)
        width = max(a.shape[-1], 0 if b is None else b.shape[-1])
    if counted.n == 0:  # not "CKA over 0 rows ... give more texts": there were none
        raise InvalidInput(f"no texts given: give {MIN_ROWS[debiased]} texts or more")
    if moments.n < MIN_ROWS[debiased]:
        fix = "give more texts" + (
            ", or level='tokens' (every token a row)" if how is CkaLevel.SENTENCE else ""
        )
        raise InvalidInput(too_few_rows(moments.n, debiased, fix))
    matrix = moments.matrix(debiased=debiased)
    second = model if other is None else other
    settings = {
        "model_a": model.loaded.source,
        "model_b": second.loaded.source,
        "level": how.value,
        "estimator": "debiased" if debiased else "linear",
    }
    return CkaResult(
        list(range(model.n_layers + 1)), list(range(second.n_layers + 1)), matrix, moments.n, settings,
        note=cka_note(moments, width, debiased=debiased), n_texts=counted.n,
    )  # fmt: skip


class Counted:
    """`texts` passed through, counted as they are read (`n`): the texts a result was measured on."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = iter(texts)
        self.n = 0

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        text = next(self._texts)
        self.n += 1
        return text


def debiased_given(value: object) -> bool:
    """`debiased` checked: True or False (a numpy bool too), else one line."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InvalidSpec(f"debiased must be True or False, not {value!r}")


def cka_note(moments: Moments, width: int, *, debiased: bool) -> str | None:
    """What a CKA result should say beside its figures (cka's and compare's alike): too few distinct rows
    for the estimator, and layers whose rows are all one vector; None where there is nothing to say."""
    distinct = moments.distinct if moments.distinct < moments.n else None
    few = (
        debiased_note(moments.n, distinct=distinct)
        if debiased
        else few_rows_note(moments.n, width, distinct=distinct)
    )
    notes = [few, same_vector_note(moments)]
    return "; ".join(n for n in notes if n) or None


def _counted(n_rows: int, distinct: int | None) -> str:
    """'800 rows but only 2 distinct' where rows repeat, else '800 rows'."""
    return f"{n_rows} rows" + ("" if distinct is None else f" but only {distinct} distinct")


def too_few_rows(n_rows: int, debiased: bool, fix: str, *, distinct: int | None = None) -> str:
    """The refusal of CKA over fewer than `MIN_ROWS` (distinct) rows, ending in `fix`."""
    rows = f"{n_rows} row(s)" if distinct is None else _counted(n_rows, distinct)
    return (
        f"CKA over {rows}: the {'debiased' if debiased else 'linear'} estimator needs at least "
        f"{MIN_ROWS[debiased]}{'' if distinct is None else ' distinct'} ({_WHY_FOUR[debiased]}); {fix}"
    )


def debiased_spread(n_rows: int) -> float:
    """Two standard deviations of debiased CKA between independent layers over `n_rows` rows (Gaussian
    rows: sqrt(2 / (n (n - 3))) each), at most 1: how far a reading may be from 0 by chance alone."""
    return min(1.0, 2 * math.sqrt(2 / (n_rows * (n_rows - 3)))) if n_rows > 3 else 1.0


def debiased_note(n_rows: int, *, distinct: int | None = None) -> str | None:
    """What to say of debiased CKA over `n_rows` rows (`distinct` of them where rows repeat): None when
    they are `DEBIASED_FEW_ROWS` or more."""
    counted = n_rows if distinct is None else distinct
    if counted >= DEBIASED_FEW_ROWS:
        return None
    return (
        f"debiased CKA over {_counted(n_rows, distinct)}: between unrelated layers it reads within about "
        f"+-{debiased_spread(counted):.2f} of 0 by chance at this count (two standard deviations); "
        f"give more {'distinct ' if distinct is not None else ''}texts ({DEBIASED_FEW_ROWS} rows or more "
        f"bring it within +-{DEBIASED_SPREAD})"
    )


def same_vector_note(moments: Moments, names: tuple[str, str] = ("A", "B")) -> str | None:
    """What to say of layers whose rows are all one vector (their CKA is nan), or None."""
    sides = ("x",) if moments.same else ("x", "y")
    said = [
        f"{'layer' if len(layers) == 1 else 'layers'} {', '.join(map(str, layers))} of {name}"
        for side, name in zip(sides, names, strict=False)
        if (layers := moments.same_vector_layers(side))
    ]
    if not said:
        return None
    return (
        f"{' and '.join(said)}: all {moments.n} rows are the same vector, so CKA with them is undefined (nan)"
    )


def few_rows_note(n_rows: int, width: int, *, distinct: int | None = None) -> str | None:
    """What to say of linear CKA over `n_rows` rows (`distinct` of them where rows repeat) of vectors
    `width` wide: None when they are enough."""
    if (n_rows if distinct is None else distinct) >= FEW_ROWS * width:
        return None
    more = "distinct texts" if distinct is not None else "texts"
    return (
        f"{_counted(n_rows, distinct)} for {width} dimensions: linear CKA reads too high when the rows are "
        f"not many more than the dimensions (here fewer than {FEW_ROWS}x); debiased=True (--debiased) "
        f"corrects it on average but scatters widely over few rows: give more {more}"
    )
