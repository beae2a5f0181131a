"""The ONNX Runtime backend: the model exported once (cached by its files' content), in float32 or int8.

This module imports no torch: a process whose runtime is ONNX Runtime (or OpenVINO) opens the cached
export and answers without it. Making an export needs the PyTorch module (backends/export.py), once per
model content: `bertscope cache` lists the exports, `bertscope cache --clear` removes them.

float32 runs the same graph as torch (eager attention, every hidden state an output) and matches it to
1e-6. int8 (backends/quantize.py) is that graph with each Linear's outlier input channels spread over
int8 columns, then quantized by one of three schemes: `dynamic` (activation scales per batch; what
`quantize="int8"` runs), `fused` (attention and bias-GELU fused by ONNX Runtime's transformer optimizer
first) or `static` (scales calibrated once). Every session leaves out `DISABLED_FUSIONS`. Model digests
live in backends/digest.py. The attention graph (`attentions=True`: every layer's attention probabilities
as outputs, for attention.py) is kept beside the export in the same cache, made and checked alike, and so
is each graph cut at a layer for early stop (`cached_cut`; the cutting in backends/cut_cache.py), made
once from the export's file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import Backend, Quantize
from ..core.cpu import cpu_threads
from ..core.encoder import cpu_token_budget
from ..core.engine import Array, AskedStates, States, asked_states, placed
from ..core.families import Family
from ..core.fingerprint_facts import file_identity, file_sha256
from ..core.folder import read_json_object
from ..core.loading import device_kind
from ..errors import BackendUnavailable, InvalidSpec, ModelLoadError
from .cut_cache import cut_graph, cut_path, write_cut
from .digest import content_digest, known_folders
from .quantize import OUTLIER_FACTOR, SCHEMES, calibration_or_shipped, calibration_texts, export_variant

if TYPE_CHECKING:
    import torch

__all__ = [
    "ATTENTIONS",
    "BACKENDS",
    "EXPORT_FORMAT",
    "OUTLIER_FACTOR",
    "QUANTIZE",
    "WRITE_PROBE",
    "OnnxRunner",
    "cache_dir",
    "cached_cut",
    "cached_export",
    "content_digest",
    "cut_graph",
    "cut_path",
    "DISABLED_FUSIONS",
    "encoder_digest",
    "known_folders",
    "export_onnx",
    "export_path",
    "held_lock",
    "calibration_texts",
    "model_hash",
    "open_session",
    "opened_graph",
    "require_onnxruntime",
    "graph_refused",
    "open_failure",
    "refusal_reason",
    "refused_graph",
    "resolve_backend",
    "runtime_refusals",
    "writable_folder",
]

BACKENDS = tuple(member.value for member in Backend)
QUANTIZE = tuple(member.value for member in Quantize)
# ONNX Runtime's own fusions left out of every session. SkipLayerNormFusion: its CPU kernel ran slower
# than the Add and LayerNormalization it replaces (ONNX Runtime 1.32, Zen 5: the int8 graphs ran 1.10-1.15x
# (dynamic) and 1.19-1.27x (fused) faster without it, bench/ort_fusions.py); the float32 graphs of the
# families tested never receive it.
DISABLED_FUSIONS = ("SkipLayerNormFusion",)
# Bumped whenever the exported graph or its cache key changes, so stale cache files are never reused
# (2: keyed by the model folder's content, with the export's size and SHA-256 beside it; the int8
# variants' names also say their scheme and that they are fused, quantize.export_variant).
EXPORT_FORMAT = 2
# The cache name's variant of the attention graph (outputs attentions_1..attentions_L, float32)
ATTENTIONS = "attentions"
# Why a model opened light loads its PyTorch module to make the attention graph (core/loading.py's notice)
ATTENTION_EXPORT = "for the attention graph's first export, made once (the graph then gives the weights)"


def resolve_backend(
    backend: Backend | str, quantize: Quantize | str | None, dtype: torch.dtype, device: torch.device | str
) -> Backend:
    """The backend to run: `auto` is torch, or onnxruntime when int8 is asked; refuses what cannot run."""
    import torch

    asked = Backend.parse(backend, what="backend")
    mode = Quantize.parse(quantize or Quantize.NONE, what="quantize")
    if asked is Backend.AUTO:
        chosen = Backend.ONNXRUNTIME if mode.int8_scheme else Backend.TORCH
    else:
        chosen = asked
    if mode.int8_scheme and chosen is Backend.TORCH:
        raise InvalidSpec(
            f"quantize='{mode.value}' runs on ONNX Runtime: torch's dynamic int8 drops to a min cosine of "
            "0.78 on BERT's outlier activations; use backend='onnxruntime' (or 'auto')"
        )
    if chosen == "onnxruntime":
        kind = device_kind(device)
        if kind != "cpu":
            raise InvalidSpec(
                f"backend='onnxruntime' runs on the CPU; on {kind} use backend='torch' "
                "(with dtype='float16' or 'bfloat16' for speed)"
            )
        if dtype is not torch.float32 and mode.int8_scheme:
            # not "use backend='torch'": torch refuses int8 (above)
            raise InvalidSpec(f"quantize='{mode.value}' keeps its float parts in float32; leave dtype out")
        if dtype is not torch.float32:
            # OpenVINO runs bfloat16 too (on the CPU); float16 only torch
            others = "backend='torch' or 'openvino'" if dtype is torch.bfloat16 else "backend='torch'"
            raise InvalidSpec(
                "backend='onnxruntime' runs float32 (or int8 with quantize='int8'); "
                f"dtype={str(dtype).removeprefix('torch.')!r} needs {others}"
            )
    return chosen


def require_onnxruntime() -> Any:
    """The onnxruntime module, or a clear error naming the extra that installs it."""
    try:  # onnx itself (84 ms to import) is needed to make an export, not to run one
        import onnxruntime
    except ImportError as exc:
        raise BackendUnavailable(
            "backend='onnxruntime' needs onnxruntime: pip install 'bertscope[onnx]'"
        ) from exc
    return onnxruntime


def cache_dir() -> Path:
    """Where exported models are kept: $BERTSCOPE_CACHE, else $XDG_CACHE_HOME/bertscope, else ~/.cache.

    Every use of the cache (exports, OpenVINO models, measurements, `bertscope cache`) finds it here, so a
    cache that names a file is refused in one line (InvalidSpec, a setting to fix: no load falls back to
    torch over it), the same from every command."""
    from .recorded import cache_root

    root = cache_root()
    if root.exists() and not root.is_dir():
        where = f"BERTSCOPE_CACHE={root}" if os.environ.get("BERTSCOPE_CACHE") else f"the cache folder {root}"
        raise InvalidSpec(
            f"{where} points at a file, not a folder: set BERTSCOPE_CACHE to a folder for bertscope's cache "
            "(its exports and measurements)"
        )
    return root / "onnx"


def runtime_feed(ids: Array, type_ids: Array, mask: Array, token_types: bool) -> dict[str, Array]:
    """The exported graph's inputs (int64), token types only where the graph reads them."""
    feed = {
        "input_ids": ids.astype(np.int64, copy=False),
        "attention_mask": mask.astype(np.int64, copy=False),
    }
    if token_types:
        feed["token_type_ids"] = type_ids.astype(np.int64, copy=False)
    return feed


class OnnxRunner:
    """Runs the exported model on ONNX Runtime; called by the Engine in place of the torch forward.

    Early stop: ONNX Runtime runs a whole graph whatever outputs are asked for, so a forward that stops
    before the last layer runs a graph cut at that layer (the nodes hidden_0..hidden_k need, extracted
    with onnx's `Extractor` once per export and depth and kept beside the export, `cached_cut`;
    `MAX_CUT_SESSIONS` open): layer 1 of 6 costs about a sixth of the whole, with the same kernels, so the
    same numbers. Each graph opens on first use: a process that only stops early never opens the whole
    one, so it holds the cut graph's weights alone (a second open graph holds its own copy of its weights).

    Memory: ONNX Runtime's CPU arena grows to the largest batch it has run and keeps it: 64 texts of ~250
    tokens (batches of 16 x 256) kept +170 MiB on the bundled model for the process's life, +250 after a
    second call. The first run within `arena_tokens` padded tokens after runs over it shrinks the arena.
    """

    MAX_CUT_SESSIONS = 2
    # Frees the arena's unused chunks at the end of the run given it (ONNX Runtime's run option)
    SHRINK_ARENA = ("memory.enable_memory_arena_shrinkage", "cpu:0")

    def __init__(
        self, path: Path, uses_token_types: bool, n_outputs: int, *, log: Callable[[str], None] | None = None
    ) -> None:
        self.ort = require_onnxruntime()
        self.path = path
        self._whole: Any = None  # the whole graph's session, opened on first use (`session`)
        self._inputs: list[str] | None = None  # the graph's inputs, read from the first session opened
        self._token_types = uses_token_types
        self.output_names = [f"hidden_{i}" for i in range(n_outputs)]
        self.log = log  # where a damaged cached cut graph is named before it is made again
        self._cut: dict[int, Any] = {}  # deepest layer -> session of the graph cut there (most recent last)
        self._lock = threading.Lock()
        # batches up to the engine's default CPU token budget keep their arena: they are the common ones
        self.arena_tokens = cpu_token_budget(cpu_threads())
        self._shrink = self.ort.RunOptions()
        self._shrink.add_run_config_entry(*self.SHRINK_ARENA)
        # the sessions (by id: the full graph's and each cut graph's, each with an arena of its own) that a
        # run over arena_tokens grew since they last shrank (threads that race on it cost at most one shrink
        # too many or too few, never a wrong answer)
        self._grew: set[int] = set()
        # makes the export at `path` again (float32, `build`'s): None where this runner cannot
        self.remake: Callable[[], Path] | None = None
        self._remaking = threading.Lock()  # apart from _lock, which `session` holds when it asks

    def _export(self) -> Path:
        """The export's file, exported again where it left the cache after this runner opened (`bertscope
        cache --clear` under a running process or server), as a new process would export it."""
        if self.path.is_file():
            return self.path
        with self._remaking:  # two requests that find it gone: one exports, the other finds it made
            if self.path.is_file():
                return self.path
            if self.remake is None:  # an int8 graph: its calibration runs the forward this runner answers
                raise ModelLoadError(
                    f"the ONNX graph {self.path} was removed from the cache after this model loaded "
                    "(bertscope cache --clear?); load the model again (restart the server) to make it anew"
                )
            if self.log is not None:
                self.log(
                    f"the ONNX export {self.path} left the cache after this model loaded; exporting again"
                )
            self.path = self.remake()
            return self.path

    def _session(self, model: str | bytes) -> Any:
        session = open_session(model)
        if self._inputs is None:
            # The exporter drops inputs the graph never reads (DeBERTa-v2 without segment embeddings); a
            # cut graph keeps every input of the whole one.
            self._inputs = [i.name for i in session.get_inputs()]
        return session

    @property
    def session(self) -> Any:
        """The whole graph's session (every hidden state), opened on first use."""
        if self._whole is None:
            with self._lock:
                if self._whole is None:
                    again = self._exported_again if self.remake is not None else None
                    self._whole = self._opened(self._export(), again, find=self._export)
        return self._whole

    @session.setter
    def session(self, session: Any) -> None:
        self._whole = session

    def _opened(
        self, path: Path, made_again: Callable[[], Path] | None, source: Path | None = None, *,
        find: Callable[[], Path],
    ) -> Any:  # fmt: skip
        """A session on the cached graph at `path` (`opened_graph`), this runner's inputs read from it."""
        return opened_graph(
            path, lambda graph: self._session(str(graph)), runtime_refusals(self.ort), made_again,
            find=find, log=self.log, source=source,
        )  # fmt: skip

    def _exported_again(self) -> Path:
        """The float32 export made again (removed by `refused_graph`), where this runner can make it."""
        assert self.remake is not None
        with self._remaking:
            self.path = self.remake()
            return self.path

    @property
    def input_names(self) -> list[str]:
        """The graph's inputs (the whole graph's and every cut graph's)."""
        if self._inputs is None:
            _ = self.session  # opening it reads them
        assert self._inputs is not None
        return self._inputs

    @property
    def uses_token_types(self) -> bool:
        """Whether the graph reads token type ids (the family's embedding has them, the export kept them)."""
        return self._token_types and "token_type_ids" in self.input_names

    def session_for(self, deepest: int) -> Any:
        """The session that computes hidden states 0..deepest and nothing past them; or the whole graph's,
        where it is open and the cut would leave out only its last layer (`whole_serves`)."""
        if self.whole_serves(deepest):
            return self.session
        with self._lock:
            if deepest not in self._cut:
                self._cut[deepest] = self._cut_session(deepest)
                while len(self._cut) > self.MAX_CUT_SESSIONS:
                    self._cut.pop(next(iter(self._cut)))
            else:
                self._cut[deepest] = self._cut.pop(deepest)  # most recently used last
            return self._cut[deepest]

    def whole_serves(self, deepest: int) -> bool:
        """Whether a forward to `deepest` runs the whole graph: the last layer, or the one before it where
        the whole graph is open and no cut there is. A cut that leaves out one layer of L saves about 1/L of
        the forward and holds a second copy of most weights: +84 MB in a process that had run the bundled
        model's last layer, to save 13-17% of the forward (bench/BENCHMARKS.md, "Early stop's cut graph
        cached beside the export"). A process with nothing open opens the cut, the smaller graph.
        """
        last = len(self.output_names) - 1
        if deepest >= last:
            return True
        return deepest == last - 1 and self._whole is not None and deepest not in self._cut

    def _cut_session(self, deepest: int) -> Any:
        """A session on the graph cut after hidden state `deepest`: the cached cut, or (where the cache takes
        no file) one cut in memory now."""
        outputs = self.output_names[: deepest + 1]
        export = self._export()
        path = cached_cut(export, outputs, self._inputs, log=self.log)
        if path is not None:

            def find() -> Path:  # gone between check and open: cut again from the export, nothing removed
                return self._cut_file(self._export(), outputs)

            if self.remake is None:  # int8: a refused cut is refused with its export (`_opened`)
                return self._opened(path, None, source=export, find=find)
            return self._opened(path, lambda: self._cut_again(outputs), find=find)
        return self._session(cut_graph(export, self._inputs, outputs).SerializeToString())

    def _cut_again(self, outputs: Sequence[str]) -> Path:
        """A cut graph the runtime refused (`graph_refused`: its opset, IR version or an operator, which it
        keeps from its export, so the export is refused too), cut again from the float32 export made
        again."""
        export = self._export()
        with contextlib.suppress(OSError):  # a read-only cache: cut below, refused in one line if so
            export.unlink(missing_ok=True)
            export = self._exported_again()
        return self._cut_file(export, outputs)

    def _cut_file(self, export: Path, outputs: Sequence[str]) -> Path:
        """The cached cut of `export` to `outputs`, made now where missing (`cached_cut`)."""
        path = cached_cut(export, outputs, self._inputs, log=self.log)
        if path is None:  # the cache takes no file now: a cut in memory has no path to open
            raise ModelLoadError(
                f"the cut graph of {export} could not be made again in the cache; run `bertscope cache "
                "--clear` or set BERTSCOPE_CACHE to a writable folder"
            )
        return path

    def __call__(
        self, ids: Array, type_ids: Array, mask: Array, deepest: int, layers: AskedStates = None
    ) -> States:
        """Hidden states 0..deepest, each (batch, tokens, d) float32; None outside `layers` when given."""
        wanted = asked_states(deepest, layers)
        session = self.session_for(deepest)  # opened first: the graph's inputs are read from it
        feed = runtime_feed(ids, type_ids, mask, self.uses_token_types)
        names = [self.output_names[i] for i in wanted]
        options = self._options(session, ids.size)
        found = session.run(names, feed) if options is None else session.run(names, feed, options)
        return placed(deepest, wanted, found)

    def _options(self, session: Any, tokens: int) -> Any:
        """The run options of a batch of `tokens` padded tokens on `session`: its arena shrinks at the end
        of its first ordinary run after big ones, whose memory is all free by then; neither kind shrinks
        otherwise (shrinking after every run cost small batches 3-6%, no arena 14-15%: bench/ort_arena.py)."""
        if tokens > self.arena_tokens:
            self._grew.add(id(session))
            return None
        if id(session) in self._grew:
            self._grew.discard(id(session))
            return self._shrink
        return None

    @property
    def cut_depths(self) -> list[int]:
        """The depths whose cut graphs are open now (each the deepest hidden state it computes)."""
        return sorted(self._cut)

    @classmethod
    def build(
        cls,
        model: Callable[[], Any],
        family: Family,
        n_layers: int,
        *,
        digest: str,
        quantize: str | None,
        calibrate: Callable[[Sequence[str]], None],
        calibration: Sequence[str] | None = None,
        scheme: str = "dynamic",
        log: Callable[[str], None] | None = None,
    ) -> OnnxRunner:
        """Open an ONNX Runtime session on the cached export of the model whose content is `digest`,
        exported now from `model()` (the PyTorch module, asked for only then) when missing.

        `calibrate(texts)` must run the torch model over the texts; int8 watches those forwards to pick
        the outlier channels (and, with `scheme="static"`, the activation scales).
        """
        require_onnxruntime()
        path = export_onnx(
            model, family, digest=digest, quantize=quantize, calibrate=calibrate, calibration=calibration,
            scheme=scheme, log=log,
        )  # fmt: skip
        runner = cls(path, family.uses_token_types, n_layers + 1, log=log)
        if quantize is None:  # float32 needs the module alone; int8's calibration runs the forward
            runner.remake = functools.partial(export_onnx, model, family, digest=digest, log=log)
        return runner


def idle_threads_sleep() -> bool:
    """Whether this process asked idle threads to sleep, not spin: `OMP_WAIT_POLICY=PASSIVE`, the
    setting torch's OpenMP reads, which ONNX Runtime's sessions then follow too."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"


def open_session(model: str | bytes, *, optimized_to: Path | None = None) -> Any:
    """An ONNX Runtime CPU session on `model` (a path or the bytes of one) as every runner opens it: all
    of ONNX Runtime's graph optimizations but `DISABLED_FUSIONS`, `cpu_threads()` threads; `optimized_to`
    also writes the graph ONNX Runtime runs after its optimizations (for tests and profiles)."""
    ort = require_onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = cpu_threads()
    if idle_threads_sleep():
        # ONNX Runtime's own thread pool reads no OpenMP setting; without this its idle threads spin
        # and burn the cores that other processes (torch's, or a second worker's) are waiting for.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if optimized_to is not None:
        options.optimized_model_filepath = str(optimized_to)
    return ort.InferenceSession(
        model, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_FUSIONS)
    )


def opened_graph(
    path: Path, open_graph: Callable[[Path], Any], refusals: tuple[type[BaseException], ...],
    made_again: Callable[[], Path] | None, *, find: Callable[[], Path], log: Callable[[str], None] | None,
    source: Path | None = None, gone: bool = False,
) -> Any:  # fmt: skip
    """`open_graph(path)` on a cached graph (the export's, a cut of it, the attention graph); where the
    installed ONNX Runtime refuses it (a graph made by another version, in a cache shared between
    installs), it is removed (`refused_graph`), made again by `made_again` and opened once more; without
    `made_again` (an int8 graph, whose calibration runs the forward the runner answers), a ModelLoadError
    says to load again, and the int8 export `source` that `path` was cut from (its opset) is removed too,
    or the next load would cut the same refused graph from it. A failure of this process's own (a file or
    memory limit) leaves the graph and is said in one line (`open_failure`). A file gone between the check
    and the open (`graph_missing`) is made again by `find` as a missing one is, once (`gone`: already
    once). `refusals` are `runtime_refusals` of the onnxruntime module."""
    try:
        return open_graph(path)
    except refusals as exc:
        if graph_missing(exc):
            if gone:
                raise left_cache(path) from None
            return opened_graph(find(), open_graph, refusals, made_again, find=find, log=log, source=source,
                                gone=True)  # fmt: skip
        refused_graph(path, "ONNX Runtime", exc, log if made_again is not None else None)
        if made_again is None:
            also = ""
            if source is not None:
                with contextlib.suppress(OSError):  # the cut's removal took: so does this, but for a race
                    source.unlink(missing_ok=True)
                also = f" with the int8 export {source.name} it was cut from"
            raise ModelLoadError(
                f"the installed ONNX Runtime cannot open the cached graph {path} "
                f"({refusal_reason(exc)}); it is removed{also}, to be made again at the next load: load "
                "the model again (restart the server)"
            ) from None
    again = made_again()
    try:
        return open_graph(again)
    except refusals as exc:
        if graph_missing(exc):  # made again, then cleared by another process: not the runtime's fault
            if gone:
                raise left_cache(again) from None
            return opened_graph(find(), open_graph, refusals, made_again, find=find, log=log, source=source,
                                gone=True)  # fmt: skip
        if not graph_refused(exc):
            raise open_failure(again, "ONNX Runtime", exc) from None
        raise ModelLoadError(
            f"the installed ONNX Runtime cannot open the graph {again}, made just now "
            f"({refusal_reason(exc)}); reinstall it: pip install --force-reinstall 'bertscope[onnx]'"
        ) from None


def runtime_refusals(ort: Any) -> tuple[type[BaseException], ...]:
    """The errors with which ONNX Runtime fails to open a graph file: those that refuse the graph (a newer
    opset or IR version, an unknown operator, a file it cannot parse: `graph_refused`), a file gone
    (removed by another process: made again as a missing one, `graph_missing`), and `Fail` and
    `RuntimeException`, which also carry this process's own failures (a file limit, memory: "std::bad_alloc"
    during initialization), never the graph's."""
    state = ort.capi.onnxruntime_pybind11_state
    return (
        state.Fail, state.RuntimeException, state.InvalidArgument, state.InvalidGraph, state.InvalidProtobuf,
        state.NotImplemented, state.NoSuchFile,
    )  # fmt: skip


# The errors' class names that refuse the graph itself whatever they say (ONNX Runtime's, by name: the
# module whose classes they are is not imported here); InvalidArgument: an empty or foreign file ("No graph
# was found in the protobuf").
REFUSING_ERRORS = ("InvalidGraph", "InvalidProtobuf", "NotImplemented", "InvalidArgument")


def graph_missing(exc: BaseException) -> bool:
    """Whether ONNX Runtime failed to open a graph because its file is gone (removed between the check and
    the open, by another process's `bertscope cache --clear`): made again as a missing one, nothing said."""
    return type(exc).__name__ == "NoSuchFile"


def left_cache(path: Path) -> ModelLoadError:
    """The error of a graph made again that left the cache again before it could be opened."""
    return ModelLoadError(
        f"the cached graph {path} left the cache as it was opened, twice (`bertscope cache --clear` in "
        "another process?); load the model again"
    )


# Words of a `Fail` (ONNX Runtime) or RuntimeError (OpenVINO) that refuse the graph: a newer opset ("Opset
# 99 is under development", "Missing opset in the model") or IR version ("Unsupported model IR version: 99,
# max supported IR version: 14"), an operator or attribute it does not know (ONNX Runtime 1.32's words;
# OpenVINO 2026.4's "unsupported opset: opset99" and "No conversion rule found for operations")
REFUSING_WORDS = (
    "opset", "ir version", "is not a registered function/op", "no op registered", "unrecognized attribute",
    "no conversion rule found",
)  # fmt: skip
# Words of a failure of this process (out of file descriptors, memory, permission), not of the graph:
# never a refusal, whatever else the message says
PASSING_WORDS = ("system error number", "bad_alloc", "permission denied", "no such file", "errno")


def graph_refused(exc: BaseException) -> bool:
    """Whether a runtime's failure to open a graph refuses the graph itself (made by another version: made
    again), not this process's open of it (a file or memory limit: the graph is left as it is)."""
    if type(exc).__name__ in REFUSING_ERRORS:
        return True
    text = str(exc).lower()
    return not any(word in text for word in PASSING_WORDS) and any(word in text for word in REFUSING_WORDS)


def open_failure(path: Path, runtime: str, exc: BaseException) -> ModelLoadError:
    """The one-line error of a graph `runtime` could not open for a reason of this process's own (a file
    or memory limit: `graph_refused` is False), the graph left in the cache."""
    reason = refusal_reason(exc)
    errno = re.search(r"system error number (\d+)", reason)
    if errno is not None:  # ONNX Runtime gives the number alone
        reason = f"{reason}: {os.strerror(int(errno.group(1)))}"
    return ModelLoadError(
        f"the installed {runtime} could not open the cached graph {path} ({reason}); it is left in the "
        "cache: where this process lacks open files or memory, free some and load again, else run "
        "`bertscope cache --clear`"
    )


def refusal_reason(exc: BaseException) -> str:
    """A runtime's refusal in a few words: its last line, without the C++ source position and signature
    (ONNX Runtime's `model.cc:181 onnxruntime::Model::Model(...)`) that precede the reason."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = re.sub(r"^.*?[\w/.-]+\.(?:h|cc|cpp):\d+ [^()]*\([^()]*\)\s*", "", lines[-1] if lines else "")
    # whole: its end names what the runtime supports ("Current official support for domain ai.onnx is
    # till opset 28")
    # and ONNX Runtime's status code ("1 : FAIL : "), which says nothing a reader acts on
    return re.sub(r"^\d+ : [A-Z_]+ : ", "", reason.removeprefix("[ONNXRuntimeError] : "))


def refused_graph(
    path: Path,
    runtime: str,
    exc: BaseException,
    log: Callable[[str], None] | None,
    *,
    reason: str | None = None,
) -> None:
    """Remove the cached graph at `path` that the installed `runtime` refused (one made by another version
    of it, in a cache shared between installs), so it is made again as a missing one is, named in one line
    on `log`; where the cache takes no change, ModelLoadError naming the file and the fix. Where `exc` is
    this process's own failure to open it (`graph_refused` is False), the graph is left and the
    ModelLoadError names the cause (`open_failure`). A `reason` given says why the graph is refused where
    `exc`'s words cannot (OpenVINO's IR version)."""
    if reason is None and not graph_refused(exc):
        raise open_failure(path, runtime, exc) from None
    said = f"the installed {runtime} cannot open the cached graph {path} ({reason or refusal_reason(exc)})"
    try:
        path.unlink(missing_ok=True)
    except OSError:
        raise ModelLoadError(
            f"{said}, and the cache cannot be changed: run `bertscope cache --clear` as its owner, or set "
            "BERTSCOPE_CACHE to a writable folder"
        ) from None
    if log is not None:
        log(f"{said}; making it again")


def encoder_digest(encoder: Any) -> str:
    """The content digest of an encoder's model: its folder's files, or its weights where it has no folder
    (a model built in memory, such as a vocabulary extended by `add_tokens`)."""
    folder = getattr(encoder.loaded, "path", None)
    if folder is not None:
        return content_digest(Path(folder))
    return model_hash(encoder.hf_model)[:20]


def cached_cut(
    path: Path, outputs: Sequence[str], inputs: Sequence[str] | None = None, *,
    log: Callable[[str], None] | None = None,
) -> Path | None:  # fmt: skip
    """The export at `path` cut to the nodes that `outputs` (hidden_0..hidden_k) need, kept beside it
    (`cut_path`) with its size and SHA-256 and the SHA-256 of the export it was cut from: made now when
    missing, damaged (named on `log`) or cut from another export, once however many processes ask; None
    where the cache folder takes no file (the caller cuts in memory)."""
    cut = cut_path(path, len(outputs) - 1)
    source = read_record(path).get("sha256")
    if not isinstance(source, str):  # an export without its record (not made here): cut in memory
        return None
    if _cut_from(cut, source, None):  # silent: a file another process is writing has no record yet
        return cut
    from filelock import FileLock

    try:
        with FileLock(f"{cut}.lock"):  # the writer holds it until the record is written: named only here
            if not _cut_from(cut, source, log):
                write_cut(path, cut, inputs, outputs)
                # recorded after the file is in place: a file without its record is never trusted
                about = {"source": source, "outputs": len(outputs), "format": EXPORT_FORMAT}
                record_export(cut, {**about, "sha256": file_sha256(cut), **export_stamp(cut)})
    except OSError:  # a read-only or full cache: cut in memory, as before there was a cache
        return None
    return cut


def _cut_from(cut: Path, source: str, log: Callable[[str], None] | None) -> bool:
    """Whether `cut` is a whole cut graph of the export whose SHA-256 is `source`."""
    return (
        cached_export(cut, log=log, again="cutting it again") is not None
        and read_record(cut).get("source") == source
    )


def model_hash(model: torch.nn.Module) -> str:
    """SHA-256 of a PyTorch model's config and every weight (for a model that has no folder)."""
    from .export import weights_hash

    return weights_hash(model)


def export_path(family: str, digest: str, variant: str = "float32") -> Path:
    """Where the export of the model whose content is `digest` is kept."""
    return cache_dir() / f"{family}-{digest}-{variant}-v{EXPORT_FORMAT}.onnx"


def cached_export(
    path: Path, *, log: Callable[[str], None] | None = None, again: str = "exporting it again"
) -> Path | None:
    """`path` when it is a whole export (its size and SHA-256 as recorded when it was made), else None.

    A damaged file (a disk error, a copy cut short, an edit) is named in one line on `log` and left to be
    made again; a file from an older bertscope has another name and is never read.
    """
    if not path.is_file():
        return None
    damage = _damage(path)
    if damage is None:
        return path
    if log is not None:
        log(f"{damage}; {again}")
    return None


def _damage(path: Path) -> str | None:
    """Why the file at `path` is not the export its record describes, in words; None where it is whole
    (a whole file copied or touched since is recorded again, so it is not hashed next time)."""
    about = read_record(path)
    record = path.with_suffix(".json")
    if not about:  # never written (an export another process is still writing), deleted, or damaged
        state = "is unreadable" if record.is_file() else "is missing"
        return f"the cached export {path} cannot be checked: its record {record.name} {state}"
    if about.get("file", path.name) != path.name:
        # another model's export and record copied under this name: whole, but not this model's graph
        return f"the cached export {path} is recorded as {about['file']!r}, another model's"
    stat = path.stat()
    # the change time and inode too, not the modification time alone: an in-place edit whose time is set
    # back (touch -r, cp -p, rsync --inplace) keeps size and mtime, and would be read unhashed
    if about.get("bytes") == stat.st_size and about.get("identity") == list(file_identity(stat)):
        return None
    if about.get("bytes") == stat.st_size and about.get("sha256") == file_sha256(path):
        try:  # copied, touched or from an older record, still whole: remember it, so it is not hashed again
            record_export(path, {**about, **export_stamp(path)})
        except OSError:  # a read-only cache: hashed again next time, never refused
            pass
        return None
    return f"the cached export {path} does not match its recorded size and SHA-256"


def export_stamp(path: Path) -> dict[str, Any]:
    """What `cached_export` compares before trusting a file unhashed: its size and `file_identity`."""
    stat = path.stat()
    return {"bytes": stat.st_size, "identity": list(file_identity(stat))}


def record_export(path: Path, about: dict[str, Any]) -> None:
    """Write the JSON beside an export (what it is, its size, time and SHA-256), atomically; where it
    cannot be written, the OSError, with nothing staged left behind."""
    staged = path.with_suffix(f".{os.getpid()}.json.tmp")
    try:
        staged.write_text(json.dumps(about, indent=1), encoding="utf-8")
        os.replace(staged, path.with_suffix(".json"))
    except OSError:
        staged.unlink(missing_ok=True)
        raise


def read_record(path: Path) -> dict[str, Any]:
    """The JSON record beside an export or cut graph (its `.json`; empty where missing or unreadable)."""
    return read_json_object(path.with_suffix(".json"))


def export_onnx(
    model: Callable[[], Any],
    family: Family,
    *,
    digest: str,
    quantize: str | None = None,
    calibrate: Callable[[Sequence[str]], None] | None = None,
    calibration: Sequence[str] | None = None,
    scheme: str = "dynamic",
    log: Callable[[str], None] | None = None,
    attentions: bool = False,
) -> Path:
    """The cached ONNX export of the model whose content is `digest` (every hidden state an output; with
    `attentions`, every layer's attention probabilities, float32, proved against the module's), made now
    from `model()` (the PyTorch module) when missing or damaged.

    Two processes exporting the same model at once make it once: the second waits and opens the first's.
    float32 needs only torch's exporter (and onnx); int8 also needs `calibrate` and ONNX Runtime's quantizer.
    """
    int8 = (quantize or "none") == "int8"
    if attentions and int8:
        raise InvalidSpec("the attention graph is float32: export it without quantize='int8'")
    texts = calibration_or_shipped(calibration, required=int8)
    if scheme not in SCHEMES:
        raise InvalidSpec(f"unknown int8 scheme {scheme!r}; choose one of: {', '.join(SCHEMES)}")
    variant = ATTENTIONS if attentions else export_variant(quantize, texts, scheme)
    path = export_path(family.name, digest, variant)
    if cached_export(path) is not None:  # silent: an export another process is writing has no record yet
        return path
    if int8 and calibrate is None:
        raise InvalidSpec("int8 export needs a calibrate function that runs the torch model")
    try:  # making an export needs onnx (opening one does not)
        import onnx  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailable(
            "exporting the model to ONNX needs onnx: pip install 'bertscope[onnx]'"
        ) from exc

    from ..core.loading import FIRST_EXPORT, require_torch, torch_loaded_for
    from .attention_proof import missed_proof

    try:
        require_torch("exporting the model to ONNX")  # the export traces the PyTorch module
    except BackendUnavailable as exc:
        # a damaged export is why one is made: said first, or the caller reads only that torch is missing
        damage = _damage(path) if path.is_file() else None
        if damage is None:
            raise
        raise BackendUnavailable(f"{damage}; {exc}") from None
    from .export import write_export

    writable_folder(path.parent)
    # the writer holds it until the record is written: damage named only here
    with held_lock(path, f"export of {path.name}", log):
        if cached_export(path, log=log) is None:
            # a miss recorded while this process waited on the lock: write_export refuses from the record,
            # exporting nothing, so nothing is said of an export
            if log is not None and not (attentions and missed_proof(path) is not None):
                log(f"exporting the model to ONNX ({variant}-v{EXPORT_FORMAT}) -> {path}")
            # the module loaded now (opened light) is said to be loaded for this export alone
            reason = ATTENTION_EXPORT if attentions else FIRST_EXPORT
            try:
                with torch_loaded_for(reason):
                    module = model()
                about = write_export(
                    module, family, path, calibrate=calibrate if int8 else None, texts=texts,
                    outlier_factor=OUTLIER_FACTOR, scheme=scheme,
                    attention_session=open_session if attentions else None,
                )  # fmt: skip
                # recorded after the file is in place: an export without its record is never trusted
                # its own name too: a record names the model (its content digest) its graph is of
                about.update(
                    format=EXPORT_FORMAT, file=path.name, sha256=file_sha256(path), **export_stamp(path)
                )
                record_export(path, about)
            except OSError as exc:
                raise ExportNotWritten(
                    f"the ONNX export could not be written to {path.parent} ({exc.strerror or exc}); free "
                    "space there or set BERTSCOPE_CACHE to another folder, then load again"
                ) from None
    return path


@contextlib.contextmanager
def held_lock(path: Path, what: str, log: Callable[[str], None] | None) -> Iterator[None]:
    """`path`'s lock file held; where another process or thread holds it (making `what` now), said once on
    `log` before waiting, so a process that waits minutes on another's export or quantization says why."""
    from filelock import FileLock, Timeout

    lock = FileLock(f"{path}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if log is not None:
            # a lock file is held alike by another process and by another thread of this one
            log(f"waiting for the {what} held by another process or thread (its lock: {path.name}.lock)")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


class ExportNotWritten(ModelLoadError):
    """The export could not be written (a full or failing disk): it says nothing of the model."""


# The probe file `writable_folder` touches and unlinks (then its pid): `bertscope cache` knows it by this name
WRITE_PROBE = ".write-test-"


def writable_folder(folder: Path) -> None:
    """Create the cache folder `folder` and check it takes a file, or say in one line how to give one."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f"{WRITE_PROBE}{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise ModelLoadError(
            f"cannot write the cache folder {folder} ({exc.strerror}); set BERTSCOPE_CACHE to a writable "
            "folder"
        ) from None
