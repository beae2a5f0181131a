"""The ways one model can run, in one table, and the one loop that measures them against each other.

`MODES` names each way (torch float32, bfloat16, float16, ONNX Runtime, OpenVINO, their int8) with the
load options, the precision its matmuls run in, the packages it needs and whether it is exact (equal to
the plain Hugging Face forward within 1e-5). `measure` times ways against each other in one process,
alternating rounds and taking the median, so a machine shared with other work slows every way alike.
`compare_modes` embeds the same texts in each mode and reports its speed against float32 and the cosine
of its sentence vectors to float32's: the number to read before trusting a fast mode. `mode="fast"`
(fast.py) and the exact default (exact.py) choose from the same table with the same loop.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.encoder import Encoder
from ..core.finite import non_finite_read
from ..core.renamed_fields import renamed_field
from ..core.similarity import unit
from ..errors import InvalidSpec
from .digest import installed_key

if TYPE_CHECKING:
    import torch

__all__ = [
    "MODES",
    "ModeReport",
    "Way",
    "compare_modes",
    "installed_key",
    "measure",
    "mode_name",
    "mode_options",
]


@dataclass(frozen=True)
class Way:
    """One way to run a model: load options, the matmuls' precision, the packages needed, exactness."""

    options: dict[str, Any]
    precision: str
    label: str
    needs: tuple[str, ...] = ()
    exact: bool = False
    native: str = ""  # the CPU flag family it needs to be worth running ("bf16", "vnni"), or ""
    cuda: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _onnxruntime_int8(quantize: str, label: str) -> Way:
    """ONNX Runtime running one of its int8 graphs (`quantize` names the scheme); worth it with VNNI."""
    options = {"backend": "onnxruntime", "quantize": quantize}
    return Way(options, "int8", label, ("onnxruntime", "onnx"), native="vnni")


def _openvino_int8(quantize: str, label: str) -> Way:
    """OpenVINO running one of its int8 models (`quantize` names it); worth it with VNNI."""
    options = {"backend": "openvino", "quantize": quantize}
    return Way(options, "int8", label, ("openvino", "onnx", "nncf"), native="vnni")


# name -> way; the label is the name `mode="fast"` records in provenance and in its measurement cache. An
# int8 scheme is spelled as quantize= takes it (`int8_fused`, `openvino-int8_static`): one name in the
# reports, bench's table and JSON, and the errors; `mode_name` reads the hyphenated spelling too.
MODES: dict[str, Way] = {
    "float32": Way({}, "float32", "torch float32", exact=True, cuda=True),
    "onnxruntime": Way(
        {"backend": "onnxruntime"}, "float32", "onnxruntime float32", ("onnxruntime", "onnx"), True
    ),
    "openvino": Way({"backend": "openvino"}, "float32", "openvino float32", ("openvino", "onnx"), True),
    "bfloat16": Way({"dtype": "bfloat16"}, "bfloat16", "torch bfloat16", native="bf16", cuda=True),
    "float16": Way({"dtype": "float16"}, "float16", "torch float16", cuda=True),
    "openvino-bfloat16": Way(
        {"backend": "openvino", "dtype": "bfloat16"},
        "bfloat16",
        "openvino bfloat16",
        ("openvino", "onnx"),
        native="bf16",
    ),  # fmt: skip
    "int8": _onnxruntime_int8("int8", "onnxruntime int8"),
    # The other int8 schemes (backends/quantize.py): the graph fused offline (QAttention), and calibrated
    # activation scales (QDQ); `mode="fast"` measures them beside the dynamic one and keeps the fastest.
    "int8_fused": _onnxruntime_int8("int8_fused", "onnxruntime int8 fused"),
    "int8_static": _onnxruntime_int8("int8_static", "onnxruntime int8 static"),
    "openvino-int8": _openvino_int8("int8", "openvino int8"),
    # activation scales fitted once on the calibration texts, but the feed-forward outputs' (openvino.py)
    "openvino-int8_static": _openvino_int8("int8_static", "openvino int8 static"),
}


@dataclass
class ModeReport:
    """One mode's speed and drift on the texts compared."""

    mode: str
    n_texts: int
    seconds: float | None  # None where not timed (`time_it=False`), as texts_per_s is NaN there
    texts_per_s: float
    vs_float32: float
    cos_min: float
    cos_mean: float
    max_abs: float
    # what ran, from the loaded model's info(): a mode can run otherwise than it asks (OpenVINO bfloat16
    # runs float32 on a CPU without native bfloat16)
    backend: str = "torch"
    dtype: str = "float32"
    quantize: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able fields."""
        return dict(self.__dict__)

    @property
    def texts(self) -> int:
        """Deprecated: the old name of `n_texts` (a count, where `texts` names a list elsewhere)."""
        return renamed_field(self.n_texts, owner="ModeReport", name="n_texts", old="texts")

    @property
    def ran(self) -> str:
        """What ran, as the mode labels say it: `openvino float32`, `onnxruntime int8_static`."""
        return f"{self.backend} {self.quantize or self.dtype}"

    def ran_as_asked(self) -> bool:
        """Whether the backend, dtype and quantize that ran are the ones the mode asks for."""
        asked = MODES[self.mode].options if self.mode in MODES else {}
        return (
            asked.get("backend", "torch") == self.backend
            and (asked.get("quantize") or None) == (self.quantize or None)
            and (asked.get("quantize") is not None or asked.get("dtype", "float32") == self.dtype)
        )


def mode_name(mode: str) -> str:
    """`mode` as `MODES` names it, in any case and either spelling (`int8-static` is `int8_static`, as
    `quantize=` spells its scheme); InvalidSpec listing the names where it is none."""
    name = mode.strip().lower().replace("_", "-") if isinstance(mode, str) else mode
    if isinstance(name, str):
        for scheme in ("fused", "static"):
            name = name.replace(f"int8-{scheme}", f"int8_{scheme}")
    if name not in MODES:
        raise InvalidSpec(f"unknown mode {mode!r}; choose from: {', '.join(MODES)}")
    return str(name)


def mode_options(mode: str) -> dict[str, Any]:
    """The load options of a mode name (either spelling, `mode_name`), or InvalidSpec listing the names."""
    return dict(MODES[mode_name(mode)].options)


Embed = Callable[[list[str]], np.ndarray]


def measure(
    ways: Mapping[str, Embed],
    texts: Sequence[str],
    *,
    rounds: int = 3,
    drop_if_slower: tuple[str, float] | None = None,
) -> dict[str, tuple[float, np.ndarray]]:
    """name -> (texts per second, median of `rounds` alternating rounds after a warm-up; vectors (n, d)).

    `rounds=0` runs each way once, untimed (speed 0.0): drift only. `drop_if_slower=(name, factor)`: that
    way is timed no more once its first round took over `factor` (at least 1) times the fastest first
    round (its one round stands; a name not among `ways` drops nothing). Only a way with nothing to warm
    (torch's eager forward) should be named: a runtime's first round carries its first sight of each
    batch shape, so it would be dropped on that alone.
    """
    batch = list(texts)
    # A short warm-up: each way has run before it is timed (the exact default's checks, a fast mode's
    # drift run), so a few texts wake its threads and buffers; `rounds=0` keeps every text's vectors.
    vectors = {name: embed(batch[:2] if rounds else batch) for name, embed in ways.items()}
    times: dict[str, list[float]] = {name: [] for name in ways}
    timed = dict(ways)
    for round_number in range(rounds):
        for name, embed in timed.items():  # alternating: a burst of load slows every way in its round
            start = time.perf_counter()
            vectors[name] = embed(batch)
            times[name].append(time.perf_counter() - start)
        if round_number == 0 and drop_if_slower is not None:
            slow, factor = drop_if_slower
            fastest = min(first for first, *_ in times.values())
            if slow in timed and times[slow][0] > max(factor, 1.0) * fastest:
                timed.pop(slow)
    return {
        name: (len(batch) / statistics.median(times[name]) if rounds else 0.0, np.asarray(vectors[name]))
        for name in ways
    }


def compare_modes(
    texts: Sequence[str],
    modes: Sequence[str] = ("float32", "onnxruntime", "int8"),
    *,
    model: str | os.PathLike[str] | None = None,
    device: str = "auto",
    repeats: int = 1,
    time_it: bool = True,
    **embed_options: Any,
) -> list[ModeReport]:
    """Embed `texts` in float32 and in each mode; speed ratio and cosine drift against float32.

    Each mode is loaded once (exports happen then, untimed), warmed up on a few texts, then timed as the
    median of `repeats` rounds that alternate between the modes (`time_it=False`: one untimed run, drift
    only). float32 here is torch float32 (`backend="torch"`), the reference every mode drifts from.
    """
    import torch

    from ..core.encoder import open_encoder
    from ..core.loading import mode_asked
    from .runtimes import apply_way

    if not texts:
        raise InvalidSpec("no texts to compare the modes on")
    modes = list(dict.fromkeys(mode_name(mode) for mode in modes))  # int8-static is int8_static
    wanted = list(dict.fromkeys(["float32", *modes]))  # a mode named twice is measured and reported once

    def build(dtype: torch.dtype) -> Encoder:
        return open_encoder(model, device=device, dtype=dtype)

    ways: dict[str, Embed] = {}
    ran: dict[str, Any] = {}
    for mode in wanted:
        # Each mode its own encoder, as `load(model, **mode_options(mode))` makes it (exports untimed); a
        # slow way's warning names the mode
        with mode_asked(mode):
            loaded = apply_way(build(torch.float32), mode_options(mode), build=build)
        ways[mode] = _embedder(loaded, embed_options)
        ran[mode] = loaded.info()
    timed = measure(ways, texts, rounds=repeats if time_it else 0)
    reference_speed, reference = timed["float32"]
    reports = []
    for mode in wanted:
        if mode not in modes:
            continue
        speed, vectors = timed[mode]
        # float32 rounding can read 1.0000001 for a vector against itself: a cosine is in [-1, 1]
        cos = np.clip((unit(vectors) * unit(reference)).sum(axis=1), -1.0, 1.0)
        reports.append(
            ModeReport(
                mode=mode,
                n_texts=len(texts),
                seconds=len(texts) / speed if speed else None,
                texts_per_s=speed if speed else float("nan"),
                vs_float32=speed / reference_speed if speed else float("nan"),
                cos_min=float(cos.min()),
                cos_mean=float(cos.mean()),
                max_abs=float(np.abs(vectors - reference).max()),
                backend=ran[mode].backend,
                dtype=ran[mode].dtype,
                quantize=ran[mode].quantize,
            )
        )
    return reports


def _embedder(model: Any, options: dict[str, Any]) -> Embed:
    def embed(texts: list[str]) -> np.ndarray:
        with non_finite_read():  # a mode's NaN is its drift (cos nan: never within a bound), not an error
            return np.asarray(model.embed(texts, progress=False, **options).vectors)

    return embed
