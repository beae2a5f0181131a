"""OpenVINO running bertscope's own exported ONNX graph (every hidden state an output), on the CPU.

float32 is the same graph as ONNX Runtime's and equals torch to ~1e-5. Early stop compiles one model per
set of states asked (the graph cut after the deepest, `hidden_d`, so OpenVINO drops the layers past it,
and only those states as outputs): on the bundled model the depth-2 graph ran in 0.32x the time of the
full one, so cutting beats computing everything and returning fewer outputs. At most `MAX_COMPILED` are
kept (`OpenVinoRunner.model_for`). `float32` is pinned with INFERENCE_PRECISION_HINT, because OpenVINO's
own default on CPUs with native bfloat16 is bfloat16.

bfloat16 runs only where the CPU has it natively (AVX-512 BF16 or AMX); elsewhere OpenVINO ignores the
hint and runs float32, so bertscope warns, names the faster choice, and runs and records float32.

int8 stores every matmul's weights in int8 (NNCF's weight compression: asymmetric, per output channel;
the embedding tables stay float32, so hidden state 0 is exact), cached as OpenVINO IR, and OpenVINO
quantizes each activation row as it runs, in groups of `DYNAMIC_GROUP` channels with a scale each, for
VNNI's int8 dot products. Run-time scales need no calibration texts and follow any input: BERT's outlier
channels spoil only their own group. It replaced NNCF's static (calibrated) int8, whose scales, fixed on
the calibration sentences, clipped held-out ones (min cosine 0.97 on the held-out sentences, under the
0.99 gate; bench/openvino_int8.py has both).

int8-static (`quantize="int8_static"`) brings calibrated scales back where they hold: NNCF's post-training
int8 (SmoothQuant at `STATIC_SMOOTH_QUANT`; scales fitted on the calibration texts, `SHORT_CALIBRATION`
and the texts joined into one long one) for the query/key/value, attention-output and first feed-forward
matmuls and the attention's own, while the feed-forward outputs (`FFN_OUTPUTS`, fed by the activation
whose outliers vary most) keep int8 weights with run-time scales. On Zen 5 it ran 1.36x OpenVINO bfloat16
on MiniLM and 1.5x or more on all-mpnet-base-v2, min cosine 0.995 on the held-out sentences
(bench/BENCHMARKS.md); with every matmul static it ran faster still but fell to 0.988 on odd inputs. The
IR is cached per calibration batches.

Both int8 IRs are recorded and checked as the ONNX exports are (`_whole_ir`): a damaged one, or another
model's copied under this one's name, is made again, never trusted; so is a cached graph the installed
OpenVINO cannot read (one made by another version, in a cache shared between installs: `_read`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import DType, Quantize
from ..core.cpu import cpu_threads, has_native_bf16
from ..core.engine import Array, AskedStates, States, asked_states, placed
from ..core.families import Family
from ..core.fingerprint_facts import file_sha256
from ..core.folder import read_json_object
from ..core.loading import asked_mode, device_kind, faster_than_bfloat16
from ..errors import BackendUnavailable, InvalidSpec, ModelLoadError, caller_level
from .onnx import (
    cache_dir,
    cached_export,
    export_onnx,
    export_stamp,
    graph_refused,
    held_lock,
    open_failure,
    read_record,
    record_export,
    refusal_reason,
    refused_graph,
    runtime_feed,
    writable_folder,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "DYNAMIC_GROUP",
    "IR_FORMAT",
    "PRECISIONS",
    "OpenVinoRunner",
    "openvino_cache_dir",
    "openvino_refusal",
    "require_openvino",
    "resolve_precision",
]

PRECISIONS = ("float32", "bfloat16", "int8", "int8_static")  # the int8 ones named as `quantize` names them
Batch = tuple[np.ndarray, np.ndarray, np.ndarray]  # (ids, type_ids, mask), padded as the engine pads
# Bumped whenever the quantized IR changes, so stale cache files are never reused.
IR_FORMAT = 3  # 3: int8 weights with run-time activation scales (was NNCF's static int8)
_HINT = {"float32": "f32", "bfloat16": "bf16", "int8": "f32", "int8_static": "f32"}
# int8: each activation row is quantized at run time in groups of this many channels, each with its own
# scale, so BERT's outlier channels spoil only their own group. Chosen for drift (bench/openvino_int8.py
# on Zen 5, bench/BENCHMARKS.md): held-out min cosine 0.9976 at 32, 0.9966 at 64, 0.9941 at 128; 64 ran
# 1.13-1.17x the speed of 32 and 0.96-0.98x that of 128.
DYNAMIC_GROUP = 64
# int8-static: the Linear after the feed-forward activation, by each family's exported module names
# (BERT-likes, DistilBERT, ALBERT; the mlp of ModernBERT, GTE, Nomic, EuroBERT and Jina v3). Its outlier
# channels vary from text to text, so its input keeps run-time scales.
FFN_OUTPUTS = (
    r".*/layer\.\d+/output/dense/MatMul",
    r".*/ffn/lin2/MatMul",
    r".*/ffn_output/MatMul",
    r".*/mlp/(Wo|down_proj|fc2)/MatMul",
)
# SmoothQuant's migration strength for the static scales. NNCF's default for transformers (0.95) left
# the held-out "Ok." at 0.984 cosine; 0.5 took it to 0.9957 (bench/BENCHMARKS.md).
STATIC_SMOOTH_QUANT = 0.5
# Added to every calibration set of int8-static, with the set's texts joined into one long text: in texts
# of a few tokens the [CLS] and [SEP] rows dominate each activation's range, and scales fitted on sentences
# alone clipped them (held-out "Ok.": 0.95); a text at the model's limit took all-mpnet-base-v2 to 0.981
# until one was in the set (0.994).
SHORT_CALIBRATION = (
    "Yes.", "No way.", "Thanks!", "Hi there", "Good morning.",
    "See you soon.", "Why?", "Great news", "Not now.", "Sure, why not?",
)  # fmt: skip


def require_openvino() -> Any:
    """The openvino module, or a clear error naming the extra that installs it."""
    try:
        import openvino
    except ImportError as exc:
        raise BackendUnavailable(
            "backend='openvino' needs the openvino package: pip install 'bertscope[openvino]'"
        ) from exc
    if not hasattr(openvino, "Core"):  # an uninstall's leftover folder imports as an empty namespace
        raise BackendUnavailable(
            f"the openvino found at {list(getattr(openvino, '__path__', []))} is not a whole install: "
            "pip install --force-reinstall 'bertscope[openvino]'"
        )
    return openvino


def _require_nncf() -> Any:
    try:
        import nncf
    except ImportError as exc:
        raise BackendUnavailable(
            "backend='openvino' with quantize='int8' or 'int8_static' needs nncf: "
            "pip install 'bertscope[openvino]'"
        ) from exc
    return nncf


def openvino_cache_dir() -> Path:
    """Where quantized OpenVINO models are kept, beside the ONNX exports ($BERTSCOPE_CACHE/openvino)."""
    return cache_dir().parent / "openvino"


# what each of load's options takes on OpenVINO (PRECISIONS in the two words load reads them as)
OPENVINO_TAKES = {"dtype": ("float32", "bfloat16"), "quantize": ("none", "int8", "int8_static")}


def openvino_refusal(keyword: str, value: object) -> InvalidSpec:
    """The refusal of `keyword`'s (dtype, quantize or the old precision) `value` on OpenVINO: names the
    keyword as given and what it takes there, and where `value` is the other option's, that option."""
    said = str(value).strip().lower().replace("-", "_")
    takes = OPENVINO_TAKES.get(keyword, PRECISIONS)
    other = next(
        (k for k, v in OPENVINO_TAKES.items() if k != keyword and said in v and said != "none"), None
    )
    hint = f"{said} is {other}={said!r}; " if other is not None and keyword != "precision" else ""
    return InvalidSpec(
        f"unknown {keyword} {value!r} for backend='openvino'; {hint}choose one of: {', '.join(takes)}"
    )


def resolve_precision(
    dtype: DType | str | torch.dtype, quantize: Quantize | str | None, device: torch.device | str
) -> str:
    """float32, bfloat16, int8 or int8_static from load's options; refuses what OpenVINO cannot run here.

    The names are read as every other option is (`DType.parse`, `Quantize.parse`: any case, `-` for `_`).
    bfloat16 on a CPU without it warns and falls back to float32 (what OpenVINO would silently run).
    """
    kind = device_kind(device)
    if kind != "cpu":
        raise InvalidSpec(
            f"backend='openvino' runs on the CPU; on {kind} use backend='torch' "
            "(with dtype='float16' or 'bfloat16' for speed)"
        )
    # a torch dtype as resolve_dtype takes it; a name as DType names it
    try:
        name = (
            DType.parse(dtype, what="dtype").value
            if isinstance(dtype, str)
            else str(dtype).removeprefix("torch.")
        )
    except InvalidSpec:
        raise openvino_refusal("dtype", dtype) from None
    try:
        mode = Quantize.parse(quantize or Quantize.NONE, what="quantize")
    except InvalidSpec:
        raise openvino_refusal("quantize", quantize) from None
    if mode is Quantize.INT8_FUSED:
        raise InvalidSpec(
            "quantize='int8_fused' is an ONNX Runtime graph; OpenVINO's are quantize='int8' or 'int8_static'"
        )
    if name not in ("float32", "bfloat16"):
        raise InvalidSpec(
            f"backend='openvino' takes dtype='float32' or 'bfloat16' (int8 is quantize='int8'); "
            f"dtype={name!r} needs backend='torch'"
        )
    if mode is not Quantize.NONE:
        if name != "float32":
            raise InvalidSpec(f"quantize='{mode.value}' keeps its float parts in float32; leave dtype out")
        return mode.value
    if name == "bfloat16" and not has_native_bf16():
        # where modes are compared, the mode asked is named, and mode='fast' is no mode to compare
        compared = asked_mode()
        runs, fast = ("float32", " (or mode='fast')") if compared is None else (f"{compared} as float32", "")
        warnings.warn(
            f"this CPU has no native bfloat16 (AVX-512 BF16 or AMX), so OpenVINO runs {runs} here; bertscope "
            f"runs and records float32. For speed on this CPU use {faster_than_bfloat16()}{fast}",
            UserWarning,
            stacklevel=caller_level(),  # the caller's line, as torch's bfloat16 warning says it
        )
        return "float32"
    return name


class OpenVinoRunner:
    """Runs the exported graph on OpenVINO; called by the Engine in place of the torch forward."""

    # Each compiled model holds its own packed weights (40-57 MiB on the bundled model), so a sweep over
    # layers keeps only the most recent few.
    MAX_COMPILED = 3

    def __init__(self, ov_model: Any, uses_token_types: bool, precision: str, *, threads: int) -> None:
        ov = require_openvino()
        self.ov = ov
        self.core = ov.Core()
        self.ov_model = ov_model
        self.precision = precision
        # The exporter drops inputs the graph never reads (DeBERTa-v2 without segment embeddings).
        names = {port.get_any_name() for port in ov_model.inputs}
        self.uses_token_types = uses_token_types and "token_type_ids" in names
        self.config = {
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": threads,
            "INFERENCE_PRECISION_HINT": _HINT[precision],
        }
        if precision.startswith("int8"):  # int8_static: the feed-forward outputs' run-time scales
            self.config["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = DYNAMIC_GROUP
        self._results = {
            port.get_any_name(): result
            for port, result in zip(ov_model.outputs, ov_model.get_results(), strict=True)
        }
        # outputs (hidden state indices, ascending) -> compiled model: a state no caller reads is not
        # an output, so OpenVINO neither keeps it nor converts it from bfloat16
        self._compiled: dict[tuple[int, ...], Any] = {}
        self._lock = threading.Lock()
        self.path: Path | None = None  # the int8 IR's xml, where one was made (its record: the .json beside)

    def compiled(self, deepest: int, layers: AskedStates = None) -> Any:
        """A compiled model that runs no layer past `deepest` and returns at least the states in
        `layers` (all of 0..deepest when None); see `model_for`."""
        return self.model_for(deepest, asked_states(deepest, layers))[0]

    def model_for(self, deepest: int, wanted: Sequence[int]) -> tuple[Any, tuple[int, ...]]:
        """(compiled model, the states it returns): the model compiled for exactly `wanted`, or a kept one
        of the same depth that returns them too. Once `MAX_COMPILED` are kept, a new set compiles all of
        0..deepest instead, which then serves every set at that depth: requests that rotate over many
        sets do not compile again at every forward."""
        outputs = tuple(wanted)
        with self._lock:
            key = outputs if outputs in self._compiled else None
            if key is None:
                key = next(
                    (k for k in reversed(self._compiled) if k[-1] == deepest and set(outputs) <= set(k)), None
                )
            if key is None:
                key = outputs if len(self._compiled) < self.MAX_COMPILED else tuple(range(deepest + 1))
                results = [self._results[f"hidden_{i}"] for i in key]
                cut = self.ov.Model(results, self.ov_model.get_parameters(), f"hidden_0_{deepest}")
                self._compiled[key] = self.core.compile_model(cut, "CPU", self.config)
                while len(self._compiled) > self.MAX_COMPILED:
                    self._compiled.pop(next(iter(self._compiled)))
            else:
                self._compiled[key] = self._compiled.pop(key)  # most recently used last
            return self._compiled[key], key

    @property
    def compiled_depths(self) -> list[int]:
        """The depths of the compiled models kept now (each the deepest hidden state it computes)."""
        with self._lock:
            return sorted({outputs[-1] for outputs in self._compiled})

    def inference_precision(self) -> str:
        """The precision OpenVINO actually runs the float parts in (read back from a compiled model)."""
        with self._lock:
            kept = next(iter(self._compiled.values()), None)
        compiled = kept or self.compiled(len(self._results) - 1)
        value = compiled.get_property("INFERENCE_PRECISION_HINT")
        return str(value.to_string()) if hasattr(value, "to_string") else str(value)

    def __call__(
        self, ids: Array, type_ids: Array, mask: Array, deepest: int, layers: AskedStates = None
    ) -> States:
        """Hidden states 0..deepest, each (batch, tokens, d) float32; None outside `layers` when given."""
        wanted = asked_states(deepest, layers)
        compiled, outputs = self.model_for(deepest, wanted)
        # A request per call: requests are not thread-safe, and the service calls from several threads.
        request = compiled.create_infer_request()
        request.infer(runtime_feed(ids, type_ids, mask, self.uses_token_types))
        arrays = (request.get_output_tensor(outputs.index(i)).data for i in wanted)
        return placed(deepest, wanted, (np.array(a, dtype=np.float32, copy=True) for a in arrays))

    @classmethod
    def build(
        cls,
        model: Callable[[], Any],
        family: Family,
        *,
        digest: str,
        precision: str,
        log: Callable[[str], None] | None = None,
        calibration: Callable[[Sequence[str]], list[Batch]] | None = None,
        calibration_texts: Sequence[str] = (),
    ) -> OpenVinoRunner:
        """Export (or reuse) the ONNX graph, quantize it for int8 (cached), and open it.

        int8_static fits its activation scales on `calibration(texts)` (the engine's padded batches) of
        `calibration_texts`, `SHORT_CALIBRATION` and the texts joined."""
        ov = require_openvino()
        if precision not in PRECISIONS:
            raise InvalidSpec(
                f"unknown OpenVINO precision {precision!r}; choose one of: {', '.join(PRECISIONS)}"
            )
        onnx_path = export_onnx(model, family, digest=digest, log=log)
        core = ov.Core()
        ir: Path | None = None
        if precision == "int8":
            ir = _quantized(core, onnx_path, log)
            ov_model = _read(core, ir, lambda: _quantized(core, onnx_path, log), log)
        elif precision == "int8_static":
            if calibration is None:
                raise InvalidSpec("int8_static needs the engine's calibration batches")
            # short texts, and the texts joined into one cut at the model's limit: the ranges of both ends
            texts = [*calibration_texts, *SHORT_CALIBRATION, " ".join(calibration_texts)]

            def static() -> Path:
                return _static_quantized(core, onnx_path, texts, calibration, family, log)

            ir = static()
            ov_model = _read(core, ir, static, log)
        else:
            ov_model = _read(core, onnx_path, None, log)  # ONNX Runtime's export too: never removed here
        runner = cls(ov_model, family.uses_token_types, precision, threads=cpu_threads())
        runner.path = ir
        return runner


def _read(
    core: Any, path: Path, made_again: Callable[[], Path] | None, log: Callable[[str], None] | None
) -> Any:
    """The cached graph at `path` read by OpenVINO; where the installed OpenVINO refuses it (a graph made
    by another version, in a cache shared between installs: `onnx.graph_refused`), made again
    (`onnx.refused_graph`) by `made_again` and read once more. Without `made_again` (the float32 ONNX
    export, which ONNX Runtime reads too) a refusal is one line and the file stays; a failure of this
    process's own (a file or memory limit) is one line too (`onnx.open_failure`)."""
    try:
        return core.read_model(str(path))
    except RuntimeError as exc:
        # OpenVINO says "Unable to read the model" alike for an IR of another version and for a file limit:
        # the IR's own version tells them apart, where bertscope can make it again
        version = _ir_version(path) if made_again is not None else None
        other = version is not None and version != OV_IR_VERSION
        if not other and not graph_refused(exc):
            raise open_failure(path, "OpenVINO", exc) from None
        if made_again is None:
            raise ModelLoadError(
                f"the installed OpenVINO cannot read the cached ONNX export {path} ({refusal_reason(exc)}); "
                "it is left for ONNX Runtime, which reads it too: use backend='onnxruntime', or upgrade "
                "OpenVINO: pip install -U 'bertscope[openvino]'"
            ) from None
        why = f"its IR version {version}, where this OpenVINO writes {OV_IR_VERSION}" if other else None
        refused_graph(path, "OpenVINO", exc, log, reason=why)
    assert made_again is not None
    again = made_again()
    try:
        return core.read_model(str(again))
    except RuntimeError as exc:
        if not graph_refused(exc):
            raise open_failure(again, "OpenVINO", exc) from None
        raise ModelLoadError(
            f"the installed OpenVINO cannot read the graph {again}, made just now ({refusal_reason(exc)}); "
            "reinstall it: pip install --force-reinstall 'bertscope[openvino]'"
        ) from None


# The IR version (`<net ... version="11">`) the installed OpenVINO (2026.4) writes: a constant, as reading
# it from a model this OpenVINO saves would cost a save at every open
OV_IR_VERSION = 11


def _ir_version(path: Path) -> int | None:
    """The IR version in the head of the OpenVINO xml at `path` (its `<net>` element's `version`); None for
    another file, one without it, or one this process cannot read."""
    if path.suffix != ".xml":
        return None
    try:
        with path.open("rb") as file:
            head = file.read(4096)  # the <net> element opens the file: a bounded read
    except OSError:  # the limit that failed the open fails this read too: not the graph's version
        return None
    found = re.search(rb'<net\b[^>]*?\bversion="(\d+)"', head)
    return int(found.group(1)) if found is not None else None


def _quantized(core: Any, onnx_path: Path, log: Callable[[str], None] | None) -> Path:
    """The cached int8-weight IR of the ONNX graph (NNCF weight compression); made now when missing."""
    path = openvino_cache_dir() / f"{onnx_path.stem}-int8-weights-ir{IR_FORMAT}.xml"

    def make(nncf: Any) -> Any:
        if log is not None:
            log(f"compressing the model's weights to int8 with NNCF -> {path}")
        source = core.read_model(str(onnx_path))
        with _quiet_nncf():
            return _compress_weights(nncf, source, keep=())

    return _cached_ir(path, make, log)


def _static_quantized(
    core: Any,
    onnx_path: Path,
    texts: Sequence[str],
    calibration: Callable[[Sequence[str]], list[Batch]],
    family: Family,
    log: Callable[[str], None] | None,
) -> Path:
    """The cached int8-static IR: NNCF's post-training int8 (SmoothQuant `STATIC_SMOOTH_QUANT`, scales
    fitted on `texts`) for every matmul but the feed-forward outputs (`FFN_OUTPUTS`), whose weights are
    compressed to int8 and whose activations OpenVINO scales as it runs; made now when missing."""
    batches = calibration(texts)
    # everything the IR is made from: the recipe and the very token ids (texts, tokenizer, truncation)
    key = hashlib.sha256(json.dumps([STATIC_SMOOTH_QUANT, FFN_OUTPUTS]).encode())
    for ids, type_ids, mask in batches:
        for array in (ids, type_ids, mask):
            key.update(np.ascontiguousarray(array, dtype=np.int64).tobytes() + str(array.shape).encode())
    path = openvino_cache_dir() / f"{onnx_path.stem}-int8-static-c{key.hexdigest()[:10]}-ir{IR_FORMAT}.xml"

    def make(nncf: Any) -> Any:
        source = core.read_model(str(onnx_path))
        matmuls = [op.get_friendly_name() for op in source.get_ops() if op.get_type_name() == "MatMul"]
        outputs = [name for name in matmuls if any(re.fullmatch(p, name) for p in FFN_OUTPUTS)]
        if not outputs:
            raise InvalidSpec(
                f"quantize='int8_static' on OpenVINO finds no feed-forward output layer in this "
                f"{family.name} graph (openvino.FFN_OUTPUTS names those it knows); use quantize='int8'"
            )
        if log is not None:
            log(f"quantizing the model to int8 with NNCF on {len(texts)} calibration texts -> {path}")
        token_types = "token_type_ids" in {port.get_any_name() for port in source.inputs}
        feeds = [runtime_feed(ids, type_ids, mask, token_types) for ids, type_ids, mask in batches]
        from nncf.quantization.advanced_parameters import (
            AdvancedQuantizationParameters,
            AdvancedSmoothQuantParameters,
        )

        smooth = AdvancedSmoothQuantParameters(matmul=STATIC_SMOOTH_QUANT)
        with _quiet_nncf():
            quantized = nncf.quantize(
                source, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(feeds),
                ignored_scope=nncf.IgnoredScope(names=outputs, validate=False),
                advanced_parameters=AdvancedQuantizationParameters(smooth_quant_alphas=smooth),
            )  # fmt: skip
            # only the feed-forward outputs left: the other matmuls' weights are quantized already
            return _compress_weights(nncf, quantized, keep=[n for n in matmuls if n not in outputs])

    return _cached_ir(path, make, log)


def _cached_ir(path: Path, make: Callable[[Any], Any], log: Callable[[str], None] | None) -> Path:
    """`path` when the IR there is whole (`_whole_ir`), else `make(nncf)` saved there now and recorded as
    the ONNX exports are; two processes make it once (the second waits and opens the first's)."""
    if _whole_ir(path, log):
        return path
    nncf = _require_nncf()
    writable_folder(path.parent)  # one line saying to set BERTSCOPE_CACHE, before NNCF's minutes of work
    with held_lock(path, f"quantization of {path.name}", log):
        if not _whole_ir(path, None):
            _save_ir(make(nncf), path)
    return path


def _whole_ir(path: Path, log: Callable[[str], None] | None) -> bool:
    """Whether the IR at `path` is whole: its bin as `onnx.cached_export` checks an export (the size, file
    identity and SHA-256 recorded beside it, in `path` with .json), its xml by the size and SHA-256
    recorded there too.

    An IR without its record is made again; one that disagrees with it (a disk error, a copy cut short, an
    edit) is also named in one line on `log`.
    """
    about = read_json_object(path.with_suffix(".json"))
    if not about or not path.is_file():
        return False
    weights = path.with_suffix(".bin")
    if about.get("file", weights.name) != weights.name:
        # another model's IR and record copied under this name (a record from before IRs named their
        # file is checked as it is: its name holds the model's content digest)
        if log is not None:
            log(f"the cached OpenVINO model {path} is recorded as {about['file']!r}, another model's; "
                "making it again")  # fmt: skip
        return False
    xml = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    if about.get("xml") == xml and cached_export(weights) is not None:
        if "file" not in about:  # an older record, whole: it names its file now, where the cache is writable
            with contextlib.suppress(OSError):  # a read-only cache is read all the same
                record_export(weights, {**read_record(weights), "file": weights.name})
        return True
    if log is not None:
        log(f"the cached OpenVINO model {path} does not match its recorded size and SHA-256; making it again")
    return False


def _save_ir(model: Any, path: Path) -> None:
    """Write `model` as OpenVINO IR at `path` (xml + bin), staged and renamed so readers never see half,
    then its record (`_whole_ir`), last: an IR without its record is never trusted."""
    import openvino as ov

    weights = path.with_suffix(".bin")
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".quantize-") as tmp:
        staged = Path(tmp) / "model.xml"
        # compress_to_fp16 would store the float weights left (embedding tables, LayerNorm) in float16.
        ov.save_model(model, str(staged), compress_to_fp16=False)
        os.replace(staged.with_suffix(".bin"), weights)
        os.replace(staged, path)
    # its own name too: the IR's name holds its export's, which holds the model's content digest
    record_export(weights, {
        "format": IR_FORMAT, "file": weights.name, **export_stamp(weights), "sha256": file_sha256(weights),
        "xml": {"bytes": path.stat().st_size, "sha256": file_sha256(path)},
    })  # fmt: skip


@contextlib.contextmanager
def _quiet_nncf() -> Iterator[None]:
    """NNCF's progress bars and advice off the caller's output while it runs."""
    import logging

    nncf_log = logging.getLogger("nncf")
    level = nncf_log.level
    nncf_log.setLevel(logging.ERROR)  # the caller said what runs
    try:
        # NNCF draws its progress bar on stdout, which may be the caller's data (`bertscope embed > x`);
        # the redirect is process-wide for the few seconds this takes (a first int8 load, then cached)
        with contextlib.ExitStack() as stack:
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
            shown = _nncf_bars_on_stderr()
            bars = sys.stderr if shown else stack.enter_context(open(os.devnull, "w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(bars))
            yield
    finally:
        nncf_log.setLevel(level)


def _nncf_bars_on_stderr() -> bool:
    """Whether NNCF's progress bars go to stderr: only a terminal, where they redraw in place; in a log
    (stderr redirected to a file) each would stay as a drawn bar, and our own lines say what runs."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty is not None and isatty())


def _compress_weights(nncf: Any, source: Any, keep: Sequence[str]) -> Any:
    """Every matmul's weights int8 (asymmetric, per output channel) but those named in `keep`; the
    embedding tables stay float32, so hidden state 0 is exact."""
    return nncf.compress_weights(
        source,
        mode=nncf.CompressWeightsMode.INT8_ASYM,
        ignored_scope=nncf.IgnoredScope(names=list(keep), types=["Gather"], validate=False),
    )
