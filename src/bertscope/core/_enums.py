"""String enums for every strategy name, converted once at the boundary with an error listing the choices."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any, TypeVar

from ..errors import InvalidSpec

E = TypeVar("E", bound="StrEnum")


class StrEnum(str, Enum):
    """A strategy name; `parse` accepts the enum or its string and names the valid ones on error."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> None:
        """`Pooling("x")`: an InvalidSpec (a ValueError, as Enum's own) that lists the valid names."""
        allowed = ", ".join(member.value for member in cls)
        hint = cls._named_elsewhere(str(value))
        raise InvalidSpec(f"{value!r} is not a valid {cls.__name__}; {hint}choose one of: {allowed}")

    @classmethod
    def _named_elsewhere(cls, value: str) -> str:
        """A hint ('...; ') for a value another library spells so and this enum refuses, or ''."""
        return ""

    @classmethod
    def parse(cls: type[E], value: E | str, *, what: str) -> E:
        """Return the member named `value`, or raise InvalidSpec listing the allowed names."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower().replace("-", "_"))
        except ValueError:
            allowed = ", ".join(member.value for member in cls)
            hint = cls._named_elsewhere(str(value).strip().lower())
            raise InvalidSpec(f"unknown {what} {value!r}; {hint}choose one of: {allowed}") from None


class Pooling(StrEnum):
    """How token vectors become one sentence vector."""

    CLS = "cls"
    POOLER = "pooler"
    MEAN = "mean"
    MAX = "max"
    MEAN_SQRT_LEN = "mean_sqrt_len"
    FIRST_LAST_AVG = "first_last_avg"
    AUTO = "auto"

    @classmethod
    def _missing_(cls, value: object) -> Any:
        """sentence-transformers' names read as ours: its `pooling_mode` (mean_sqrt_len_tokens) and its
        legacy `pooling_mode_*` keys' (cls_token, max_tokens, mean_tokens)."""
        if isinstance(value, str):
            ours = _ST_POOLING_NAMES.get(value.strip().lower().replace("-", "_"))
            if ours is not None:
                return cls(ours)
        return super()._missing_(value)


# sentence-transformers' pooling names for the poolings bertscope has (core/pooling.py's `st_mode` and
# core/st_settings.py's legacy keys; tests/test_load_names_audit5.py holds them to both).
_ST_POOLING_NAMES = {
    "mean_sqrt_len_tokens": "mean_sqrt_len",
    "cls_token": "cls",
    "max_tokens": "max",
    "mean_tokens": "mean",
}


class Combine(StrEnum):
    """How the vectors of several selected layers become one."""

    MEAN = "mean"
    SUM = "sum"
    CONCAT = "concat"
    # Each layer kept apart: one vector per layer (token and word levels store one column per layer).
    STACK = "stack"


def level_named(value: str, names: Iterable[str]) -> str | None:
    """The name of `names` that `value` spells, or None: a level's singular and plural are one name
    (`word` is `words`, `tokens` is `token`, `sentences` is `sentence`), case and spaces aside.

    The one place a level name is read: every level enum (`LevelName`: the corpus `Level`, the probe's
    and CKA's) and the command line's --level go through it."""
    given = value.strip().lower().replace("-", "_")
    for name in names:
        if given in (name, name[:-1] if name.endswith("s") else f"{name}s"):
            return name
    return None


class LevelName(StrEnum):
    """A level's name, read in its singular or plural (`level_named`); an unknown one lists the levels."""

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            found = level_named(value, [member.value for member in cls])
            if found is not None:
                return cls(found)
        return super()._missing_(value)


class Level(LevelName):
    """What one row of a corpus job's output is."""

    SENTENCE = "sentence"
    TOKENS = "tokens"
    WORDS = "words"
    CHUNKS = "chunks"


class Precision(StrEnum):
    """How stored vectors are written: float32 (exact) or float16 (half the bytes, ~1e-3 relative)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"


class LongText(StrEnum):
    """What happens to a text longer than the model's positions."""

    TRUNCATE = "truncate"
    WINDOW = "window"
    ERROR = "error"


class SubwordPooling(StrEnum):
    """How the word pieces of one word become one word vector (first_last concatenates, as flair does)."""

    FIRST = "first"
    LAST = "last"
    MEAN = "mean"
    FIRST_LAST = "first_last"


class Backend(StrEnum):
    """What runs the forward: torch, ONNX Runtime, OpenVINO (CPU), or auto (the fastest measured exact)."""

    AUTO = "auto"
    TORCH = "torch"
    ONNXRUNTIME = "onnxruntime"
    OPENVINO = "openvino"

    @classmethod
    def _named_elsewhere(cls, value: str) -> str:
        if value == "onnx":
            return "sentence-transformers' 'onnx' is bertscope's 'onnxruntime'; "
        return ""


class Mode(StrEnum):
    """exact: the backend, dtype and quantize asked (float32 torch by default); fast: the fastest measured."""

    EXACT = "exact"
    FAST = "fast"


class Quantize(StrEnum):
    """Weight quantization: none, or int8 (ONNX Runtime with BERT's outlier channels spread over extra
    int8 columns, or OpenVINO's int8 weights with activations scaled per group as it runs); `int8_fused`
    and `int8_static` are ONNX Runtime's other int8 graphs (backends/quantize.py), and `int8_static` on
    OpenVINO its calibrated scales (backends/openvino.py), named so that a model mode="fast" switched to
    one reloads as the same graph."""

    NONE = "none"
    INT8 = "int8"
    INT8_FUSED = "int8_fused"
    INT8_STATIC = "int8_static"

    @property
    def int8_scheme(self) -> str | None:
        """ONNX Runtime's int8 scheme this names (dynamic, fused or static), or None for no quantization."""
        if self is Quantize.NONE:
            return None
        return "dynamic" if self is Quantize.INT8 else self.value.removeprefix("int8_")


class DType(StrEnum):
    """The floating-point type the weights and activations run in."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"

    @classmethod
    def _named_elsewhere(cls, value: str) -> str:
        if value.replace("-", "_").startswith("int8"):  # quantization, not a floating-point type
            return f"int8 is quantize={value.replace('-', '_')!r}, not a dtype; "
        return ""

    @classmethod
    def is_float32(cls, value: object) -> bool:
        """Whether a dtype option names float32: a name as `parse` reads it (unknown: InvalidSpec), or a
        torch dtype (read by its name, so torch is not imported)."""
        if isinstance(value, str):
            return cls.parse(value, what="dtype") is cls.FLOAT32
        return str(value) == "torch.float32"


class Engine(StrEnum):
    """Where a corpus job runs: this process, or a Ray Data pool of actors."""

    LOCAL = "local"
    RAY = "ray"
