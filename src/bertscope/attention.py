"""Attention weights: what each token reads from every other, per layer and head, as `output_attentions`.

A model that answers from an exported graph (opened light, its runtime ONNX Runtime or OpenVINO) reads them
from its attention graph on ONNX Runtime, without torch: every layer's probabilities as outputs, exported
once per model content beside its export and proved against the module's own (backends/export.py). Where
that graph cannot be made (an exporter failure, a graph that differs from the module, no onnxruntime), and
wherever the PyTorch module is what answers, they are read from the module: the fast attention kernels
(sdpa, flash) return no weights, so one call switches it to the eager implementation and back; the default
path is never changed. A graph that differs is recorded (backends/attention_proof.py): later processes read
the module without exporting and proving it again, said once per process.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .core._enums import LongText
from .core.tokens import Text, Tokens, check_texts, one_text_or_pair, pad_batch, say_cut
from .errors import BackendUnavailable, BertscopeError, InvalidInput
from .research.states import layered

if TYPE_CHECKING:
    from .core.encoder import Encoder

__all__ = ["attention_layer", "attentions", "attention_of"]

# Each model's session on its attention graph, once opened: later calls read the same graph (the export
# loaded the PyTorch module, so the model is no longer light, but its answers stay the graph's).
_SESSIONS: weakref.WeakKeyDictionary[Encoder, Any] = weakref.WeakKeyDictionary()
_OPENING = threading.Lock()
# The recorded misses (attention graphs that differ from their module here) already said in this process:
# each is said once, not at every load of the model.
_SAID_MISSES: set[Path] = set()
_FALLBACK = "reading the weights from the PyTorch module"
# The int8/bfloat16 models already told that their weights are the float32 graph's.
_SAID_FLOAT: weakref.WeakSet[Encoder] = weakref.WeakSet()
# Held from the switch to eager attention through the forward to the switch back: a second thread's
# switch back (or its reading of the switched setting as the one to restore) mid-forward lost the weights.
_EAGER = threading.Lock()


def attentions(model: Encoder, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
    """(layers, heads, tokens, tokens) float32 attention weights of one text or (A, B) pair.

    Row i of [layer - 1, head] is how token i's layer-`layer` vector weighs every token of layer - 1.
    A text cut at the model's limit is said with a `TruncatedTextsWarning`.
    """
    tokens, weights = attention_of(model, text, long=long)
    say_cut(
        [tokens.n_dropped],
        model.max_tokens,
        "attention is read within one window: split the text to see its end",
    )
    return weights


def attention_layer(model: Encoder, layer: int, *, head: int | None = None) -> int:
    """The index (0..L-1) of attention layer `layer` (1..L, negative from the end) into `attentions`'
    first axis, once `layer` and `head` are the model's; refused in one line from its config, before any
    forward (or load)."""
    layered(model, "attention")  # a static model: rows, no attention to read
    n_layers = model.n_layers
    if (
        isinstance(layer, bool)
        or not isinstance(layer, int)
        or layer == 0
        or not -n_layers <= layer <= n_layers
    ):
        raise InvalidInput(
            f"layer {layer!r}: this model's attention layers are 1..{n_layers} (or -1..-{n_layers})"
        )
    n_heads = int(getattr(model.config, "num_attention_heads", 0) or 0)
    if head is not None and (isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < n_heads):
        raise InvalidInput(f"head {head!r}: this model has heads 0..{n_heads - 1}")
    return layer - 1 if layer > 0 else n_layers + layer


def attention_of(
    model: Encoder, text: Text, *, long: LongText | str = "truncate", tokens: Tokens | None = None
) -> tuple[Tokens, np.ndarray]:
    """The tokens of one text or pair, and its (layers, heads, tokens, tokens) attention weights.

    `tokens`: the text already tokenized with `long` (the service counts them first), not tokenized again.
    A cut is counted in the tokens' n_dropped, not said (`attentions` says it).
    """
    layered(model, "attention")  # a static model: rows, no attention to read
    if not one_text_or_pair(text):
        raise InvalidInput("attentions takes one text or one (A, B) pair (a tuple of two strings)")
    if tokens is None:  # in a list: a pair is one item
        tokens = model.tokenizer.encode_one_window(check_texts([text], pairs=True), long, what="attention")[0]
    ids, mask = pad_batch([tokens.ids], model.pad_id)
    types, _ = pad_batch([tokens.token_type_ids], 0)
    model.engine.check_ids(ids, types)  # the graph and the module index the tables without this check
    _say_float_weights(model)
    session = _graph_session(model)
    if session is not None:
        weights = _from_graph(session, ids, types, mask)
    else:
        weights = _from_module(model, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    if len(weights) != model.n_layers:
        raise InvalidInput(
            f"{model.loaded.source} gave {len(weights)} attention maps for {model.n_layers} layers: its "
            f"attention implementation does not report weights; {_weights_fix(model)}"
        )
    return tokens, np.stack([w[0] for w in weights]).astype(np.float32, copy=False)


def _say_float_weights(model: Encoder) -> None:
    """Say once per model that an int8 or bfloat16 runtime's model gets the float32 model's weights (its
    attention graph, or the module): that graph returns no probabilities, and a caller comparing precisions
    must not read them as its own."""
    from .anatomy import lossy_runtime

    lossy = lossy_runtime(model)
    if lossy and model not in _SAID_FLOAT:
        from .core.encoder import stderr

        _SAID_FLOAT.add(model)
        stderr(
            f"attention: these are the float32 model's weights: the {lossy} graph that answers this model's "
            "embeddings gives none"
        )


def _graph_session(model: Encoder) -> Any:
    """The ONNX Runtime session on `model`'s attention graph where its answers come from an exported graph
    and the graph can be made (exported now, once, where it is not cached and has not missed the module's
    here before); None: the module answers."""
    with _OPENING:
        if model in _SESSIONS:
            return _SESSIONS[model]
        if not model.light or model.engine.runner is None:
            return None  # the module is loaded, or is what answers: it gives the weights itself
        from .backends.attention_proof import missed_proof
        from .backends.onnx import (
            ATTENTIONS,
            cached_export,
            encoder_digest,
            export_path,
            require_onnxruntime,
        )
        from .core.encoder import stderr

        graph: Path | None = None
        try:  # an OpenVINO model without onnxruntime: nothing to export for or run the graph on
            require_onnxruntime()
        except BackendUnavailable:  # its message names backend='onnxruntime', which was not asked
            install = "pip install 'bertscope[onnx]'"
            stderr(f"attention: the attention graph needs onnxruntime ({install}); {_FALLBACK}")
            return None
        try:
            digest = encoder_digest(model)
            graph = export_path(model.family.name, digest, ATTENTIONS)
            if cached_export(graph) is None and _missed_here(model, graph):
                return None
            session = _opened_graph(model, digest)
        except BertscopeError as exc:  # the module's answer is the reference: never a different one
            stderr(f"attention: {exc}; {_FALLBACK}")
            if graph is not None and missed_proof(graph) is not None:
                _SAID_MISSES.add(graph)  # missed now, and said: a later load here says nothing more
            return None
        _SESSIONS[model] = session
        return session


def _opened_graph(model: Encoder, digest: str) -> Any:
    """A session on `model`'s attention graph, exported now where it is not cached; a cached one the
    installed ONNX Runtime refuses, or one gone between the check and the open, is exported again as the
    export's own graph is (backends/onnx.py `opened_graph`)."""
    from .backends.onnx import export_onnx, open_session, opened_graph, require_onnxruntime, runtime_refusals
    from .core.encoder import stderr

    def exported() -> Path:
        return export_onnx(lambda: model.hf_model, model.family, digest=digest, attentions=True, log=stderr)

    refusals = runtime_refusals(require_onnxruntime())
    return opened_graph(
        exported(), lambda graph: open_session(str(graph)), refusals, exported, find=exported, log=stderr
    )


def _missed_here(model: Encoder, graph: Path) -> bool:
    """Whether the attention graph `graph` was proved on this machine and missed (its record holds): then
    it is neither exported nor proved again, and that is said once per process."""
    from .backends.attention_proof import missed_message, missed_proof, refusal_path
    from .core.encoder import stderr

    missed = missed_proof(graph)
    if missed is None:
        return False
    if graph not in _SAID_MISSES:
        _SAID_MISSES.add(graph)
        why = missed_message(model.family.name, missed["max_abs"], missed["gate"])
        stderr(f"attention: {why}, as recorded in {refusal_path(graph)}; {_FALLBACK}")
    return True


def _from_graph(session: Any, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    """Each layer's (batch, heads, tokens, tokens) probabilities from the attention graph."""
    from .backends.onnx import runtime_feed

    # the exporter drops inputs the graph never reads (DeBERTa-v2 without segment embeddings)
    token_types = any(i.name == "token_type_ids" for i in session.get_inputs())
    return list(session.run(None, runtime_feed(ids, types, mask, token_types)))


def _from_module(model: Encoder, batch: dict[str, np.ndarray]) -> list[Any]:
    """Each layer's (batch, heads, tokens, tokens) probabilities from the PyTorch module (eager)."""
    from .core.forward import model_inputs
    from .core.loading import GRAPH_LACKS, require_torch, torch_loaded_for

    # attention weights are the PyTorch module's own: without torch, one line that says what to install
    torch = require_torch(f"{model.loaded.source}: reading attention weights")
    with torch_loaded_for(GRAPH_LACKS):  # a model opened light loads its module now, for this alone
        _ = model.hf_model
    with torch.inference_mode(), _eager(model):
        out = model.hf_model(**model_inputs(model, batch), output_attentions=True, return_dict=True)
    return [a.float().cpu().numpy() for a in (out.attentions or ()) if a is not None]


def _weights_fix(model: Encoder) -> str:
    """What makes `model` report attention weights: transformers' own class on eager attention."""
    if model.loaded.trust_remote_code:  # the code it ships drops them or refuses eager attention
        return (
            "load it without trust_remote_code (no --trust-remote-code), so transformers' own class "
            "answers on eager attention, or use model code that returns output_attentions"
        )
    return 'set "attn_implementation": "eager" in its config.json (eager attention reports them)'


@contextmanager
def _eager(model: Encoder) -> Iterator[None]:
    """The eager attention implementation for the block (sdpa and flash kernels return no weights), one
    caller at a time: the module is shared, and its implementation is one setting for every thread."""
    with _EAGER:
        hf_model = model.hf_model
        before = getattr(hf_model.config, "_attn_implementation", None)
        switch = before not in (None, "eager") and hasattr(hf_model, "set_attn_implementation")
        if switch:
            try:
                hf_model.set_attn_implementation("eager")
            except (ValueError, ImportError, NotImplementedError, AttributeError) as exc:
                raise InvalidInput(
                    f"{model.loaded.source}: attention weights need eager attention (its {before} reports "
                    f"none), and its model class refuses it ({exc}); {_weights_fix(model)}"
                ) from None
        try:
            yield
        finally:
            if switch:
                hf_model.set_attn_implementation(before)
