"""The exact default: with no options, `load()` runs the fastest runtime equal to torch within 1e-5.

The candidates are the exact ways of the mode table (torch, ONNX Runtime and OpenVINO float32) whose
packages are installed. Each must give every hidden state within `_GATE` (0.8 x `EXACT_ATOL`) of torch's
on eight calibration sentences and on two texts at the model's full length; the fastest of those (median
of 3 alternating rounds over the calibration sentences alone, in pairs and in fours, a corpus-sized
batch) wins. torch is timed no more once its first round is 1.5x the fastest's, so its speed, which the
others' `vs_float32` is read against, is then that one round's.
Measured once per model and machine and cached beside the `mode="fast"` figures (measured again when
written by another bertscope version, or asked with `remeasure`). A measurement taken while something else
held the CPU is kept all the same: every candidate is exact, so only speed is at stake, and measuring
again at every load would load torch in every process; `--remeasure` takes it again on a quiet machine.
Torch stays where nothing else is installed, on CUDA, for other dtypes, and for models under
`MIN_PARAMETERS`: there a forward costs less than the fixed overhead of a call, and the export would cost
more than it ever saves.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock

from ..core.cpu import cpu_threads, machine_key
from ..core.finite import non_finite_read
from ..core.loading import TORCH_INSTALL, TORCH_PIN
from ..core.model_info import ExactChoice
from ..errors import BackendUnavailable, InvalidSpec, ModelLoadError, TruncatedTextsWarning
from . import modes
from .digest import runtimes_key
from .fast import (
    Measured,
    fast_cache_dir,
    graphs_key,
    is_installed,
    newest_first,
    read_measured,
    runtime_embedder,
    say,
    timing_texts,
    write_measured,
)
from .modes import MODES, measure
from .onnx import ExportNotWritten, calibration_texts, encoder_digest, writable_folder
from .quantize import heldout_texts
from .recorded import measurement_stamp, remember

__all__ = [
    "EXACT_ATOL",
    "EXACT_FORMAT",
    "MIN_PARAMETERS",
    "choose_exact",
    "exact_candidates",
]

EXACT_ATOL = 1e-5
# 3: also checked on two texts at the model's full length, against `_GATE` (2: short sentences only)
EXACT_FORMAT = 3
# The gap a way may show on the checked texts to be chosen: a fifth under EXACT_ATOL. float32 sums in
# another order drift with length and with the text: on the bundled model OpenVINO read 8.0-8.3e-06 on the
# two full-length checks and 1.12e-05 on one 256-token text of random words, where ONNX Runtime read
# 4.6-5.4e-06 and 7.4e-06. The check cannot see every text; the margin keeps those it does not within
# EXACT_ATOL.
_GATE = 0.8 * EXACT_ATOL
# Below this many weights torch stays: bertscope's tiny test models, not any model worth exporting.
MIN_PARAMETERS = 5_000_000
_TORCH = MODES["float32"].label
# The calibration sentences the timed rows are made of (fast.timing_texts: alone, in pairs, in fours).
_TIMED = 8
# Rows timed per way and round: about the work of 200 rows of MiniLM-L6 (22.7M weights), at least 28.
# 8 sentences ranked the runtimes by what a call costs, not by its work: on a 16-thread Xeon OpenVINO
# measured 0.25-0.39x ONNX Runtime there and 1.16-1.27x on 600 news sentences; 200 rows read 1.00-1.19x
# (bench/exact_rank.py, bench/BENCHMARKS.md). A close call between two exact ways costs at most their
# gap, never exactness.
_TIMED_WEIGHT_ROWS = 200 * 22_700_000
_TIMED_ROWS_RANGE = (28, 200)
_CHECKED = 8  # sentences whose every hidden state is compared
# torch, timed no more once its first round is this many times the fastest's: on most CPUs it is the
# slowest exact way by 2x (bench/BENCHMARKS.md), and its rounds were most of a first load's timing.
_TORCH_DROPPED = 1.5


def exact_candidates() -> dict[str, dict[str, Any]]:
    """Label -> load options of the exact ways whose packages are installed (torch where it is)."""
    return {
        way.label: way.options
        for way in MODES.values()
        if way.exact and is_installed(*way.needs, *(() if way.options.get("backend") else ("torch",)))
    }


def choose_exact(model: Any, *, remeasure: bool = False, record: bool = True) -> None:
    """Switch `model` (torch float32, just loaded) to its fastest exact runtime; record the choice.

    `record`: also keep it for `bertscope info` (backends/recorded.py); False where threads were asked.
    `remeasure` where torch stays without a measurement (another dtype, CUDA, a tiny model, no other
    runtime) is refused: it would be ignored without a word. Where torch is not installed, the choice a
    run with torch recorded for this model, machine and runtimes runs; with none, a one-line
    BackendUnavailable (nothing can be measured).
    """
    why = _torch_only(model)
    wanted = exact_candidates()
    if _TORCH not in wanted:
        stamp = _without_torch(model, wanted, why, remeasure=remeasure)
    else:
        if why is None and len(wanted) == 1:
            why = _ALONE
        if why is not None and remeasure:
            raise InvalidSpec(
                f"remeasure=True times the exact default again, but this load measures nothing ({why}: "
                "torch runs); leave remeasure out"
            )
        stamp = None  # the measurement file as its figures were read, for the record
        if why is not None:
            model.exact_choice = {"chosen": _TORCH, "why": why}
        else:
            try:
                stamp = _choose_measured(model, wanted, remeasure=remeasure)
            except ModelLoadError as exc:  # no cache, no export: torch answers, exactly
                say(f"exact default: {exc}; running torch")
                model.exact_choice = {"chosen": _TORCH, "why": "the cache folder cannot be written"}
                return
    folder = getattr(model.loaded, "path", None)
    if record and folder is not None:
        info = model.info()
        runtime = {"backend": info.backend, "dtype": info.dtype, "exact": info.exact}
        remember(Path(folder), runtime, info.device, measurement=stamp)


def _choose_measured(model: Any, wanted: dict[str, dict[str, Any]], *, remeasure: bool) -> str | None:
    """Switch `model` to the fastest exact way of its measurement (measured now where none is cached);
    the measurement's stamp (ModelLoadError where the cache folder takes no file)."""
    digest = encoder_digest(model)
    path = _measured_path(model.family.name, digest)
    measured, stamp = _figures(model, path, wanted, digest, remeasure=remeasure)
    exact = _exact_by_speed(measured, wanted)
    best = _switch_fastest(model, exact, digest) or exact[-1]  # torch, last, always runs
    model.exact_choice = _recorded(best, path)
    return stamp


def _switch_fastest(model: Any, exact: list[Measured], digest: str) -> Measured | None:
    """Switch `model` to the fastest of the `exact` ways that runs here, or None where none does: a way
    found when measured may not import now, or its export be gone from a cache that takes no file (each
    said on stderr)."""
    for best in exact:
        try:
            _switch(model, best.mode, digest)
            return best
        except (BackendUnavailable, ModelLoadError) as exc:
            say(f"exact default: {best.mode} cannot run here ({exc}); the next fastest exact way runs")
    return None


def _without_torch(
    model: Any, wanted: dict[str, dict[str, Any]], why: str | None, *, remeasure: bool
) -> str | None:
    """Switch `model` to the fastest exact way that a run with torch measured for this model and machine
    over the runtimes installed now (the torch it had does not matter: its exports were proven against it
    then); the measurement's stamp. BackendUnavailable where torch would run or nothing is recorded."""
    measured: str | None = None  # what the newest measurement said, where it left nothing to run
    if why is None and wanted and not remeasure:
        digest = encoder_digest(model)
        for path in _measured_with_torch(model.family.name, digest):
            found = read_measured(path, check_plausible=False, quiet=True)
            if found is None or {_TORCH, *wanted} - {m.mode for m in found}:
                continue
            stamp = measurement_stamp(path)
            exact = _exact_by_speed(found, wanted)
            best = _switch_fastest(model, exact, digest)
            if best is not None:
                model.exact_choice = _recorded(best, path)
                return stamp
            measured = (
                "the run with torch that measured this model here found no runtime within 1e-5 of it: "
                f"only torch runs it exactly; pip install 'torch=={TORCH_PIN}', or load with "
                "backend='onnxruntime' knowing its vectors are not within 1e-5"
                if not exact
                else "the runtimes measured exact for this model cannot run now (an export to make again "
                f"needs torch): {TORCH_INSTALL}"
            )
            break  # the newest measurement decides: an older one holds for these runtimes no better
    if measured is not None:
        raise BackendUnavailable(f"torch is not installed here, and {measured}")
    if remeasure:
        reason = "remeasure=True times each runtime against torch, and torch is not installed here"
    elif why is not None or not wanted:
        reason = f"torch runs this model here ({why or 'no other runtime installed'}), and it is missing"
    else:
        reason = (
            "torch is not installed here, and no run with torch recorded which runtime is exact for this "
            "model on this machine with the runtimes installed now"
        )
    raise BackendUnavailable(
        f"{reason}: load with backend='onnxruntime' to run its cached ONNX export without torch, or "
        f"{TORCH_INSTALL}"
    )


def _figures(
    model: Any, path: Path, wanted: dict[str, dict[str, Any]], digest: str, *, remeasure: bool
) -> tuple[list[Measured], Any]:
    """The measurement at `path` and its stamp for the record: read where it is whole and covers `wanted`
    (a read-only cache that holds it is enough), else measured now and written (ModelLoadError where the
    cache folder takes no file)."""
    if not remeasure:
        found = read_measured(path, check_plausible=False, quiet=True)  # said below where measured again
        if found is not None and not set(wanted) - {m.mode for m in found}:
            return found, measurement_stamp(path)
    writable_folder(path.parent)
    # Two processes loading the same model at once (a test suite's workers, a server's replicas) measure
    # it once: the second waits and reads the first's figures, so both run and record the same choice.
    with FileLock(f"{path}.lock"):
        measured = None if remeasure else read_measured(path, check_plausible=False, chooser=_CHOOSER)
        if measured is None or set(wanted) - {m.mode for m in measured}:
            start = time.perf_counter()
            say(
                f"exact default: timing {', '.join(wanted)} on this model and machine, once (up to a "
                "minute on a small machine: an ONNX export, then each runtime timed; cached after)"
            )
            with warnings.catch_warnings():
                # its own calibration texts run past the model's limit on purpose: not the user's cut
                warnings.simplefilter("ignore", TruncatedTextsWarning)
                measured = _measure(model, wanted, calibration_texts(), digest)
            write_measured(path, measured)
            say(f"exact default: measured in {time.perf_counter() - start:.1f} s")
        return measured, measurement_stamp(path)


_CHOOSER = "exact default"  # how its lines on stderr begin
_SMALL = f"under {MIN_PARAMETERS:,} weights: an export would cost more than it saves"
_ALONE = "no other runtime installed (pip install 'bertscope[onnx]')"


def _measured_path(family: str, digest: str) -> Path:
    name = f"{family}-{digest}-{machine_key()}-{modes.installed_key()}-r{runtimes_key()}-{_tail()}"
    return fast_cache_dir() / name


def _tail() -> str:
    return f"exact-f{EXACT_FORMAT}-{graphs_key()}.json"


def _measured_with_torch(family: str, digest: str) -> list[Path]:
    """This model's measurements on this machine over the runtimes installed now, whatever torch and
    transformers they were taken with (`_measured_path`'s names), newest first."""
    return newest_first(f"{family}-{digest}-{machine_key()}-*-r{runtimes_key()}-{_tail()}")


def _exact_by_speed(measured: list[Measured], wanted: dict[str, dict[str, Any]]) -> list[Measured]:
    """The measured ways within `_GATE` of torch, fastest first (torch always among them)."""
    exact = [m for m in measured if m.mode in wanted and m.max_abs <= _GATE]
    return sorted(exact, key=lambda m: m.texts_per_s, reverse=True)


def _recorded(best: Measured, path: Path) -> dict[str, Any]:
    # `vs_float32`, as `info().fast`, ModeReport and `bench --json` name this ratio (`vs_torch` before,
    # still read from the library's dict: ExactChoice)
    return ExactChoice(
        chosen=best.mode,
        vs_float32=round(best.vs_float32, 3),
        max_abs=float(f"{best.max_abs:.3g}"),
        measured=str(path),
    )


def _backend(label: str) -> str | None:
    return next(way.options.get("backend") for way in MODES.values() if way.label == label)


def _torch_only(model: Any) -> str | None:
    """Why `model` must stay on torch, or None."""
    if model.device_type != "cpu":
        return f"{model.device_type} runs torch"
    if model.torch_dtype_name != "float32":
        return "only float32 has other exact runtimes"
    if _parameters(model) < MIN_PARAMETERS:
        return _SMALL
    return None


def _parameters(model: Any) -> int:
    """How many weights the model has (counted in the folder's safetensors where it was opened light)."""
    view = model.loaded.view
    if model.light and view is not None:
        return view.n_parameters
    return sum(p.numel() for p in model.hf_model.parameters())


def _switch(model: Any, label: str, digest: str) -> None:
    """Run `model` on the way named `label`; a runtime built before in this process is reused."""
    backend = _backend(label)
    key = (label, digest, cpu_threads())  # a runtime keeps the threads it was opened with
    if backend is None:
        model.use_torch()
    elif key in _RUNNERS:
        model.engine.runner = _RUNNERS[key]
        model.backend, model.quantize, model.runtime_dtype = backend, None, _RUNTIME_DTYPE[backend]
    else:
        if backend == "onnxruntime":
            model.use_onnxruntime()
        else:
            model.use_openvino(dtype="float32")
        _RUNNERS[key] = model.engine.runner


# (label, weights' hash, threads) -> an opened runtime: a process that loads the same model again (a test
# suite, a notebook) does not open ONNX Runtime or compile OpenVINO again.
_RUNNERS: dict[tuple[str, str, int], Any] = {}
_RUNTIME_DTYPE = {"onnxruntime": None, "openvino": "float32"}


def _measure(model: Any, wanted: dict[str, dict[str, Any]], texts: list[str], digest: str) -> list[Measured]:
    """Each way's speed, and its largest |difference| to torch over every hidden state (`max_abs`)."""
    # short sentences, and two texts cut at the model's limit, where a runtime's drift is largest
    checked = [*texts[:_CHECKED], " ".join(texts), " ".join(heldout_texts())]
    reference = _all_hidden(model, checked)
    ways, gaps = {}, {}
    unwritten: ExportNotWritten | None = None  # the export the disk refused: every runtime reads it
    left_out: list[str] = []
    for label in wanted:
        if unwritten is not None and _backend(label) is not None:
            left_out.append(label)  # the same export would be tried, and refused, again
            continue
        try:
            _switch(model, label, digest)
        except ExportNotWritten as exc:  # the disk's fault, not the model's: not recorded, so tried next load
            unwritten = exc
            left_out.append(label)
            continue
        # a model the exporter cannot trace, or a runtime found but not importable: that way does not apply
        except (ModelLoadError, BackendUnavailable) as exc:
            say(f"exact default: {label} does not apply ({exc})")
            gaps[label] = float("inf")
            continue
        gaps[label] = float(np.abs(_all_hidden(model, checked) - reference).max())
        ways[label] = runtime_embedder(model, model.engine.runner)
    if unwritten is not None:
        say(f"exact default: {', '.join(left_out)} left out this time ({unwritten})")
    model.use_torch()
    # Only the ways that can be chosen are timed (torch too: the speeds are read against it).
    contenders = {label: e for label, e in ways.items() if label == _TORCH or gaps[label] <= _GATE}
    rows = timing_texts(texts[:_TIMED], rows=_timed_rows(model))
    rounds = 3 if len(contenders) > 1 else 1
    timed = measure(contenders, rows, rounds=rounds, drop_if_slower=(_TORCH, _TORCH_DROPPED))
    base = timed[_TORCH][0]
    # Kept at torch's speed with their gap (infinite where they did not apply), so they are never chosen
    # and not tried again on the next load.
    timed.update({label: (base, np.empty(0)) for label in gaps if label not in contenders})
    return [
        Measured(
            mode=label,
            options=wanted[label],
            texts_per_s=speed,
            vs_float32=speed / base,
            cos_min=1.0,
            cos_mean=1.0,
            max_abs=gaps[label],
        )
        for label, (speed, _vectors) in timed.items()
    ]


def _timed_rows(model: Any) -> int:
    """Rows to time each way on: fewer for a bigger model, whose every row costs more."""
    low, high = _TIMED_ROWS_RANGE
    return min(high, max(low, round(_TIMED_WEIGHT_ROWS / _parameters(model))))


def _all_hidden(model: Any, texts: list[str]) -> np.ndarray:
    with non_finite_read():  # a runtime's NaN is its max_abs (nan: never within the bound), not an error
        rows = model.embed_tokens(texts, layers="all", combine="concat")
    return np.concatenate([r.vectors for r in rows])
