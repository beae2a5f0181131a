"""mode="fast": measure the modes this machine can run, keep the fastest within a cosine bound to float32.

The candidates come from the one mode table (modes.py): torch, ONNX Runtime and OpenVINO float32; where the
CPU multiplies bfloat16 natively, torch and OpenVINO bfloat16; where it has VNNI, their int8 (on CUDA: torch
float32, bfloat16, float16), each only when its packages are installed. Each is timed on the calibration
sentences alone, in pairs and in fours (`timing_texts`; median of 3 alternating rounds, after a warm-up); the
fastest whose min cosine to float32, on the calibration sentences and on held-out ones (`heldout_texts`: ONNX
Runtime's int8 is calibrated on the first, so its drift is also read where it was not fitted) and on
`SHORT_TEXTS` (where int8 drifts most, as `verify` reads it), is >= the bound wins, int8 only when >= 1.5x the
fastest float mode in the bound. The measurements are kept in the cache per model (weights' hash, pooling
settings), machine (CPU model, flags, threads) and calibration texts (their digest in the file's name: figures
taken on other texts are never read), so a second load does not measure again, and another bound reuses them;
they are measured again when written by another bertscope version, damaged (`_rows_damage`), implausible,
or when asked (`remeasure`). A load that finds its figures recorded and a runtime chosen opens without torch
(`load_fast_recorded`, shipped texts or the caller's); an install without torch reads the newest figures a
run with torch recorded over the same runtimes (digest.runtimes_key in the name), and refuses without them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from filelock import FileLock

from ..core._enums import Backend, DType, Quantize
from ..core.cpu import cpu_name, cpu_threads, has_native_bf16, has_vnni, machine_key
from ..core.encoder import Encoder
from ..core.finite import non_finite_read
from ..core.loading import TORCH_INSTALL, device_kind
from ..errors import BackendUnavailable, InvalidSpec, ModelLoadError, TruncatedTextsWarning
from . import modes
from .digest import runtimes_key, settings_digest
from .modes import MODES, Way, measure
from .onnx import EXPORT_FORMAT, cache_dir, encoder_digest, writable_folder
from .openvino import IR_FORMAT
from .quantize import GRAPH_FORMAT, SHORT_TEXTS, calibration_or_shipped, heldout_texts
from .runtimes import apply_way

if TYPE_CHECKING:
    import torch

E = TypeVar("E", bound=Encoder)

__all__ = [
    "is_installed",
    "say",
    "COVERS",
    "FAST_FORMAT",
    "graphs_key",
    "INT8_MIN_GAIN",
    "implausibility",
    "libraries_key",
    "Measured",
    "MeasurementNotWritten",
    "candidates",
    "choose",
    "fast_cache_dir",
    "forget_measurements",
    "load_fast",
    "load_fast_recorded",
    "newest_first",
    "read_measured",
    "runtime_embedder",
    "timing_texts",
    "write_measured",
]

# What `cos_min` is measured on, and where it is known not to hold (docs/fast-modes.md, "What the min
# cosine covers"): in info().fast beside the figure.
COVERS = (
    "sentence vectors (the model's own pooling and layer) of the calibration texts, alone and joined in "
    "pairs and fours, of the held-out sentences and of short texts ('No.', 'lol', ...), against torch "
    "float32; not beyond them: runs of one "
    "punctuation mark drift further (int8_static: 0.963 on '-'*80, measured on one CPU), and so do token "
    "vectors and earlier layers"
)
# 3: min cosines over the held-out sentences too; the static int8 way; 4: timing_texts; 5: SHORT_TEXTS
FAST_FORMAT = 5
_REPEATS = 3
# Rows each mode is timed on. The 50 calibration sentences alone (15.5 tokens on average) took tens of
# milliseconds a way, so a burst of other load decided near ties: torch and OpenVINO bfloat16 measured
# level there while OpenVINO ran 1.15-1.3x torch on 300 news sentences (28.6 tokens).
_TIMED_ROWS = 400
# int8 is offered only where it is at least this much faster than the best float mode in the bound.
INT8_MIN_GAIN = 1.5
# A ratio beyond this either way says the measurement was disturbed: measure again. Not 20: a small model's
# torch is overhead-bound, and OpenVINO ran a 2-layer BERT 18.6-34.4x torch float32 on an idle machine.
_MAX_RATIO = 100.0
_FLOAT32 = "torch float32"


class MeasurementNotWritten(ModelLoadError):
    """The measurements could not be written (a full or failing disk): it says nothing of the model."""


@dataclass
class Measured:
    """One mode's speed on the calibration sentences, its drift on them, the held-out ones and SHORT_TEXTS."""

    mode: str
    options: dict[str, Any]
    texts_per_s: float
    vs_float32: float
    cos_min: float
    cos_mean: float
    max_abs: float = 0.0


def fast_cache_dir() -> Path:
    """Where the measurements are kept, beside the exports ($BERTSCOPE_CACHE/fast)."""
    return cache_dir().parent / "fast"


def is_installed(*modules: str) -> bool:
    """Whether every module named can be imported (found, not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in modules)


def candidates(device: torch.device | str) -> dict[str, Way]:
    """Label -> way, for the modes this machine and these packages can run (and that are worth running).

    bfloat16 needs the CPU's native bfloat16 (elsewhere it is float32 with conversions); int8 needs VNNI
    (elsewhere its int8 dot products take three AVX2 instructions each and lose to float32: measured on
    a 2-core Zen 3, see bench/BENCHMARKS.md).
    """
    found: dict[str, Way] = {}
    for way in MODES.values():
        if device_kind(device) == "cuda":
            if way.cuda:
                found[way.label] = way
            continue
        if way.precision == "float16" or not is_installed(*way.needs):
            continue
        if (way.native == "bf16" and not has_native_bf16()) or (way.native == "vnni" and not has_vnni()):
            continue
        found[way.label] = way
    return found


def choose(measured: Sequence[Measured], min_cosine: float) -> Measured:
    """The fastest mode whose min cosine to float32 is >= `min_cosine` (torch float32 always qualifies).

    int8 must also earn its drift: it is chosen only when >= `INT8_MIN_GAIN` x the fastest float mode
    within the same bound, else that float mode wins.
    """
    allowed = [m for m in measured if m.mode == _FLOAT32 or m.cos_min >= min_cosine]
    floats = [m for m in allowed if "int8" not in m.mode]
    best_float = max(floats, key=lambda m: m.texts_per_s)
    earned = [
        m for m in allowed if "int8" in m.mode and m.texts_per_s >= INT8_MIN_GAIN * best_float.texts_per_s
    ]
    return max([best_float, *earned], key=lambda m: m.texts_per_s)


def load_fast(
    asked: dict[str, Any],
    *,
    device: torch.device,
    min_cosine: float,
    calibration: Sequence[str] | None,
    remeasure: bool = False,
    build: Callable[[torch.dtype], E],
) -> E:
    """The model `build` makes, in the fastest mode within `min_cosine`, measured once per model and machine.

    `build(dtype)` opens a fresh torch encoder of the model at that dtype (the facade passes its own, so
    the answer is a `Model`). Measured again when asked (`remeasure`), when the cache was written by
    another bertscope version, or when its figures are implausible (see `plausible`).
    """
    _check_asked(asked, min_cosine)
    # The shipped texts stand in for none given in the measurement and its cache name; the ways chosen
    # get the caller's own (None), so a model fitted on the shipped texts records no digest of its own.
    texts = calibration_or_shipped(calibration)
    import torch

    base = build(torch.float32)
    wanted = candidates(device)
    path = _cache_path(base, texts, wanted)
    # Read before asking for a writable folder or its lock: a read-only cache that holds the figures is
    # enough; only a measurement to write needs the folder (load_fast_recorded reads alike).
    record = None if remeasure else _read_record(path, quiet=True)  # said below where measured again
    if record is None or set(wanted) - {m.mode for m in record[0]}:
        record = _measured_now(base, wanted, texts, build, calibration, path, remeasure=remeasure)
    measured, implausible = record
    if implausible is not None:  # recorded so that every load and replica runs float32 alike
        say(f"fast mode: the figures in {path} were implausible twice ({implausible}); running torch "
            "float32 (remeasure=True measures again)")  # fmt: skip
        return _chosen(base, next(m for m in measured if m.mode == _FLOAT32), min_cosine, path)
    best = choose([m for m in measured if m.mode in wanted], min_cosine)
    if best.mode == _FLOAT32:
        say(f"fast mode: nothing on this machine beats torch float32 with min cosine >= {min_cosine}; "
             "running float32")  # fmt: skip
        model = base
    else:
        say(_choice_line(best))
        model = apply_way(base, best.options, build=build, calibration=calibration)
    return _chosen(model, best, min_cosine, path)


def _measured_now(
    base: E,
    wanted: dict[str, Way],
    texts: Sequence[str],
    build: Callable[[torch.dtype], E],
    calibration: Sequence[str] | None,
    path: Path,
    *,
    remeasure: bool,
) -> tuple[list[Measured], str | None]:
    """The record at `path` (figures, and why they are implausible or None) read under its lock where
    another process wrote it meanwhile, else measured and written, so every later load and every replica
    reads and chooses the same: figures implausible at first are measured again, and where they are
    implausible twice they are written flagged so (every reader then runs torch float32, until
    `remeasure`), replacing any older record."""
    writable_folder(path.parent)
    # Replicas started at once (a server's workers) measure once and read the same figures, so they all
    # choose the same mode: two measurements could choose two modes, whose vectors differ.
    with FileLock(f"{path}.lock"):
        record = None if remeasure else _read_record(path)
        if record is not None and not set(wanted) - {m.mode for m in record[0]}:
            return record
        say(f"fast mode: measuring {len(wanted)} modes on {len(texts)} sentences, once for this model "
             f"and machine ({cpu_name()}, {cpu_threads()} threads)")  # fmt: skip
        measured = _measure_all(base, wanted, texts, build, calibration)
        if (why := implausibility(measured)) is not None:
            say(f"fast mode: the figures just measured are implausible ({why}); measuring again")
            measured = _measure_all(base, wanted, texts, build, calibration)
        why = implausibility(measured)
        write_measured(path, measured, implausible=why)
        return measured, why


def load_fast_recorded(
    base: E, asked: dict[str, Any], *, min_cosine: float, calibration: Sequence[str] | None = None
) -> E | None:
    """`base` (opened light: float32 on the CPU, no torch) switched to the mode `load_fast` would choose
    with the same `calibration` texts (None: the shipped ones), read from its recorded measurement, with
    the same settings and line on stderr; None where `load_fast` must run instead: no measurement recorded
    for this model, machine, installed versions and calibration texts (the file's name carries their
    digest, so one made on other texts is never read), a stale or implausible one, or a torch mode chosen
    (it needs the module, or other torch weights). Nothing is measured or written here; an int8 way's
    graph fitted on `calibration` is read from the cache (made, with torch, where it is not there).
    Where torch is not installed, the newest measurement a run with torch made for this model, machine,
    calibration texts and the runtimes installed now decides (the name's torch stamp aside); with none, or
    a torch mode chosen, a one-line BackendUnavailable (nothing can be measured)."""
    _check_asked(asked, min_cosine)
    wanted = candidates("cpu")
    texts = calibration_or_shipped(calibration)
    torchless = not is_installed("torch")
    if torchless:  # the newest measurement a run with torch made, over the runtimes installed now
        found = next(_measured_with_torch(base, texts, wanted), None)
    else:
        path = _cache_path(base, texts, wanted)
        measured = read_measured(path, quiet=True)  # load_fast says why it measures again
        found = None if measured is None or set(wanted) - {m.mode for m in measured} else (path, measured)
    if found is None:
        if torchless:
            raise _without_torch(
                "no run with torch recorded which way is fastest within the bound for this model, "
                "calibration texts and machine with the runtimes installed now"
            )
        return None
    path, measured = found
    best = choose([m for m in measured if m.mode in wanted], min_cosine)
    if best.options.get("backend") not in (Backend.ONNXRUNTIME.value, Backend.OPENVINO.value):
        if torchless:
            raise _without_torch(
                f"the fastest way within min cosine {min_cosine} that a run with torch measured is "
                f"{best.mode}, which runs on torch"
            )
        return None
    say(_choice_line(best))
    model = apply_way(base, best.options, build=_no_build, calibration=calibration)
    return _chosen(model, best, min_cosine, path)


def _measured_with_torch(
    base: Any, texts: Sequence[str], wanted: dict[str, Way]
) -> Iterator[tuple[Path, list[Measured]]]:
    """This model's usable measurements on this machine over the runtimes installed now, whatever torch
    and transformers they were taken with (`_cache_path`'s names), newest first: what an install without
    torch reads (the exports were proven against torch when they were made)."""
    for path in newest_first(_cache_path(base, texts, wanted, libraries=f"*{_nncf_part(wanted)}").name):
        measured = read_measured(path, quiet=True)
        if measured is not None and not set(wanted) - {m.mode for m in measured}:
            yield path, measured


def newest_first(pattern: str) -> list[Path]:
    """The measurement files matching `pattern` (a glob of names in the cache), newest first."""
    return sorted(fast_cache_dir().glob(pattern), key=lambda path: path.stat().st_mtime_ns, reverse=True)


def _without_torch(reason: str) -> BackendUnavailable:
    """The one line refusing mode='fast' where torch is not installed, nothing measured or announced."""
    return BackendUnavailable(
        f"mode='fast' is measured against torch, which is not installed here, and {reason}: drop "
        "mode='fast' and load with backend='onnxruntime' to run the cached ONNX export without torch, or "
        f"{TORCH_INSTALL}"
    )


def _choice_line(best: Measured) -> str:
    """The stderr line that says which way mode='fast' runs, measured now or read from the record."""
    return f"fast mode: {best.mode}, {best.vs_float32:.2f}x torch float32, min cosine {best.cos_min:.5f}"


def _no_build(dtype: Any) -> Any:
    raise AssertionError("a runtime's way needs no other torch weights")  # apply_way calls it for torch only


def _check_asked(asked: dict[str, Any], min_cosine: float) -> None:
    """Refuse options mode='fast' chooses itself, and a bound outside (0, 1]."""
    if (
        not DType.is_float32(asked["dtype"])
        or Backend.parse(asked["backend"], what="backend") is not Backend.AUTO
        or Quantize.parse(asked["quantize"] or Quantize.NONE, what="quantize") is not Quantize.NONE
    ):
        raise InvalidSpec(
            "mode='fast' picks the backend, dtype and quantize itself; leave them out, or drop mode='fast'"
        )
    if isinstance(min_cosine, bool) or not isinstance(min_cosine, int | float) or not 0.0 < min_cosine <= 1.0:
        raise InvalidSpec(f"fast_min_cosine={min_cosine!r}: give a number in (0, 1], such as 0.99")


def _chosen(model: E, best: Measured, min_cosine: float, path: Path) -> E:
    """`model` marked as mode='fast' chose it: `best` within `min_cosine`, measured in `path`."""
    model.mode = "fast"
    model.fast_choice = {
        "chosen": best.mode,
        "min_cosine": min_cosine,
        "cos_min": round(best.cos_min, 6),
        "vs_float32": round(best.vs_float32, 3),
        "measured": str(path),
        "covers": COVERS,
    }
    return model


def graphs_key() -> str:
    """The formats of every graph a way runs (the ONNX export, the int8 graphs, OpenVINO's int8 IR): in the
    name of each measurement file, so figures measured on an earlier graph are measured again."""
    return f"e{EXPORT_FORMAT}g{GRAPH_FORMAT}i{IR_FORMAT}"


def _cache_path(
    base: Any, texts: Sequence[str], wanted: dict[str, Way], *, libraries: str | None = None
) -> Path:
    """The measurement file: per model, its pooling settings (sentence-transformers' files: the min cosine
    is read on its sentence vectors), machine, installed libraries (`libraries_key`; `libraries` in its
    place: a glob pattern), calibration texts and the limits the texts ran under (tokens per text, tokens
    per forward: both change what int8's scales see). The runtimes' key (digest.runtimes_key) follows the
    libraries' so that an install without torch finds the figures a run with torch kept."""
    calib = hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()[:10]
    limits = f"t{base.max_tokens}b{base.engine.token_budget}r{base.engine.min_rows}"
    pooling = settings_digest(getattr(base.loaded, "path", None))
    key = f"{libraries_key(wanted) if libraries is None else libraries}-r{runtimes_key()}"
    name = (
        f"{base.family.name}-{encoder_digest(base)}-s{pooling}-{machine_key()}-{key}-c{calib}"
        f"-{limits}-f{FAST_FORMAT}-{graphs_key()}.json"
    )
    return fast_cache_dir() / name


def libraries_key(wanted: dict[str, Way]) -> str:
    """The exact default's key of the installed torch, transformers and runtimes (an upgrade changes a
    way's kernels, so its drift and speed are measured again), with NNCF's version where a candidate is
    made by it (OpenVINO's int8)."""
    return modes.installed_key() + _nncf_part(wanted)


def _nncf_part(wanted: dict[str, Way]) -> str:
    """NNCF's version where a candidate is made by it (`n2.x`, `n-` where it is missing), else ''."""
    if not any("nncf" in way.needs for way in wanted.values()):
        return ""
    from importlib import metadata

    try:
        return f"n{metadata.version('nncf')}"
    except metadata.PackageNotFoundError:
        return "n-"


def implausibility(measured: Sequence[Measured]) -> str | None:
    """What makes figures untrustworthy, or None: torch float32 not at 1.0x, a speed not finite and
    positive, or a ratio past `_MAX_RATIO` either way (a measurement taken while something else held the
    CPU). The one rule a load applies to what it reads and to what it writes."""
    if not any(m.mode == _FLOAT32 and abs(m.vs_float32 - 1.0) < 1e-6 for m in measured):
        return f"no {_FLOAT32} row at 1.0x"
    for m in measured:
        if not (np.isfinite(m.texts_per_s) and m.texts_per_s > 0):
            return f"{m.mode} at {m.texts_per_s} texts/s"
        if not 1 / _MAX_RATIO <= m.vs_float32 <= _MAX_RATIO:
            return f"{m.mode} at {m.vs_float32:.3g}x {_FLOAT32}, past {_MAX_RATIO:g}x either way"
    return None


def read_measured(
    path: Path, *, check_plausible: bool = True, quiet: bool = False, chooser: str = "fast mode"
) -> list[Measured] | None:
    """The cached measurements, or None when missing, unreadable, damaged (a row not `Measured`'s fields
    and types), from another version or (with `check_plausible`) implausible (said on stderr, unless
    `quiet`, as `chooser`'s: the choice the figures are read for, "exact default" for its own); figures
    recorded as implausible twice give their torch float32 row alone (with `check_plausible`): the way
    mode="fast" runs on them."""
    record = _read_record(path, check_plausible=check_plausible, quiet=quiet, chooser=chooser)
    if record is None:
        return None
    measured, implausible = record
    return measured if implausible is None else [m for m in measured if m.mode == _FLOAT32]


def _read_record(
    path: Path, *, check_plausible: bool = True, quiet: bool = False, chooser: str = "fast mode"
) -> tuple[list[Measured], str | None] | None:
    """`read_measured`'s figures, all of them, and why they were implausible twice where the file records
    that (`write_measured`'s `implausible`; with `check_plausible`, else None): such figures are read, not
    measured again, so that every load runs torch float32 on them until `remeasure`."""
    data: Any = None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        damage = None
    except FileNotFoundError:
        return None
    except OSError as exc:
        damage = f"unreadable: {exc.strerror or exc}"
    except ValueError:
        damage = "not JSON"
    if damage is None:
        damage = _rows_damage(data.get("measured") if isinstance(data, dict) else None)
    if damage is None and not isinstance(data.get("implausible", ""), str):
        damage = f"implausible is {data['implausible']!r}, not a reason"
    if damage is not None:
        if not quiet:
            say(f"{chooser}: the measurements in {path} cannot be used ({damage}); measuring again")
        return None
    measured = [Measured(**row) for row in data["measured"]]
    # What the file holds decides, never the reader's own files: every process sharing the cache must take
    # the same figures as valid, or one run from a newer copy of this version (a clone, an edited
    # __init__.py) measures again and rewrites them under the processes already running.
    flagged = data.get("implausible") if check_plausible else None
    why = None
    if data.get("bertscope") != _version():
        why = f"stale: written by bertscope {data.get('bertscope')}, this is {_version()}"
    elif flagged is None and check_plausible and (wrong := implausibility(measured)) is not None:
        why = f"implausible: {wrong}"
    elif flagged is not None and not any(m.mode == _FLOAT32 for m in measured):
        why = f"implausible ({flagged}) with no {_FLOAT32} row to run"
    if why is not None:
        if not quiet:
            say(f"{chooser}: the measurements in {path} are {why}; measuring again")
        return None
    return measured, flagged


# A cosine read in float32 may pass 1 by a rounding: torch float32 against itself can record 1.0000001.
_COSINE_SLACK = 1e-5


def _rows_damage(rows: Any) -> str | None:
    """What makes `rows` no list of `Measured` as `_measure_all` writes them, or None: each row's fields,
    their JSON types, finite speeds, cosines in [-1, 1] (NaN kept: a way whose vectors went NaN, never
    chosen) and a gap >= 0 (inf kept: exact's ways that did not apply)."""
    if not isinstance(rows, list):
        return "no list of measurements"
    names = {f.name: f for f in fields(Measured)}
    needed = {name for name, f in names.items() if f.default is MISSING}
    for number, row in enumerate(rows):
        if not isinstance(row, dict) or needed - set(row) or set(row) - set(names):
            return f"row {number} does not hold {', '.join(names)}"
        for name, value in row.items():
            if not _of_type(value, str(names[name].type)):
                return f"row {number}: {name} is {value!r}, not {names[name].type}"
        if not all(_finite(row[name]) for name in ("texts_per_s", "vs_float32")):
            return f"row {number}: a speed is not finite"
        if any(abs(row[name]) > 1 + _COSINE_SLACK for name in ("cos_min", "cos_mean")):
            return f"row {number}: a cosine is outside [-1, 1]"
        if row.get("max_abs", 0.0) < 0:
            return f"row {number}: max_abs is negative"
    return None


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # a JSON integer past float's range
        return False


def _of_type(value: Any, annotation: str) -> bool:
    """Whether a JSON `value` is of a `Measured` field's `annotation` (a bool is no number)."""
    if annotation == "str":
        return isinstance(value, str)
    if annotation.startswith("dict[str"):
        return isinstance(value, dict) and all(isinstance(key, str) for key in value)
    if annotation == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    raise AssertionError(f"Measured has a field of type {annotation}: teach _of_type to read it")


def write_measured(path: Path, measured: Sequence[Measured], *, implausible: str | None = None) -> None:
    """Keep the measurements (atomically), with the CPU, threads and bertscope version they hold for, and
    why they are `implausible` where they were so twice (read back as: run torch float32)."""
    writable_folder(path.parent)
    about: dict[str, Any] = {
        "cpu": cpu_name(),
        "threads": cpu_threads(),
        "bertscope": _version(),
        "measured": [asdict(m) for m in measured],
    }
    if implausible is not None:
        about["implausible"] = implausible
    staged = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        staged.write_text(json.dumps(about, indent=1), encoding="utf-8")
        os.replace(staged, path)
    except OSError as exc:  # a full or failing disk: no half-written file left behind, the folder named
        staged.unlink(missing_ok=True)
        raise MeasurementNotWritten(
            f"the measurements could not be written to {path.parent} ({exc.strerror or exc}); free space "
            "there, or set BERTSCOPE_CACHE to another folder, then load again"
        ) from None


def forget_measurements() -> int:
    """Delete this machine's cached measurements (every model): the next load measures again."""
    gone = 0
    for path in fast_cache_dir().glob(f"*-{machine_key()}-*.json"):
        path.unlink(missing_ok=True)
        gone += 1
    return gone


def _version() -> str:
    from ..core.version import __version__

    return str(__version__)


def runtime_embedder(model: Any, runner: Any) -> Callable[[list[str]], np.ndarray]:
    """Embed with `model` on `runner` (None: torch), switching its engine to it for each call."""

    def embed(texts: list[str]) -> np.ndarray:
        model.engine.runner = runner
        with non_finite_read():  # a runtime's NaN is its drift (cos nan: never within a bound)
            return np.asarray(model.embed(texts, progress=False).vectors)

    return embed


def timing_texts(texts: Sequence[str], rows: int = _TIMED_ROWS) -> list[str]:
    """The rows each mode is timed on: `texts` alone, joined in pairs and in fours (sentence and short
    passage lengths, not only the calibration sentences' own), repeated to `rows` rows."""
    made = [
        *texts,
        *(" ".join(texts[i : i + 2]) for i in range(0, len(texts), 2)),
        *(" ".join(texts[i : i + 4]) for i in range(0, len(texts), 4)),
    ]
    return (made * -(-rows // len(made)))[:rows]


def _measure_all(
    base: E,
    wanted: dict[str, Way],
    texts: Sequence[str],
    build: Callable[[torch.dtype], E],
    calibration: Sequence[str] | None,
) -> list[Measured]:
    """Every candidate timed on `timing_texts(texts)` (alternating rounds) and compared with torch float32's
    vectors there, on the held-out sentences and on `SHORT_TEXTS`; int8 fitted on `calibration` (None: the
    shipped texts)."""
    ways = {}
    for label, way in wanted.items():
        model = base
        if label != _FLOAT32:  # int8 fitted on the caller's calibration: a cut there is theirs, said
            model = apply_way(base, way.options, build=build, calibration=calibration)
        ways[label] = runtime_embedder(model, model.engine.runner)
        base.use_torch()
    with warnings.catch_warnings():
        # its own timing texts (the calibration sentences joined in fours) may run past the model's limit:
        # not the user's cut, as in the exact default's measurement
        warnings.simplefilter("ignore", TruncatedTextsWarning)
        timed = measure(ways, timing_texts(texts), rounds=_REPEATS)
        held = measure(ways, [*heldout_texts(), *SHORT_TEXTS], rounds=0)  # drift only: one untimed pass
    reference_speed, reference = timed[_FLOAT32]
    results = []
    for label, (speed, vectors) in timed.items():
        cos = np.concatenate([
            (_unit(vectors) * _unit(reference)).sum(axis=1),
            (_unit(held[label][1]) * _unit(held[_FLOAT32][1])).sum(axis=1),
        ])  # fmt: skip
        # the largest |difference| to float32's vectors over the same texts (modes.compare_modes' max_abs)
        gap = max(np.abs(vectors - reference).max(), np.abs(held[label][1] - held[_FLOAT32][1]).max())
        results.append(
            Measured(
                mode=label,
                options=wanted[label].options,
                texts_per_s=speed,
                vs_float32=speed / reference_speed,
                cos_min=float(cos.min()),
                cos_mean=float(cos.mean()),
                max_abs=float(gap),
            )
        )
    return results


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def say(message: str) -> None:
    """One progress line on stderr, flushed at once."""
    print(message, file=sys.stderr, flush=True)
