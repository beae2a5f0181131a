"""A static sentence embedder distilled from the model, in model2vec's folder format.

model2vec's own `distill_from_model` does the work: every vocabulary piece (or every word of a given
vocabulary) alone through the model, the mean of [CLS], piece and [SEP] at the last layer, then PCA to
`dim` dimensions and Zipf/SIF weights. What bertscope adds: the loaded model (any family bertscope
loads, bundled default included), the folder checks, and one-line errors. The folder loads with
`model2vec.StaticModel.from_pretrained(folder)`; `encode` is then a lookup and a mean, no forward.

model2vec's `[distill]` extra pins transformers below 5.4, which bertscope's own transformers is not;
its distillation runs on newer ones, so bertscope's `distill` extra installs model2vec and skeletoken
(what `distill_from_model` imports) without that pin.

model2vec's forward loop draws a tqdm bar, which in a log is hundreds of redraws; for the length of the
call its bar is bertscope's own progress (core.progress: a bar on a terminal, a line every few seconds
in a log), as for every other long command.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..core._enums import Precision
from ..core.progress import step_progress
from ..core.renamed import renamed_keyword
from ..core.text_files import read_utf8
from ..errors import BackendUnavailable, InvalidInput, caller_level
from .states import layered

__all__ = [
    "DISTILLED_FILES", "DISTILLED_PRECISIONS", "SOURCE_DIGEST", "check_dim", "check_output",
    "check_precision", "check_sif", "check_vocabulary", "distill", "distillable_width",
    "load_static", "portable_name", "read_vocabulary",
]  # fmt: skip

# What model2vec's save_pretrained writes (model card included), and so what --overwrite may replace:
# a folder holding anything else is not one distill made, and is never emptied.
DISTILLED_FILES = frozenset(
    {"README.md", "config.json", "model.safetensors", "modules.json", "tokenizer.json"}
)

# The precisions a distilled folder's rows are saved in (model2vec's `quantize_to`; float16 its default
# and bertscope's): float32 keeps the rows as computed, float16 halves the folder and moves a row by ~1e-4.
# A storage precision, as embed_corpus(precision=) names it: dtype= is the compute dtype elsewhere.
DISTILLED_PRECISIONS = (Precision.FLOAT16, Precision.FLOAT32)

_INSTALL = "distillation needs model2vec: pip install 'bertscope[distill]' (model2vec and skeletoken)"


def _model2vec() -> Any:
    try:
        import model2vec
        from model2vec.distill import distill_from_model
    except ImportError as exc:
        raise BackendUnavailable(_INSTALL) from exc
    return model2vec, distill_from_model


def read_vocabulary(path: str | Path) -> list[str]:
    """Words to distil, one per line (blank lines skipped)."""
    path = Path(path)
    text = read_utf8(path, "the vocabulary")
    words = [line.strip() for line in text.splitlines() if line.strip()]
    if not words:
        raise InvalidInput(f"the vocabulary {path} holds no words: give one word per line")
    return words


def distill(
    model: Any = None,
    output: str | Path = "static-model",
    *,
    dim: int | None = 256,
    vocabulary: Sequence[str] | None = None,
    sif: float | None = 1e-4,
    precision: Precision | str | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
    dtype: str | None = None,
) -> Path:
    """Distil a model2vec static model from `model` (a loaded Model, a name or folder, None: the bundled
    default) into the folder `output`; returns the folder.

    `dim` is the PCA width (None keeps the model's width), `vocabulary` extra whole words (default:
    the tokenizer's own pieces), `sif` the SIF coefficient of the Zipf weights (None: no weights),
    `precision` the saved rows' ("float16", model2vec's default, or "float32", the rows as computed:
    model2vec's `quantize_to`; `dtype=` its deprecated name); `progress` False shows none (None: a bar on
    a terminal, lines in a log).
    """
    said = renamed_keyword(
        precision, dtype, name="precision", old="dtype", caller="distill",
        meaning="the saved rows' precision (dtype= is the compute dtype elsewhere)",
    )  # fmt: skip
    saved = check_precision(Precision.FLOAT16 if said is None else said)
    folder = Path(output)
    check_output(folder, overwrite=overwrite)
    check_dim(dim)
    check_sif(sif)
    words = None if vocabulary is None else check_vocabulary(vocabulary)
    _, distill_from_model = _model2vec()
    if model is None or isinstance(model, (str, Path)):
        from ..core.encoder import open_encoder

        model = open_encoder(None if model is None else str(model), device="cpu")
    check_dim(dim, width=distillable_width(model))
    if words:
        say_multi_word(words, model.tokenizer.backend)
    with _progress_of_model2vec(progress), _quiet_libraries():
        static = distill_from_model(
            model.hf_model,
            model.loaded.tokenizer,
            vocabulary=words or None,
            device=str(model.device),
            pca_dims=dim,
            sif_coefficient=sif,
            quantize_to=saved.value,
        )
    pieces, width = static.embedding.shape
    if dim is not None and width != dim:
        # model2vec skips the PCA (its log line only) where the pieces are not more than the dimensions:
        # the folder would say apply_pca=dim and hold the model's whole width
        raise InvalidInput(
            f"{_said('dim', dim)} is not below the {pieces} pieces distilled (PCA keeps fewer dimensions "
            f"than pieces); give {_said('dim', pieces - 1)} or less, or a larger vocabulary"
        )
    static.config["tokenizer_name"] = portable_name(str(model.loaded.source))
    # which model's weights, whatever its name here: a local folder's name is its last part alone
    from ..backends.onnx import encoder_digest

    static.config[SOURCE_DIGEST] = encoder_digest(model)
    check_output(folder, overwrite=overwrite)  # again: the folder may have changed while distilling
    for name in DISTILLED_FILES:  # only distill's own files, checked above to be all there is
        (folder / name).unlink(missing_ok=True)
    with _quiet_libraries():
        static.save_pretrained(str(folder))
    return folder


def _said(option: str, value: object) -> str:
    """An option and its value as the caller wrote them: `dim=64` in Python, `--dim 64` on the CLI."""
    return f"{option} {value}" if option.startswith("--") else f"{option}={value!r}"


def check_dim(dim: object, *, width: int | None = None, option: str = "dim", keep_all: str = "None") -> None:
    """Refuse a PCA width that is no whole number of at least 1 (`keep_all`, None in Python and 0 on the
    command line, keeps the model's width) or, with the model's `width`, one wider than it; named as the
    caller spells the option (`dim` or `--dim`)."""
    if dim is None:
        return
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        keep = f"{option} {keep_all}" if option.startswith("--") else f"{option}={keep_all}"
        raise InvalidInput(
            f"{_said(option, dim)}: give a whole number of dimensions, at least 1 "
            f"(or {keep}: the model's width)"
        )
    if width is not None and dim > width:
        raise InvalidInput(
            f"{_said(option, dim)} is wider than the model ({width}); give {_said(option, width)} or less"
        )


def check_precision(precision: object, *, option: str = "precision") -> Precision:
    """The saved rows' precision read as every precision is (`Precision.parse`: FLOAT32 and float32 alike),
    float16 or float32; any other refused before the model loads, named as the caller spells the option
    (`precision` or `--precision`)."""
    try:
        return Precision.parse(precision, what="precision")  # type: ignore[arg-type]
    except ValueError:
        allowed = " or ".join(_said(option, p.value) for p in DISTILLED_PRECISIONS)
        raise InvalidInput(
            f"{_said(option, precision)}: a distilled folder's rows are saved as float16 (the default, half "
            f"the size) or float32 (the rows as computed); give {allowed}"
        ) from None


def check_sif(sif: object) -> None:
    """Refuse a SIF coefficient model2vec refuses (it must be over 0 and under 1), before the model loads:
    its own ValueError said neither the keyword nor None (no weights)."""
    if sif is None:
        return
    if isinstance(sif, (bool, np.bool_)) or not isinstance(sif, (int, float, np.number)) or not 0 < sif < 1:
        raise InvalidInput(
            f"sif={sif!r}: the SIF coefficient of the Zipf weights is a number over 0 and under 1 "
            "(1e-4 by default), or sif=None for no weights"
        )


def distillable_width(model: Any) -> int:
    """The width of the model to distil; a static model (model2vec, rows and no layers) refused first, in
    its own one line: there is no forward to distil from."""
    layered(model, "distillation (every piece through the layers)")
    return int(model.info().hidden_size)


def check_vocabulary(vocabulary: object) -> list[str]:
    """The words to distil as a list, or a one-line refusal: a lone string (it would be distilled letter
    by letter), or an item that is no string or is blank."""
    if isinstance(vocabulary, (str, bytes)) or not isinstance(vocabulary, Iterable):
        example = [vocabulary] if isinstance(vocabulary, str) else ["zebra"]
        raise InvalidInput(
            f"vocabulary={vocabulary!r} is no list of words (a string would be distilled letter by letter): "
            f"give a list of words, e.g. vocabulary={example!r}"
        )
    words = list(vocabulary)
    bad = [w for w in words if not isinstance(w, str) or not w.strip()]
    if bad:
        raise InvalidInput(
            f"vocabulary holds {len(bad)} item(s) that are no word ({bad[:3]!r}): give non-blank strings, "
            "e.g. vocabulary=['covid19', 'mRNA']"
        )
    return words


def say_multi_word(words: Sequence[str], tokenizer: Any) -> None:
    """Warn, in one line naming them, of vocabulary lines the tokenizer reads as several words ("new
    york"): model2vec adds each as one token that matches wherever a text holds it, inside other words
    too ("renew yorker"), where its log line saying so is kept off stderr."""
    normalizer, pre_tokenizer = tokenizer.normalizer, tokenizer.pre_tokenizer
    if pre_tokenizer is None:
        return
    several = [
        word
        for word in words
        if len(pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(word) if normalizer else word)) > 1
    ]
    if several:
        named = ", ".join(map(repr, several[:3])) + (
            f" and {len(several) - 3} more" if len(several) > 3 else ""
        )
        them = "it" if len(several) == 1 else "each"
        warnings.warn(
            f"the vocabulary's {named}: several words to the tokenizer; model2vec adds {them} as one token "
            "that matches wherever a text holds it, inside other words too; give one word a line",
            UserWarning,
            stacklevel=caller_level(),
        )


def check_output(folder: Path, *, overwrite: bool) -> None:
    """Refuse, before distilling, an output distill must not write: a file, a folder without
    `overwrite`, or (even with it) a folder holding anything but an earlier distillation's files."""
    if not folder.parent.exists():
        raise InvalidInput(f"cannot write {folder}: the folder {folder.parent} does not exist")
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InvalidInput(f"{folder} is a file, not a folder: name a new folder with -o (output=)")
    entries = list(folder.iterdir())
    if not entries:
        return
    if not overwrite:
        raise InvalidInput(f"{folder} exists; pass --overwrite (overwrite=True) to replace it")
    others = [e.name for e in entries if e.name not in DISTILLED_FILES or not e.is_file() or e.is_symlink()]
    if others or "config.json" not in {e.name for e in entries}:
        held = (
            ", ".join(sorted(others)[:3]) + (", ..." if len(others) > 3 else "")
            if others
            else "no config.json"
        )
        raise InvalidInput(
            f"{folder} is not a static model distill wrote ({held}), so --overwrite leaves it alone: "
            "name another folder with -o, or remove it yourself"
        )


SOURCE_DIGEST = "bertscope_source_digest"


def portable_name(source: str) -> str:
    """The source model as config.json's `tokenizer_name` records it on any machine: a hub id as it is,
    the bundled default by its hub id, a local folder by its own name (never this machine's path)."""
    from ..core.folder import DEFAULT_MODEL

    if source == DEFAULT_MODEL:
        return "sentence-transformers/all-MiniLM-L6-v2"
    path = Path(source)
    return path.name if path.is_absolute() or path.exists() else source


# The libraries whose log lines distill silences while it runs: model2vec's ("Token 'the' was already in
# the vocabulary.") and skeletoken's ("... Setting it to '[PAD]'.") say what bertscope has checked or
# decided already, on stderr, on every family; errors still pass.
_QUIETED = ("model2vec", "skeletoken")


@contextmanager
def _quiet_libraries() -> Iterator[None]:
    """While it lasts, model2vec's and skeletoken's loggers pass errors only; their levels are put back."""
    import logging

    loggers = [logging.getLogger(name) for name in _QUIETED]
    levels = [one.level for one in loggers]
    for one in loggers:
        one.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for one, level in zip(loggers, levels, strict=True):
            one.setLevel(level)


@contextmanager
def _progress_of_model2vec(progress: bool | None) -> Iterator[None]:
    """While it lasts, model2vec's forward loop reports to `step_progress` instead of drawing tqdm bars."""
    from model2vec.distill import inference

    original = inference.tqdm
    with ExitStack() as opened:

        def bar(*iterable: Any, total: int | None = None, **options: Any) -> Any:
            if iterable:  # a loop wrapped in a bar, which this version does not draw: no bar at all
                return original(*iterable, total=total, disable=True, **options)
            step = opened.enter_context(
                step_progress(total or 0, "distilling", enabled=progress, unit="pieces")
            )
            return _Steps(step)

        inference.tqdm = bar
        try:
            yield
        finally:
            inference.tqdm = original


class _Steps:
    """Stands in for model2vec's tqdm bar: `update(n)` as pieces are encoded."""

    def __init__(self, step: Any) -> None:
        self.update = step

    def close(self) -> None:
        """Closed with the call (model2vec leaves its bar open)."""


def load_static(folder: str | Path) -> Any:
    """A model2vec StaticModel from a folder written by `distill` (or any model2vec folder)."""
    model2vec, _ = _model2vec()
    path = Path(folder)
    if not path.exists():
        raise InvalidInput(f"{path} does not exist: give the folder bertscope distill wrote (-o)")
    if not (path / "config.json").is_file():
        raise InvalidInput(
            f"{path} is not a model2vec folder (no config.json); make one with bertscope distill"
        )
    return model2vec.StaticModel.from_pretrained(str(path))
