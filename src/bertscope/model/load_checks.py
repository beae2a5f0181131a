"""What `load()` refuses before anything loads: counts that are not whole numbers, more threads than CPUs,
and options that the other options asked leave unread (the command line checks these too)."""

from __future__ import annotations

from collections.abc import Sequence

from ..core._enums import Backend, Mode, Quantize
from ..core.cpu import usable_cpus
from ..core.spec import whole_number
from ..errors import InvalidSpec

__all__ = ["check_counts", "check_threads", "refuse_unread_options"]


# The counts with a floor over 1, with what it holds: a text takes [CLS] and [SEP] at least.
_LEAST = {"max_tokens": (2, "[CLS] and [SEP]")}


def check_counts(**counts: int | None) -> None:
    """Refuse a count that is not a whole number of 1 or more (max_tokens: 2 or more) (threads=0 would
    reach torch, or set OMP_NUM_THREADS=0; token_budget=0 would mean the default), before anything loads."""
    for name, value in counts.items():
        if value is not None:
            least, meaning = _LEAST.get(name, (1, None))
            whole_number(value, name, least=least, meaning=meaning)


def check_threads(threads: int) -> None:
    """Refuse more threads than the CPUs this process may run on, as `--threads` does: more cannot run
    at once, and each new count is a new runtime measurement (minutes at a count in the hundreds; ONNX
    Runtime refuses a count past 2**31 with a traceback), so a typo is refused, not timed."""
    if threads > (cpus := usable_cpus()):
        word = "CPU" if cpus == 1 else "CPUs"
        raise InvalidSpec(f"threads={threads}, but this machine has {cpus} {word}; give at most {cpus}")


def refuse_unread_options(
    *,
    backend: Backend | str,
    quantize: Quantize | str | None,
    mode: Mode | str,
    calibration: Sequence[str] | None = None,
    fast_min_cosine: float | None = None,
    remeasure: bool = False,
) -> None:
    """Refuse an option that the other options asked leave unread: it would be ignored without a word;
    and calibration texts that are not a list of str. `load` checks these before anything loads, and the
    command line before a load asked to measure again (`--remeasure`) changes any measurement."""
    from ..backends.quantize import check_calibration

    chosen = Backend.parse(backend, what="backend")
    scheme = Quantize.parse(quantize or Quantize.NONE, what="quantize")
    fast = Mode.parse(mode, what="mode") is Mode.FAST
    if calibration is not None:
        check_calibration(calibration)
    if calibration is not None and chosen is Backend.OPENVINO and scheme is not Quantize.INT8_STATIC:
        raise InvalidSpec(
            "backend='openvino' reads no calibration texts but with quantize='int8_static' (its int8 takes "
            "each activation's scale at run time); leave calibration out, or add quantize='int8_static'"
        )
    if calibration is not None and not fast and scheme is Quantize.NONE:
        raise InvalidSpec(
            "calibration= fits int8's scales and is read only with quantize= (int8, int8_fused, "
            "int8_static) or mode='fast'; leave it out, or add one of them"
        )
    # None is 'not given': any number, the default 0.999 too, is a bound that nothing else reads.
    if fast_min_cosine is not None and not fast:
        raise InvalidSpec(
            f'fast_min_cosine applies to mode="fast" only; fast_min_cosine={fast_min_cosine} is the bound '
            '(the least cosine to float32) that mode="fast" picks its runtime within: add mode="fast", or '
            "leave it out"
        )
    if not isinstance(remeasure, bool):  # "yes" or 1 would measure for minutes on a truthy value
        raise InvalidSpec(
            f"remeasure takes True or False, not {remeasure!r}; give remeasure=True or leave it out"
        )
    if remeasure and not fast and (chosen is not Backend.AUTO or scheme is not Quantize.NONE):
        raise InvalidSpec(
            "remeasure=True times the exact default or mode='fast' again, and these options name the "
            "runtime themselves (backend= or quantize=): nothing is measured; leave remeasure out"
        )
