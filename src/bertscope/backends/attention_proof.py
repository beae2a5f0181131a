"""An attention graph's missed proof, recorded so that later processes need not prove it again.

backends/export.py writes the attention graph only once its probabilities are the module's within
`ATTENTION_GATE`; a graph that misses is thrown away. Without a record every new process exported and
proved it again (~4 s for the bundled model on an AMX Xeon, where it reads 8.5e-6) to reach the same
answer: read the attentions from the PyTorch module. So the miss is kept under the graph's own name
(`<family>-<digest>-attentions-v<format>.refused.json`: the same model content and export format) with
the runtime measurements ($BERTSCOPE_CACHE/fast: `bertscope cache` lists it as one, and `cache clear`
removes it with the model's exports), since it is one: it holds only where the proof would read the same
again, on this CPU (its kernels round differently, so the same model may pass on another) with the same
torch, onnxruntime and bertscope. Written atomically; a cache that takes no file only costs the proof
again. Imports no torch.
"""

from __future__ import annotations

import contextlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

from ..core.cpu import cpu_name, machine_key
from ..core.folder import read_json_object
from .recorded import cache_root

__all__ = ["missed_message", "missed_proof", "record_missed_proof", "refusal_path"]


def refusal_path(graph: Path) -> Path:
    """Where the missed proof of the attention graph `graph` is kept: with the runtime measurements, named
    as the graph is, `.refused.json` for its `.onnx`."""
    return cache_root() / "fast" / f"{graph.stem}.refused.json"


def missed_message(family: str, gap: float, gate: float) -> str:
    """The one line that says an attention graph missed the module's by `gap` (more than `gate`)."""
    return (
        f"this {family} model's exported attentions differ from its module's by {gap:.2g} on this CPU "
        f"(more than {gate:g})"
    )


def record_missed_proof(graph: Path, gap: float, gate: float) -> None:
    """Keep, beside `graph`, that its proof read `gap` (more than `gate`) here, atomically; where the cache
    takes no file, nothing is kept (the next process proves it again)."""
    about = {"max_abs": gap, "gate": gate, "cpu": cpu_name(), **_holds_for()}
    path = refusal_path(graph)
    staged = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(json.dumps(about, indent=1), encoding="utf-8")
        os.replace(staged, path)
    except OSError:
        with contextlib.suppress(OSError):
            staged.unlink(missing_ok=True)


def missed_proof(graph: Path) -> dict[str, Any] | None:
    """The record of `graph`'s missed proof ({"max_abs", "gate", ...}) where it holds here (this CPU, these
    torch, onnxruntime and bertscope versions); None where there is none, or it no longer holds."""
    about = read_json_object(refusal_path(graph))
    if not about:
        return None
    holds = all(about.get(key) == value for key, value in _holds_for().items())
    numbers = all(isinstance(about.get(key), (int, float)) for key in ("max_abs", "gate"))
    return about if holds and numbers else None


def _holds_for() -> dict[str, str | None]:
    """What the proof's figure depends on besides the model and export format (in the graph's name)."""
    from ..core.version import __version__

    return {
        "machine": machine_key(),
        "torch": _installed("torch"),
        "onnxruntime": _installed("onnxruntime"),
        "bertscope": str(__version__),
    }


def _installed(package: str) -> str | None:
    """The installed version of `package` (read from its metadata: nothing is imported), or None."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
