"""int8 for the ONNX Runtime backend: three schemes over the float32 export, measured against each other.

BERT's activations have a few outlier channels (after LayerNorm and after GELU, up to ~30 against a
median of ~2 in all-MiniLM-L6-v2); one such channel sets the int8 step of a whole tensor. Each Linear
spreads its input channels past `OUTLIER_FACTOR` x the median over several columns of its matmul, each
copy within that bound, beside its weight row repeated (backends/export.py; until GRAPH_FORMAT 5 they ran
in a float32 side matmul, slower), then the graph is quantized by one of `SCHEMES`:

- `dynamic` (`quantize="int8"`): per-channel int8 weights, activations quantized per tensor at run time
  (DynamicQuantizeMatMul); ONNX Runtime fuses what it can (GELU) when it opens the graph.
- `fused`: the float32 graph fused offline first by ONNX Runtime's transformer optimizer (`model_type=
  "bert"`, the config's heads and width: Attention and BiasGelu; not SkipLayerNormalization, whose CPU
  kernel is slower than the Add and LayerNormalization it replaces, onnx.DISABLED_FUSIONS), checked against
  the unfused graph on a padded sample (a family the optimizer misreads keeps its unfused graph), then
  quantized dynamically: Attention becomes QAttention. Only the feed-forward Linears are spread (a
  spread inside attention stops its fusion); each Attention's input outlier channels are instead divided down
  by a Mul and its Q/K/V weight rows multiplied up (`smooth_attention_inputs`), which took its held-out
  min cosine from 0.985 to 0.990. The quantizer's nodes otherwise sit where ONNX Runtime's own
  fusions look for MatMul and Add, so this is the only way an int8 graph gets fused attention.
- `static`: activation scales calibrated once over the calibration texts (MinMax, QDQ nodes that ONNX
  Runtime folds into its int8 kernels), no per-batch scan of the activations.

`mode="fast"` measures each (modes.py) and keeps the fastest with min cosine >= its bound on the
calibration and the held-out texts. On all-MiniLM-L6-v2, ONNX Runtime 1.32, a Zen 5 core (AVX-512
VNNI), `dynamic` and `fused` ran level on news sentences (946-976 and 927-969 texts/s) and `static`
slower (docs/fast-modes.md, bench/BENCHMARKS.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..core.texts_given import type_named
from ..errors import InvalidSpec

__all__ = [
    "SHORT_TEXTS",
    "FUSED_GELU",
    "GRAPH_FORMAT",
    "OUTLIER_FACTOR",
    "SCHEMES",
    "calibration_or_shipped",
    "calibration_texts",
    "check_calibration",
    "export_variant",
    "fuse",
    "heldout_texts",
    "op_counts",
    "quantize",
    "same_answers",
    "smooth_attention_inputs",
    "spreads_outliers",
]

OUTLIER_FACTOR = 3.0
SCHEMES = ("dynamic", "fused", "static")
# Bumped whenever an int8 graph changes (2: the bias added after the outlier side matmul; the schemes;
# 3: no SkipLayerNormalization in the fused graph; 4: the fused graph's attention inputs smoothed;
# 5: outlier channels spread over int8 columns, no float32 side matmul).
GRAPH_FORMAT = 5
FUSED_GELU = ("Gelu", "BiasGelu", "FastGelu", "QuickGelu")
# The fused graph's outputs may differ from the unfused graph's by float rounding only.
_FUSED_TOLERANCE = 1e-3


def calibration_texts() -> list[str]:
    """The sentences shipped with bertscope for calibrating int8 when none are given."""
    return _shipped("calibration.txt")


def calibration_or_shipped(calibration: Sequence[str] | None, *, required: bool = True) -> list[str]:
    """The caller's calibration texts, or the shipped ones when None; an empty list is refused where
    the texts are `required` (an int8 fitted on them), and so is anything but a list of str."""
    texts = check_calibration(calibration) if calibration is not None else calibration_texts()
    if required and not texts:
        raise InvalidSpec("calibration texts are empty; give some sentences of your corpus or None")
    return texts


def check_calibration(calibration: Any) -> list[str]:
    """`calibration` as a list of str, or InvalidSpec: a str or bytes (it would be read one character at a
    time), something not iterable, or an item that is not a str, named by its index."""
    if isinstance(calibration, str | bytes | bytearray):
        raise InvalidSpec(
            f"calibration={_short(calibration)} is one {type(calibration).__name__}; give a list of "
            "sentences, such as calibration=[text]"
        )
    try:
        texts = list(calibration)
    except TypeError:
        raise InvalidSpec(
            f"calibration={_short(calibration)} is not a list of sentences; give a list of str, or None"
        ) from None
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidSpec(
                f"calibration[{index}]={_short(text)} is {type_named(text)}, not a str; every "
                "calibration text must be a str"
            )
    return texts


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else f"{shown[:37]}..."


# Short texts held out of every int8 calibration (openvino.py's SHORT_CALIBRATION included), where int8
# drifts most: in a text of a few tokens the [CLS] and [SEP] rows dominate each activation's range (the
# bundled model's int8 reads its lowest sentence cosine on "No.": 0.9878 on the Zen 5 of docs/verify.md).
# mode="fast" reads each way's drift on them beside the held-out sentences; `verify` measures them too.
SHORT_TEXTS = (
    "Ok.", "Hello!", "Me too.", "lol", "Thank you.", "Where?", "Of course.", "Good luck!", "No.",
    "Well done, team.",
)  # fmt: skip


def heldout_texts() -> list[str]:
    """Shipped sentences that no int8 export is calibrated on: int8's drift is also measured on these."""
    return _shipped("heldout.txt")


def _shipped(name: str) -> list[str]:
    text = resources.files("bertscope").joinpath(name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def export_variant(quantize: str | None, calibration: Sequence[str], scheme: str = "dynamic") -> str:
    """`float32`, or `int8-<scheme>-g<GRAPH_FORMAT>-o<outlier factor>-c<calibration texts' hash>`.

    The name says everything that makes the int8 graph what it is, so an export made another way (an
    earlier bertscope's graph, another scheme, other texts) is never mistaken for this one.
    """
    if (quantize or "none") != "int8":
        return "float32"
    # the texts as a JSON list, as runtimes.calibration_digest: texts joined by newlines collide
    calib_hash = hashlib.sha256(json.dumps(list(calibration)).encode()).hexdigest()[:10]
    return f"int8-{scheme}-g{GRAPH_FORMAT}-o{OUTLIER_FACTOR:g}-c{calib_hash}"


def spreads_outliers(linear_name: str, scheme: str) -> bool:
    """Whether a Linear spreads its outlier input channels over int8 columns: every one, but in the
    `fused` graph only those outside attention (a spread there stops the attention fusion)."""
    return scheme != "fused" or ("attention" not in linear_name and "attn" not in linear_name)


def op_counts(model: Any) -> Counter[str]:
    """Op type -> how many nodes of it, for an ONNX model or the path of one."""
    import onnx

    proto = onnx.load(str(model), load_external_data=False) if isinstance(model, str | Path) else model
    return Counter(node.op_type for node in proto.graph.node)


def fuse(source: Path, target: Path, *, num_heads: int, hidden_size: int) -> bool:
    """Write `source` fused by ONNX Runtime's transformer optimizer to `target`; False (and `target`
    unwritten) when the optimizer fails or its graph answers differently from `source`."""
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    options = FusionOptions("bert")
    # The embedding fusion assumes BERT's positions (0..n-1) and right padding; other families differ
    # and the embedding is a small share of the time, so it stays as exported.
    options.enable_embed_layer_norm = False
    # SkipLayerNormalization's CPU kernel is slower than the Add and LayerNormalization it replaces
    # (onnx.DISABLED_FUSIONS), so the residual Adds and LayerNorms stay as they are.
    options.enable_skip_layer_norm = False
    options.enable_bias_skip_layer_norm = False
    try:
        with _quiet():
            fused = optimizer.optimize_model(
                str(source), model_type="bert", num_heads=num_heads, hidden_size=hidden_size,
                optimization_options=options, opt_level=0,
            )  # fmt: skip
            fused.save_model_to_file(str(target))
    except Exception:  # the optimizer raises many types; all mean "keep the graph as exported"
        return False
    if not same_answers(source, target):
        target.unlink(missing_ok=True)
        return False
    return True


def smooth_attention_inputs(source: Path, target: Path, feeds: Sequence[dict[str, np.ndarray]]) -> int:
    """Write `source` to `target` with each fused Attention's input channels past `OUTLIER_FACTOR` x the
    median channel's max (over `feeds`' real tokens) divided down to that bound by a Mul, and the same rows
    of its Q/K/V weight multiplied up by as much: the same product, but no LayerNorm outlier channel sets
    the int8 step of the whole input when Attention becomes QAttention (a split there would stop the
    fusion). Returns how many channels were scaled; 0 leaves `target` unwritten."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    attentions = [node for node in graph.node if node.op_type == "Attention"]
    inputs = list(dict.fromkeys(node.input[0] for node in attentions))
    present = {output.name for output in graph.output}
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in inputs if n not in present)
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    maxima = dict.fromkeys(inputs, 0.0)
    for feed in feeds:
        real = feed["attention_mask"].astype(bool)
        if not real.any():
            continue
        values = session.run(inputs, {k: v for k, v in feed.items() if k in names})
        for name, value in zip(inputs, values, strict=True):
            maxima[name] = np.maximum(maxima[name], np.abs(value[real]).max(axis=0))
    weights = {init.name: init for init in graph.initializer}
    readers = Counter(name for node in graph.node for name in node.input)
    scaled, nodes = 0, []
    for node in graph.node:
        if node.op_type == "Attention" and node.input[1] in weights:
            seen = np.asarray(maxima[node.input[0]], dtype=np.float32)
            bound = OUTLIER_FACTOR * float(np.median(seen))
            # a median of 0 (an input that is all zeros) leaves the node as it is
            scale = np.where(seen > bound, seen / max(bound, 1e-30), 1.0).astype(np.float32)
            if bound > 0 and (scale > 1).any():
                weight = numpy_helper.to_array(weights[node.input[1]]) * scale[:, None]
                if readers[node.input[1]] > 1:  # a weight another node reads too gets its own scaled copy
                    copy = f"{node.name}_smooth_weight"
                    graph.initializer.append(numpy_helper.from_array(weight, copy))
                    node.input[1] = copy
                else:
                    weights[node.input[1]].CopyFrom(numpy_helper.from_array(weight, node.input[1]))
                divide = f"{node.name}_smooth"
                graph.initializer.append(numpy_helper.from_array((1 / scale).astype(np.float32), divide))
                nodes.append(
                    onnx.helper.make_node("Mul", [node.input[0], divide], [f"{divide}_out"], name=divide)
                )
                node.input[0] = f"{divide}_out"
                scaled += int((scale > 1).sum())
        nodes.append(node)
    if not scaled:
        return 0
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(target))
    return scaled


def same_answers(first: Path, second: Path) -> bool:
    """Whether two graphs give the same hidden states (within `_FUSED_TOLERANCE`) on a padded sample."""
    import onnxruntime as ort

    sessions = [ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (first, second)]
    names = {i.name for i in sessions[0].get_inputs()}
    ids = (np.arange(24, dtype=np.int64).reshape(2, 12) * 37) % 90 + 5  # inside every vocabulary, tiny too
    mask = np.ones_like(ids)
    mask[1, 8:] = 0  # a padded row: the fused attention must read the mask as the unfused one does
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    feed = {k: v for k, v in feed.items() if k in names}
    outputs = [o.name for o in sessions[0].get_outputs()]
    try:
        answers = [s.run(outputs, feed) for s in sessions]
    except Exception:  # a graph that does not run is not the same graph
        return False
    keep = mask.astype(bool)  # padded positions are free to differ
    return all(np.abs(a[keep] - b[keep]).max() <= _FUSED_TOLERANCE for a, b in zip(*answers, strict=True))


def quantize(source: Path, target: Path, *, scheme: str, feeds: Sequence[dict[str, np.ndarray]] = ()) -> None:
    """int8 `source` -> `target` by `scheme` (`dynamic` and `fused`: scales per batch; `static`: scales
    from `feeds`): every matmul by a weight, and the fused Attention."""
    import onnx
    from onnxruntime.quantization import QuantType

    model = onnx.load(str(source))
    weights = {init.name for init in model.graph.initializer}
    # Matmuls by a weight (not attention's activation x activation ones).
    targets = [
        n.name for n in model.graph.node
        if (n.op_type == "MatMul" and n.input[1] in weights)
        or (n.op_type == "Attention" and scheme != "static")
    ]  # fmt: skip
    common: dict[str, Any] = {
        "weight_type": QuantType.QInt8,
        "per_channel": True,
        "nodes_to_quantize": targets,
        # contrib ops (Attention, SkipLayerNormalization) have no ONNX type inference: their outputs are float
        "extra_options": {"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
    }
    with _quiet():
        if scheme != "static":
            from onnxruntime.quantization import quantize_dynamic

            quantize_dynamic(str(source), str(target), op_types_to_quantize=["MatMul", "Attention"], **common)
        else:
            _quantize_static(model, target, feeds, common)


def _quantize_static(model: Any, target: Path, feeds: Sequence[dict[str, np.ndarray]], common: dict) -> None:
    """Calibrated QDQ int8 of every MatMul (MinMax over `feeds`), activations uint8, weights int8."""
    import tempfile

    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    names = {i.name for i in model.graph.input}

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{k: v for k, v in feed.items() if k in names} for feed in feeds])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    # The calibrator must know every MatMul input is float; the contrib ops' outputs need symbolic shapes.
    typed = SymbolicShapeInference.infer_shapes(model, auto_merge=True)
    # Only the matmuls' inputs get fixed scales: their outputs (before GELU, the residual) hold the outliers.
    options = {**common["extra_options"], "OpTypesToExcludeOutputQuantization": ["MatMul"]}
    common = {**common, "extra_options": options}
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".static-") as tmp:
        staged = Path(tmp) / "typed.onnx"
        onnx.save(typed, str(staged))
        quantize_static(
            str(staged), str(target), Reader(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
            activation_type=QuantType.QUInt8, calibrate_method=CalibrationMethod.MinMax,
            calibration_providers=["CPUExecutionProvider"], **common,
        )  # fmt: skip


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence the optimizer's and quantizer's advice (root logger, warnings) for the duration."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)
