"""Post-processing that fixes cosine on anisotropic vectors: whitening, all-but-the-top, PCA, standardize.

Each processor is fitted on a corpus's vectors (n, d), applied to any (m, d) vectors, and saved to a small
file that explains itself: a safetensors file (or .npz) holding `mean` (d,) and `matrix` (d, k), with the
kind and every setting as JSON (in the safetensors metadata, or an npz entry `settings`).

    Whitening     (x - mean) @ U S^-1/2, keeping the top k directions: identity covariance on the corpus
    AllButTheTop  x - mean with its projection on the top D principal directions removed (Mu & Viswanath 2018)
    PCA           (x - mean) @ U, keeping the top k directions (a rotation, no rescaling)
    Standardize   (x - mean) / std per dimension, a diagonal matrix: zero mean and unit variance per
                  dimension on the corpus (what tames rogue dimensions without rotating the space)
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import InvalidInput, InvalidSpec
from ._enums import Combine, LongText, Pooling, StrEnum
from .layers import LayerSpec
from .results import SentenceEmbeddings
from .writable import refuse_unwritable

__all__ = [
    "PostKind",
    "PostProcessor",
    "Whitening",
    "AllButTheTop",
    "PCA",
    "Standardize",
    "fit_post",
    "fit_post_on_texts",
    "load_post",
    "as_post",
    "check_post_path",
    "check_post_count",
]

_FORMAT = "bertscope-post/1"
_EPS = 1e-12


class PostKind(StrEnum):
    """The post-processing kinds, as named on the command line and in saved files."""

    WHITENING = "whitening"
    ABTT = "abtt"
    PCA = "pca"
    STANDARDIZE = "standardize"


@dataclass
class PostProcessor:
    """A fitted linear post-processor: `apply` maps (n, d) vectors to (n, k) (or (n, d) for abtt)."""

    mean: np.ndarray
    matrix: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[PostKind]

    @property
    def dim_in(self) -> int:
        """Width of the vectors it takes."""
        return int(self.mean.shape[0])

    @property
    def dim_out(self) -> int:
        """Width of the vectors it gives."""
        return self.dim_in if self.kind is PostKind.ABTT else int(self.matrix.shape[1])

    def apply(self, vectors: np.ndarray, *, check_finite: bool = True) -> np.ndarray:
        """Post-processed float32 vectors (n, k) from vectors (n, d). `check_finite` (scipy's word) refuses
        NaN or infinite vectors in one line; bertscope's own pipeline (`apply_post`, the recipe) turns it
        off, so a non-finite vector comes out non-finite and the store's or the library's check names it
        in its own words (the text's id, what was kept, the --dtype fix), not as the post's fault."""
        x = np.asarray(vectors, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim_in:
            raise InvalidInput(
                f"{self.kind.value} was fitted on {self.dim_in}-wide vectors; got shape {tuple(x.shape)}. "
                "Apply it to vectors of the layer, pooling and combine it was fitted on (see .settings)"
            )
        bad = ~np.isfinite(x) if check_finite else None
        if bad is not None and bad.any():  # as the fit refuses them: a NaN row would come out NaN
            rows = np.flatnonzero(bad.any(axis=1))
            raise InvalidInput(
                f"{self.kind.value} needs finite vectors; NaN or infinite values in {len(rows)} of the "
                f"{len(x)} rows (the first: row {rows[0]}): drop those rows or fix what made them"
            )
        centered = x - self.mean
        if self.kind is PostKind.ABTT:
            out = centered - (centered @ self.matrix) @ self.matrix.T
        else:
            out = centered @ self.matrix
        return out.astype(np.float32)

    __call__ = apply

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the float32 mean and matrix as saved: the same file, the same fingerprint."""
        digest = hashlib.sha256(self.kind.value.encode())
        for array in (self.mean, self.matrix):
            digest.update(np.ascontiguousarray(array, dtype="<f4").tobytes())
        return digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        """The kind, widths, fingerprint and settings, JSON-able, for provenance next to the vectors."""
        widths = {"dim_in": self.dim_in, "dim_out": self.dim_out, "fingerprint": self.fingerprint}
        return json.loads(json.dumps({"kind": self.kind.value, **widths, **self.settings}, default=_plain))

    def check(self, spec: dict[str, Any]) -> None:
        """Raise InvalidSpec if `spec` (an EmbedSpec dict) differs from the one this was fitted on: its
        layers, combine, pooling, mask_special and normalize. The prompt is recorded but not compared: a
        search embeds its query with the model's query prompt (e5's "query: ") and post-processes it with
        the statistics of the passages it is compared to, as asymmetric models are used. long and stride
        are not compared: they change only texts over the limit, and late chunks read windows of the texts
        a post fitted on whole sentences applies to."""
        fitted = self.settings.get("spec")
        if not fitted:
            return
        keys = ("layers", "combine", "pooling", "mask_special", "normalize")
        differ = [
            k
            for k in keys
            if json.dumps(fitted.get(k), default=_plain) != json.dumps(spec.get(k), default=_plain)
        ]
        if differ:
            # keyword words (layers=[6]): the CLI and the service rewrite them into flags and JSON fields
            want = " and ".join(f"{k}={_said(fitted.get(k))}" for k in differ)
            got = " and ".join(f"{k}={_said(spec.get(k))}" for k in differ)
            raise InvalidSpec(
                f"this {self.kind.value} was fitted on {want}, not {got}; embed with those options"
            )

    def save(self, path: str | Path) -> Path:
        """Write mean, matrix and settings to .safetensors or .npz (by the suffix); returns the path."""
        path = Path(path)
        check_post_path(path)
        meta = json.dumps({"format": _FORMAT, "kind": self.kind.value, **self.settings}, default=_plain)
        arrays = {
            "mean": self.mean.astype(np.float32),
            "matrix": np.ascontiguousarray(self.matrix, np.float32),
        }
        if path.suffix == ".npz":
            np.savez(path, settings=np.array(meta), mean=arrays["mean"], matrix=arrays["matrix"])
        else:
            from safetensors.numpy import save_file

            save_file(arrays, str(path), metadata={"bertscope_post": meta})
        return path


class Whitening(PostProcessor):
    """Whitening (Su et al. 2021): centred, rotated to principal axes and scaled to unit variance."""

    kind = PostKind.WHITENING

    @classmethod
    def fit(cls, vectors: np.ndarray, *, dim: int | None = None, **settings: Any) -> Whitening:
        """Fit on (n, d) vectors; `dim` keeps the top k directions (see `_spanned` for the default and the
        limit: never more directions than the centred vectors span)."""
        x, mean, values, axes = _principal(vectors, cls.kind)
        k = _spanned(cls.kind, x, values, dim)
        matrix = axes[:, :k] / np.sqrt(values[:k])
        return cls(mean, matrix, {"dim": k, "n_fit": len(x), **settings})


class AllButTheTop(PostProcessor):
    """All-but-the-top (Mu & Viswanath 2018): remove the mean and the top D principal directions."""

    kind = PostKind.ABTT

    @classmethod
    def fit(cls, vectors: np.ndarray, *, remove: int | None = None, **settings: Any) -> AllButTheTop:
        """Fit on (n, d) vectors; `remove` is D (default d/100 rounded, at least 1, as the paper suggests)."""
        return cls._fit(vectors, remove, "remove", settings)

    @classmethod
    def _fit(
        cls, vectors: np.ndarray, remove: int | None, name: str, settings: dict[str, Any]
    ) -> AllButTheTop:
        """`fit`, its count refused under `name`, the keyword the caller gave it by (`fit_post`'s dim)."""
        _whole(remove, name)
        x, mean, values, axes = _principal(vectors, cls.kind)
        d = x.shape[1]
        count = max(1, round(d / 100)) if remove is None else remove
        most = min(len(x), d) - 1
        if not 0 <= count <= most:
            if remove is None:
                raise InvalidSpec(
                    f"abtt removes {count} directions by default (width {d} / 100), and {len(x)} vectors "
                    f"of width {d} allow 0..{most}: fit on at least {count + 1} texts or give "
                    f"{name}=0..{most}"
                )
            raise InvalidSpec(
                f"{name}={remove} is out of range: abtt removes 0..{most} directions from {len(x)} vectors "
                f"of width {d}"
            )
        rank = _rank(values)
        if count > rank:
            # past the rank, the "top" directions are arbitrary axes of the null space (they change with
            # the rows' order): removing them removes what the data never showed
            count = _abtt_spanned(x, rank, count, remove is None, name)
        return cls(mean, axes[:, :count], {"remove": count, "n_fit": len(x), **settings})


def _abtt_spanned(x: np.ndarray, rank: int, count: int, default: bool, name: str) -> int:
    """abtt's count where `count` passes the `rank` the vectors span: the rank, with a warning, where the
    count is the default (as PCA keeps what the texts span); InvalidSpec where the caller asked it."""
    distinct = _distinct(x, rank)
    too_few_texts = rank >= distinct - 1
    why = _short_of(x, rank, distinct, too_few_texts)
    why = why if too_few_texts else f"they span {rank}: {why}"
    said = f"abtt removes only directions the fitting vectors span, and {why}"
    if default:
        warnings.warn(
            f"abtt removes {rank} directions, not the default {count}: {said}",
            UserWarning,
            stacklevel=4,  # the caller of AllButTheTop.fit / fit_post
        )
        return rank
    raise InvalidSpec(f"{name}={count} is out of range: {said}; give {name}=0..{rank}")


class PCA(PostProcessor):
    """PCA: centred and rotated onto the top k principal directions (no rescaling)."""

    kind = PostKind.PCA

    @classmethod
    def fit(cls, vectors: np.ndarray, *, dim: int | None = None, **settings: Any) -> PCA:
        """Fit on (n, d) vectors; `dim` keeps the top k directions, by whitening's rule (`_spanned`): never
        more than the centred vectors span (n texts span at most n - 1); without dim, all the width, or all
        the vectors span where the rest are constant (with a warning)."""
        x, mean, values, axes = _principal(vectors, cls.kind)
        k = _spanned(cls.kind, x, values, dim)
        explained = float(values[:k].sum() / max(values.sum(), _EPS))
        return cls(mean, axes[:, :k], {"dim": k, "n_fit": len(x), "explained": explained, **settings})


_STANDARDIZE_TAKES_NO_DIM = (
    "standardize keeps every dimension; dim={dim} is not taken: leave dim out, or use pca or "
    "whitening to keep fewer"
)


class Standardize(PostProcessor):
    """Standardisation: each dimension centred and divided by its standard deviation (a z-score), as
    scikit-learn's StandardScaler does, but for a dimension constant on the corpus, which is only centred:
    constant by whitening's rule, a standard deviation under 1e-6 of the widest dimension's (a dead
    LayerNorm output dimension, such as MiniLM's 319, whose noise StandardScaler would blow up to unit
    variance). The rule is relative to the widest dimension, not to each one's own size: features of very
    different units (standard deviations 1e6 apart) should be scaled before, or the narrowest count as
    constant."""

    kind = PostKind.STANDARDIZE

    @classmethod
    def fit(cls, vectors: np.ndarray, *, dim: int | None = None, **settings: Any) -> Standardize:
        """Fit on (n, d) vectors; every dimension is kept, so `dim` must be left out."""
        if dim is not None:
            raise InvalidSpec(_STANDARDIZE_TAKES_NO_DIM.format(dim=dim))
        x = _fitting_vectors(vectors, cls.kind)
        mean, std = x.mean(axis=0), x.std(axis=0)
        constant = ~_varies(std**2)  # whitening's rule for a constant direction (`_varies`)
        if constant.any():
            warnings.warn(
                f"{int(constant.sum())} of the {x.shape[1]} dimensions are constant on the fitting vectors "
                "(their spread under 1e-6 of the widest's, as some LayerNorm output dimensions are): they "
                "are centred, not scaled",
                UserWarning,
                stacklevel=2,
            )
        scale = np.where(constant, 1.0, 1.0 / np.where(constant, 1.0, std))
        return cls(mean, np.diag(scale), {"n_fit": len(x), "constant": int(constant.sum()), **settings})


_KINDS: dict[PostKind, type[PostProcessor]] = {
    PostKind.WHITENING: Whitening,
    PostKind.ABTT: AllButTheTop,
    PostKind.PCA: PCA,
    PostKind.STANDARDIZE: Standardize,
}


def fit_post(
    vectors: np.ndarray, kind: PostKind | str, *, dim: int | None = None, **settings: Any
) -> PostProcessor:
    """Fit a processor of `kind` on (n, d) vectors; `dim` is k for whitening/pca and D for abtt (standardize
    keeps every dimension and takes none)."""
    which = PostKind.parse(kind, what="post-processing kind")
    if which is PostKind.ABTT:
        return AllButTheTop._fit(vectors, dim, "dim", settings)  # D said as dim, the keyword given
    return _KINDS[which].fit(vectors, dim=dim, **settings)  # type: ignore[attr-defined, no-any-return]


def check_post_count(
    kind: PostKind | str, dim: int | None, *, n_texts: int | None = None, n_rows: int | None = None
) -> PostKind:
    """`kind` parsed and `dim` checked as far as they can be before any vector is made (a whole number;
    none for standardize; at least 1, or 0 for abtt; at most what `n_texts` distinct texts span once
    centred, n - 1, which whitening and pca keep and abtt removes): a typo refused before a corpus is
    embedded. `n_rows` is how many texts were given, repeats included (`n_texts` where left out): one
    text repeated gives one vector, whatever the dim, and is refused so."""
    which = PostKind.parse(kind, what="post-processing kind")
    _whole(dim, "dim")
    rows = n_texts if n_rows is None else n_rows
    if n_texts == 1 and rows is not None and rows > 1:  # the cause, not a range of 1..0 to choose from
        raise InvalidInput(f"the {rows} texts give one vector: {_NOTHING[which]}; give texts that differ")
    if dim is None:
        return which
    if which is PostKind.STANDARDIZE:
        raise InvalidSpec(_STANDARDIZE_TAKES_NO_DIM.format(dim=dim))
    least = 0 if which is PostKind.ABTT else 1
    if dim < least:
        verb = "removes 0 or more directions" if least == 0 else "keeps 1 direction or more"
        raise InvalidSpec(f"dim={dim} is out of range: {which.value} {verb}; give dim={least} or more")
    if n_texts is not None and n_texts < 2:  # one text: no count of directions to offer
        raise InvalidInput(f"{which.value} is fitted on 2 texts or more; got {n_texts}: fit on more texts")
    # the width's bound (min(n, d) - 1) needs the vectors: the fit says it
    if n_texts is not None and dim > n_texts - 1:
        raise InvalidSpec(
            f"dim={dim} is out of range: the {n_texts} distinct texts span at most {n_texts - 1} directions "
            f"once centred; give dim={least}..{n_texts - 1} or fit on more texts"
        )
    return which


def as_post(value: PostProcessor | str | Path | None) -> PostProcessor | None:
    """None, a fitted PostProcessor, or the path of a saved one (the form `embed(post=...)` accepts)."""
    if value is None or isinstance(value, PostProcessor):
        return value
    if not isinstance(value, (str, Path)):
        raise InvalidInput(
            f"post={value!r} is no post-processing: give a fitted one (fit_post) or the path of a saved one"
        )
    return load_post(value)


def prepare_post(
    value: PostProcessor | str | Path | None, spec: dict[str, Any], *, model: Any = None
) -> PostProcessor | None:
    """The processor for `post=` (None, a processor or a file), checked against the embedding spec and,
    where it records them and `model` is given, the files of the model it was fitted on: whitening fitted
    on another model's vectors of the same width would apply in silence."""
    processor = as_post(value)
    if processor is not None:
        # the model first: another model's post names settings (a layer) this model may not even have
        fitted = processor.settings.get("model_files")
        if fitted is not None and model is not None:
            from .fingerprint_facts import model_files

            here = model_files(model)
            if here is not None and here != fitted:
                raise InvalidSpec(
                    f"this {processor.kind.value} was fitted on the vectors of "
                    f"{processor.settings.get('model', 'another model')}, not of this model (their files "
                    "differ); fit it on this model's vectors (fit_post_on_texts, bertscope fit-post)"
                )
        processor.check(spec)
    return processor


def apply_post(result: SentenceEmbeddings, processor: PostProcessor | None) -> SentenceEmbeddings:
    """The result with its vectors post-processed and the processor recorded in its spec."""
    if processor is None:
        return result
    # unchecked: a non-finite vector stays so, for the store's or the library's own check to name it
    result.vectors = processor.apply(result.vectors, check_finite=False)
    result.spec = {**result.spec, "post": processor.describe()}
    return result


_SUFFIXES = (".safetensors", ".npz")


def check_post_path(path: Path) -> None:
    """Refuse a file name `PostProcessor.save` cannot write so that `load_post` reads it back."""
    if path.suffix not in _SUFFIXES:  # load_post reads the format from the suffix, lower case
        got = path.suffix or "a name without a suffix"
        raise InvalidInput(
            f"cannot write {path}: a fitted post-processing is saved as .safetensors or .npz, not {got}; "
            "end the name with .safetensors (or .npz)"
        )
    if path.is_dir():
        raise InvalidInput(f"cannot write {path}: it is a folder; give a file name ending in .safetensors")
    if not path.parent.exists():
        raise InvalidInput(f"cannot write {path}: the folder {path.parent} does not exist")
    refuse_unwritable(path, "the post-processing")


def load_post(path: str | Path) -> PostProcessor:
    """Read a processor saved by `PostProcessor.save` (.safetensors or .npz)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"no post-processing file at {path}; make one with `bertscope fit-post`")
    import zipfile

    from safetensors import SafetensorError

    try:
        if path.suffix == ".npz":
            with np.load(path) as data:
                meta, mean, matrix = str(data["settings"]), data["mean"], data["matrix"]
        else:
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy") as handle:
                meta = (handle.metadata() or {})["bertscope_post"]
                mean, matrix = handle.get_tensor("mean"), handle.get_tensor("matrix")
        settings = json.loads(meta)
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile, SafetensorError) as exc:
        raise _not_post(path, str(exc)) from None
    if not isinstance(settings, dict):  # an edited file: "[1, 2]" or "null" has no settings to read
        raise _not_post(path, f"its settings are JSON {_json_kind(settings)}, not an object")
    if settings.pop("format", None) != _FORMAT:
        raise _not_post(path, f"format {_FORMAT} expected")
    recorded = settings.pop("kind", None)
    try:
        kind = PostKind.parse(str(recorded), what="kind")
    except InvalidSpec:
        kinds = ", ".join(k.value for k in PostKind)
        raise _not_post(path, f"its kind is {json.dumps(recorded)}, not one of {kinds}") from None
    if mean.ndim != 1 or matrix.ndim != 2 or matrix.shape[0] != mean.shape[0]:
        shapes = f"{tuple(mean.shape)} and {tuple(matrix.shape)}"
        raise _not_post(path, f"a mean (d,) and a matrix (d, k) expected; it holds {shapes}")
    processor = _KINDS[kind](mean.astype(np.float64), matrix.astype(np.float64), settings)
    if processor.dim_in == 0 or processor.dim_out == 0:
        # An old fit-post wrote one from texts that all gave one vector; applied, it gives empty vectors.
        raise InvalidInput(
            f"{path} is a {kind.value} to 0 dimensions: every vector would come out empty; fit it again "
            "with `bertscope fit-post` on texts that differ"
        )
    why = _not_finite(processor) or _not_its_kind(processor) or _unreadable_spec(settings)
    if why:
        raise _not_post(path, why)
    return processor


def _not_post(path: Path, why: str) -> InvalidInput:
    """The one line for a file load_post cannot read as a post-processing file: what it found, and the fix."""
    return InvalidInput(
        f"{path} is not a bertscope post-processing file ({why}); give the file `bertscope fit-post` wrote, "
        "or fit it again"
    )


def _json_kind(value: Any) -> str:
    """What JSON calls the type of a parsed value: array, null, string, ..."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), "number")


def _not_finite(processor: PostProcessor) -> str | None:
    """Why the arrays cannot be applied (NaN or inf in them), or None: every vector would come out NaN,
    which a check of the model's dtype would later be blamed for."""
    for name, array in (("mean", processor.mean), ("matrix", processor.matrix)):
        bad = int((~np.isfinite(array)).sum())
        if bad:
            return f"its {name} holds {bad} values that are NaN or infinite"
    return None


# The count each kind records, the width of its (d, k) matrix, since the first release: a file whose kind was
# edited lacks it (whitening's matrix read as abtt's would remove, not keep, in silence).
_COUNTS = {PostKind.WHITENING: "dim", PostKind.PCA: "dim", PostKind.ABTT: "remove"}


def _not_its_kind(processor: PostProcessor) -> str | None:
    """Why the arrays are not the recorded kind's, or None: each kind's count is its matrix's width,
    abtt's matrix has orthonormal columns (the directions removed), standardize's is diagonal."""
    kind, matrix = processor.kind, processor.matrix
    key = _COUNTS.get(kind)
    if key is not None:
        count = processor.settings.get(key)
        if isinstance(count, bool) or count != matrix.shape[1]:
            return (
                f"{kind.value} records {key}=, the width of its matrix, {matrix.shape[1]} here; it records "
                f"{key}={count!r}: was its kind edited?"
            )
    if kind is PostKind.ABTT and np.abs(matrix.T @ matrix - np.eye(matrix.shape[1])).max() > 1e-3:
        return "an abtt's matrix holds unit directions, orthogonal; this one does not: was its kind edited?"
    if kind is PostKind.STANDARDIZE and (
        matrix.shape[0] != matrix.shape[1] or np.count_nonzero(matrix - np.diag(np.diagonal(matrix)))
    ):
        return "a standardize's matrix is diagonal, this one is not: was its kind edited?"
    return None


# The settings `PostProcessor.check` compares, what each must be (an EmbedSpec's, as JSON), and its test.
_SPEC_KEYS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "layers": (
        "a list of layer numbers",
        lambda v: isinstance(v, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in v),
    ),
    "combine": ("a name", lambda v: isinstance(v, str)),
    "pooling": ("a name", lambda v: isinstance(v, str)),
    "mask_special": ("true or false", lambda v: isinstance(v, bool)),
    "normalize": ("true, false or null", lambda v: v is None or isinstance(v, bool)),
    "prompt": ("a string", lambda v: isinstance(v, str)),
}


def _unreadable_spec(settings: dict[str, Any]) -> str | None:
    """Why the recorded embedding settings cannot be checked against a caller's, or None. A file without
    them is one fitted on vectors alone (fit_post); one that names its model but lost them was edited."""
    spec = settings.get("spec")
    if spec is None:
        if "model" in settings or "model_files" in settings:
            return (
                "it names the model it was fitted on but not the embedding settings, its spec, which every "
                "use checks: was it edited?"
            )
        return None
    if not isinstance(spec, dict):
        return f"its spec is JSON {_json_kind(spec)}, not an object of embedding settings"
    for key, (what, fits) in _SPEC_KEYS.items():
        # fit_post(spec=...) records what its caller gave: those are checked
        if key in spec and not fits(spec[key]):
            return f"its spec's {key} is {json.dumps(spec[key])}, not {what}"
    return None


# What each kind finds in vectors that are all one vector: nothing (the fit would be arbitrary axes).
_NOTHING = {
    PostKind.WHITENING: "nothing to whiten",
    PostKind.PCA: "no direction to keep",
    PostKind.ABTT: "no direction to remove",
    PostKind.STANDARDIZE: "no variation to scale",
}


def _fitting_vectors(vectors: np.ndarray, kind: PostKind) -> np.ndarray:
    """The fitting vectors as float64 (n, d): two or more, not all one vector, or InvalidInput."""
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise InvalidInput(f"fit_post needs (n, d) vectors, a row per text; got shape {tuple(x.shape)}")
    if len(x) < 2:
        raise InvalidInput(
            f"fit_post needs (n, d) vectors with n >= 2; got {len(x)} (shape {tuple(x.shape)}): "
            "fit on 2 texts or more"
        )
    bad = ~np.isfinite(x)
    if bad.any():  # the SVD fails on them (LinAlgError), or the fit comes out NaN
        rows = np.flatnonzero(bad.any(axis=1))
        raise InvalidInput(
            f"fit_post needs finite vectors; NaN or infinite values in {len(rows)} of the {len(x)} rows (the "
            f"first: row {rows[0]}): drop those rows or fix what made them"
        )
    if _one_vector(x):
        raise InvalidInput(f"the {len(x)} texts give one vector: {_NOTHING[kind]}; give texts that differ")
    return x


def _one_vector(x: np.ndarray) -> bool:
    """Whether every row of (n, d) `x` is one vector, to float32 rounding (as the sweep's NaN cells are,
    research.analysis): the same text embedded in batches of other lengths differs in its last bits, and
    whitening would blow that noise up."""
    scale = max(float(np.abs(x).max()), 1.0)
    return float(np.ptp(x, axis=0).max()) <= 1e-6 * scale  # ptp: no (n, d) temporary


def _principal(vectors: np.ndarray, kind: PostKind) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, mean, variances (desc), axes (d, r)) from the biased (1/n) covariance of x."""
    x = _fitting_vectors(vectors, kind)
    mean = x.mean(axis=0)
    # SVD of the centred data is more accurate than an eigendecomposition of its covariance.
    _, singular, vt = np.linalg.svd(x - mean, full_matrices=False)
    return x, mean, singular**2 / len(x), vt.T


def _spanned(kind: PostKind, x: np.ndarray, values: np.ndarray, dim: int | None) -> int:
    """k for whitening and pca, one rule for both: `dim` (1..min(n, d)), never more directions than the
    centred vectors span. Without dim, every dimension (min(n, d)); where the vectors span fewer because
    some dimensions are constant, those they span, with a warning; where they span fewer because the texts
    are too few, whitening is refused (the wish grows with the texts, so only width + 1 texts surely
    suffice) and PCA keeps those they span, with a warning (it only rotates)."""
    rank = _rank(values)
    if rank == 0:  # `_fitting_vectors` refuses one vector first; a rank of 0 is that, said the same way
        raise InvalidInput(f"the {len(x)} texts give one vector: {_NOTHING[kind]}; give texts that differ")
    verb, fewer = ("whiten", "whiten to fewer") if kind is PostKind.WHITENING else ("keep", "keep fewer")
    # Centring costs one direction: n texts span at most n - 1, so a rank of n - 1 means "too few texts";
    # a repeated text spans nothing new, so the texts are counted once each
    distinct = _distinct(x, rank)
    too_few_texts = rank >= distinct - 1
    texts = _texts(x, distinct)
    k = _keep(dim, x, "dim")
    # PCA keeps what the texts span when they are too few too: it only rotates, where whitening would
    # divide by the missing directions' zero variance
    if dim is None and rank < k and (not too_few_texts or kind is PostKind.PCA):
        why = _short_of(x, rank, distinct, too_few_texts)
        warnings.warn(
            f"{kind.value} to {rank} dimensions, all the fitting vectors span: {why}; "
            "pass dim to choose fewer",
            UserWarning,
            stacklevel=3,  # the caller of Whitening.fit / PCA.fit
        )
        k = rank
    if rank < k and dim is None:
        raise InvalidInput(
            f"{texts} span only {rank} directions (centring costs one), too few to {verb} all "
            f"{x.shape[1]} dimensions; fit on at least {x.shape[1] + 1} {_distinct_said(x, distinct)}texts "
            f"or {fewer} dimensions with dim=1..{rank}"
        )
    if rank < k:
        advice = (
            f"fit on more texts (at least {k + 1}{' distinct' if distinct < len(x) else ''}) or {fewer} "
            f"dimensions with dim=1..{rank}"
            if too_few_texts
            else f"more texts will not help (the rest are constant): {verb} with dim=1..{rank}"
        )
        raise InvalidInput(f"the fitting vectors span fewer than {k} directions (only {rank}); {advice}")
    return k


def _varies(variances: np.ndarray) -> np.ndarray:
    """Which variances (of directions or of dimensions) are not constant: over 1e-12 of the largest, a
    standard deviation over 1e-6 of the largest's. The one rule of every kind, relative to the widest
    spread: a dimension whose spread is a millionth of the widest's (a LayerNorm output dimension whose
    weight is ~0) is noise next to it, which scaling to unit variance would blow up; it is centred, not
    scaled, so features of very different units should be scaled before."""
    return variances > _EPS * max(float(variances.max()), _EPS)  # type: ignore[no-any-return]


def _rank(values: np.ndarray) -> int:
    """How many principal directions (variances `values`) the centred vectors span, by `_varies`."""
    return int(_varies(values).sum())


def _distinct(x: np.ndarray, rank: int) -> int:
    """How many distinct rows (n, d) `x` holds (repeats span nothing new), exact up to `rank` + 1, the
    count at which the texts are what limits the rank; past it, `rank` + 2 (or more) is all a caller needs,
    so a corpus of distinct texts whose rank constant dimensions cap is read only that far, not sorted."""
    if rank >= min(len(x) - 1, x.shape[1]):  # a rank of n - 1: every row differs
        return len(x)
    seen: set[bytes] = set()
    for row in x:
        seen.add(row.tobytes())
        if len(seen) > rank + 1:
            break
    return len(seen)


def _short_of(x: np.ndarray, rank: int, distinct: int, too_few_texts: bool) -> str:
    """Why the fitting vectors span only `rank` directions: too few (distinct) texts, or constant ones."""
    if too_few_texts:
        return f"{_texts(x, distinct)} span {rank} directions (centring costs one)"
    return (
        f"{x.shape[1] - rank} of their {x.shape[1]} directions are constant (as some LayerNorm output "
        "dimensions are)"
    )


def _distinct_said(x: np.ndarray, distinct: int) -> str:
    """ "distinct " where the rows repeat texts (the count asked is of distinct ones), else nothing."""
    return "distinct " if distinct < len(x) else ""


def _texts(x: np.ndarray, distinct: int) -> str:
    """The fitting texts counted as their spread is: "100 texts", or "100 distinct texts (of 500 rows)"."""
    return f"{len(x)} texts" if distinct == len(x) else f"{distinct} distinct texts (of {len(x)} rows)"


def _keep(dim: int | None, x: np.ndarray, name: str) -> int:
    """k asked (all min(n, d) without dim), or InvalidSpec where no fit could keep it; the range said is what
    centred vectors span, min(n - 1, d), which `_spanned` holds a k inside min(n, d) to as well."""
    _whole(dim, name)
    limit = min(x.shape)
    k = limit if dim is None else dim
    if not 1 <= k <= limit:
        most = min(len(x) - 1, x.shape[1])
        raise InvalidSpec(
            f"{name}={dim} is out of range: {len(x)} vectors of width {x.shape[1]} span at most {most} "
            f"directions once centred; give {name}=1..{most}"
        )
    return k


def _whole(count: object, name: str) -> None:
    """Refuse a count of directions that is no whole number (3.5, True, '3'): numpy would slice by it."""
    if count is not None and (isinstance(count, bool) or not isinstance(count, (int, np.integer))):
        raise InvalidInput(f"{name}={count!r} is not a whole number: give the count of directions as an int")


def _said(value: Any) -> str:
    """A setting as a Python caller types it: `[6]` for the layers (a tuple too), `'mean'`, `True`."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_said(item) for item in value) + "]"
    return repr(_plain(value) if isinstance(value, (np.integer, np.floating)) else value)


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    return str(value)


def fit_post_on_texts(
    model: Any,
    texts: list[str],
    kind: PostKind | str,
    *,
    dim: int | None = None,
    layers: LayerSpec | None = None,
    combine: Combine | str = "mean",
    pooling: Pooling | str = "auto",
    mask_special: bool = False,
    normalize: bool | None = None,
    long: LongText | str = "truncate",
    stride: int | None = None,
    prompt_name: str | None = None,
    prompt: str | None = None,
) -> PostProcessor:
    """Embed texts with `model.embed` and these options, fit on the (n, d) vectors; the spec is recorded,
    its prompt included ("" for none). Every text is fitted on, a repeated one as often as it is given (a
    corpus's repeats are its distribution, as `fit_post` on its vectors fits every row); each distinct text
    is embedded once. n_fit counts the rows fitted, n_distinct_texts the distinct texts, which bound the
    directions the rows span."""
    # each distinct text embedded once, its vector then given back at every row that repeats it
    distinct = list(dict.fromkeys(texts))
    which = check_post_count(kind, dim, n_texts=len(distinct), n_rows=len(texts))  # before the embedding
    result = model.embed(
        distinct,
        layers=layers,
        combine=combine,
        pooling=pooling,
        mask_special=mask_special,
        normalize=normalize,
        long=long,
        stride=stride,
        prompt_name=prompt_name,
        prompt=prompt,
    )
    if len(distinct) > 1 and _one_vector(np.asarray(result.vectors, dtype=np.float64)):
        # "give texts that differ" would send the user to texts that already differ: the options are why
        nothing = _NOTHING[which]
        raise InvalidInput(
            f"the {len(distinct)} texts differ but give one vector with layers {list(result.spec['layers'])} "
            f"and pooling {result.spec['pooling']}: {nothing}; choose another layer or pooling"
        )
    from .fingerprint_facts import model_files

    position = {text: row for row, text in enumerate(distinct)}
    vectors = np.asarray(result.vectors)
    if len(distinct) < len(texts):
        vectors = vectors[[position[text] for text in texts]]
    return fit_post(
        vectors,
        kind,
        dim=dim,
        model=model.loaded.source,
        # the prompt recorded even where none was used: what the vectors were, for the reader of the file
        spec={**result.spec, "prompt": result.spec.get("prompt", "")},
        model_files=model_files(model),
        n_distinct_texts=len(distinct),
    )
