"""The command line: `bertscope info | tokens | static | anatomy | embed | similarity | bench | ...`.

Data goes to stdout, progress and warnings to stderr; `--json` for machines, tables for people.
Errors are one line (no traceback unless --debug).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from .._enums import Backend, DType, Engine, Quantize, StrEnum
from ..errors import InvalidInput

app = typer.Typer(
    help="See and use every embedding of a BERT-family model (default: the bundled all-MiniLM-L6-v2).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="markdown",
)
# Piped output keeps whole columns instead of wrapping to a guessed 80-character terminal.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True)
_state = {"debug": os.environ.get("BERTSCOPE_DEBUG", "") not in ("", "0")}

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", envvar="BERTSCOPE_MODEL", help="Model folder or hub id (default: bundled)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _enum_option(kind: type[StrEnum], what: str) -> Callable[[str], StrEnum]:
    """A typer callback that turns the option's text into `kind` once, so a bad value fails first."""

    def parse(value: str) -> StrEnum:
        return kind.parse(value, what=what)

    return parse


DeviceOpt = Annotated[str, typer.Option("--device", help="auto, cpu, cuda or cuda:N.")]
DtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype", callback=_enum_option(DType, "dtype"), help="float32 (exact), bfloat16, float16 (CUDA)."
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        "--backend",
        callback=_enum_option(Backend, "backend"),
        help="auto (torch; onnxruntime for int8), torch, or onnxruntime (CPU).",
    ),
]
QuantizeOpt = Annotated[
    str,
    typer.Option(
        "--quantize",
        callback=_enum_option(Quantize, "quantize"),
        help="none, or int8 (ONNX Runtime, CPU; cosine ~0.998 to float32, ~0.985 on 1-3 token texts).",
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        callback=_enum_option(Engine, "engine"),
        help="local, or ray (Ray Data; -o names a folder of shards).",
    ),
]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", min=1, help="Torch CPU threads (default: all).")]
LayersOpt = Annotated[
    str | None, typer.Option("--layers", "-l", help="Layer spec: -1, -2, 0, 6, -4:, 1:4, 0,6, all.")
]
CombineOpt = Annotated[
    str,
    typer.Option(
        "--combine",
        help="How several layers combine: mean, sum, concat, stack (tokens/words: one per layer).",
    ),
]
LongOpt = Annotated[
    str, typer.Option("--long", help="Texts over the model's limit: truncate, window, error.")
]
PoolingOpt = Annotated[
    str, typer.Option("--pooling", "-p", help="cls, pooler, mean, max, mean_sqrt_len, first_last_avg, auto.")
]
# Help text is markdown: code spans keep `<s>` from being read as an HTML tag and dropped.
MaskSpecialOpt = Annotated[
    bool, typer.Option("--mask-special", help="Leave `[CLS]`/`[SEP]` (`<s>`, `</s>`) out of pooling.")
]
StrideOpt = Annotated[
    int | None, typer.Option("--stride", help="Window step in tokens (default: half a window).")
]


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks on errors.")] = False,
) -> None:
    """See and use every embedding of a BERT-family model."""
    if debug:
        _state["debug"] = True


def is_debug() -> bool:
    """Whether --debug (or BERTSCOPE_DEBUG) asked for full tracebacks."""
    return _state["debug"]


def load_model(
    model: str | None,
    *,
    device: str = "auto",
    dtype: DType | str = DType.FLOAT32,
    backend: Backend | str = Backend.AUTO,
    quantize: Quantize | str = Quantize.NONE,
    threads: int | None = None,
) -> Any:
    """Load the model a command asked for, with the shared --device/--dtype/--backend/--quantize/--threads."""
    from ..model import load

    return load(model, device=device, dtype=dtype, threads=threads, backend=backend, quantize=quantize)


def emit_json(data: Any) -> None:
    """Write one JSON document on stdout (NumPy arrays and paths included)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=_jsonable) + "\n")


def _jsonable(value: Any) -> Any:
    import numpy as np  # already loaded wherever a NumPy value reaches here

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def read_texts(texts: list[str] | None, input_path: str | None) -> list[str]:
    """Texts from arguments or from -i FILE (one per line, - for stdin), never both."""
    if texts and input_path:
        raise InvalidInput("give texts as arguments or with -i/--input, not both")
    if input_path is None:
        if not texts:
            raise InvalidInput(
                "no texts given: pass them as arguments, or -i FILE (one per line, - for stdin)"
            )
        return texts
    return list(read_lines(input_path))


def read_lines(input_path: str) -> Iterator[str]:
    """The non-empty lines of a file (or stdin for -), read exactly as corpus jobs read a .txt."""
    from ..io.readers import read_lines as read_text_lines

    return read_text_lines(input_path)
