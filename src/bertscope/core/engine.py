"""The batched forward: length-sorted batches under a token budget, order restored, early stop, streaming.

Every entry point (library, command line, service, corpus jobs) embeds through `Engine`; nothing else
batches, selects layers or pools.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInput, InvalidSpec, ModelLoadError
from ._enums import Combine, Pooling
from .families import Family
from .given import past_rows, past_segments
from .layers import combine_layers
from .loading import device_kind
from .pooling import pool_sentences
from .prompts import prepend
from .results import SentenceEmbeddings
from .segments import (
    MIN_ROWS,
    Segment,
    WindowLayout,
    WindowPool,
    batches,
    chunks,
    segments_of,
    stitch,
    windowed,
)
from .similarity import unit
from .spec import EmbedSpec
from .tokens import TextTokenizer, Tokens, pad_batch

__all__ = [
    "LONG_TOKENS", "MIN_ROWS", "STATES_BYTES_PER_FORWARD", "TENSOR_POOLINGS", "Array", "AskedStates",
    "Engine", "LightPooler", "ModelFacts", "States", "as_array", "asked_states", "placed", "pool_tensor",
]  # fmt: skip

OnBatch = Callable[[int, int], None]
Array = np.ndarray
# The hidden states a caller reads (None: every one up to the deepest), and 0..deepest as a runner returns
# them: float32 arrays, None at each index not asked
AskedStates = Collection[int] | None
States = tuple[Array | None, ...]
# (ids, type_ids, mask, deepest, layers=None) -> States: another runtime in place of the torch forward
Runner = Callable[..., States]
# The model's trained pooler without torch: (batch, tokens, d) float32 last layer -> (batch, d) float32
LightPooler = Callable[[np.ndarray], np.ndarray]


def asked_states(deepest: int, layers: AskedStates) -> list[int]:
    """The hidden state indices a runner returns: 0..deepest, or those of `layers` up to `deepest`."""
    if layers is None:
        return list(range(deepest + 1))
    wanted = sorted({i for i in layers if i <= deepest})
    if not wanted or wanted[0] < 0:
        raise InvalidSpec(f"layers {sorted(layers)} name no hidden state in 0..{deepest}")
    return wanted


def placed(deepest: int, wanted: Sequence[int], arrays: Iterable[np.ndarray]) -> States:
    """Hidden states 0..deepest: `arrays` at the `wanted` indices (in order), None elsewhere."""
    states: list[np.ndarray | None] = [None] * (deepest + 1)
    for i, array in zip(wanted, arrays, strict=True):
        states[i] = array
    return tuple(states)


@dataclass(frozen=True)
class ModelFacts:
    """What the engine needs to know of a model without holding it: its layers, width, vocabulary rows,
    pooler."""

    n_layers: int
    hidden_size: int
    vocab_rows: int
    has_pooler: bool
    type_rows: int | None = None  # segment types the model has (type_vocab_size); None: none read


# A text longer than this many tokens is run a few windows at a time (`token_blocks`), never held whole.
LONG_TOKENS = 4096

# The float32 hidden states one forward hands back are bounded in bytes as well as tokens. The token
# budget is sized for one state (it grows with the CPU's threads and is 65,536 on CUDA), and a forward
# that fetches every layer holds one array per layer: all 13 of a base model at 8,192 tokens are 327 MB,
# all 25 of a large one at CUDA's budget 6.7 GB. Long rows get fewer than MIN_ROWS a forward where that
# many of the longest width would pass the bound. A forward of one or a few layers keeps its budget (one
# state of a base model at 65,536 tokens is 201 MB).
STATES_BYTES_PER_FORWARD = 256 * 2**20


class Engine:
    """Runs texts through the model in length-sorted, token-budgeted batches and pools the result.

    The PyTorch module is asked of `torch_model` only when a forward runs on torch (no runner) or the
    model's own pooler is asked for and `light_pooler` gives none: where an exported graph serves
    (`runner`), no torch is imported.
    """

    def __init__(
        self,
        torch_model: Callable[[], Any],
        facts: ModelFacts,
        family: Family,
        tokenizer: TextTokenizer,
        *,
        pad_id: int,
        device: Any,
        token_budget: int,
        max_batch: int = 512,
        chunk_size: int = 4096,
        min_rows: int = 1,
        call_tokens: float | None = None,
        light_pooler: Callable[[], LightPooler | None] | None = None,
    ) -> None:
        self._torch_model = torch_model
        # The trained pooler read from the folder's weights (opened light: the module is float32 on the
        # CPU), or None where only the module's pooler is known (core/pooler_weights.py)
        self._light_pooler = light_pooler
        self._model: Any = None
        self._opening = threading.Lock()  # one thread loads and warms the module, the others wait for it
        self.family = family
        self.tokenizer = tokenizer
        self.pad_id = pad_id
        self.device = device
        self.token_budget = token_budget
        self.min_rows = min_rows
        self.max_batch = max_batch
        self.call_tokens = call_tokens  # a forward's fixed cost in tokens, for segments.batches
        self.chunk_size = chunk_size
        self.n_layers = facts.n_layers
        self.hidden_size = facts.hidden_size
        self.type_rows = facts.type_rows
        self.vocab_rows = facts.vocab_rows
        self._has_pooler = facts.has_pooler
        self.runner: Runner | None = None
        # None: pool torch's states where they are when that is a GPU (`pools_on_device`); tests set it
        self.device_pooling: bool | None = None

    @property
    def model(self) -> Any:
        """The PyTorch module (loaded on first use where the model was opened without it)."""
        if self._model is None:
            with self._opening:
                if self._model is None:
                    module = self._torch_model()
                    # transformers installs its hidden-state hooks on the module of the first call; that call
                    # must be the whole module, or a model first run with early stop records too few layers
                    # ever after. Other threads see the module only once it is warm.
                    tiny = np.full((1, 2), self.pad_id, dtype=np.int64)
                    self._torch_forward(tiny, np.zeros_like(tiny), np.ones_like(tiny), self.n_layers, module)
                    self._model = module
        return self._model

    @property
    def has_pooler(self) -> bool:
        """Whether the model has a trained pooler (dense + tanh over the first token)."""
        return self._has_pooler

    @property
    def pools_on_device(self) -> bool:
        """Whether sentence vectors are pooled on torch's device, only (texts, d) copied back to the CPU.

        On a GPU, copying every token's float32 vector back and pooling in NumPy cost more than the
        forward itself (2,400 news sentences on an H200: bench/profile_gpu.py)."""
        if self.runner is not None:
            return False
        if self.device_pooling is not None:
            return self.device_pooling
        return device_kind(self.device) != "cpu"

    def forward(
        self,
        ids: np.ndarray,
        type_ids: np.ndarray,
        mask: np.ndarray,
        deepest: int,
        layers: AskedStates = None,
    ) -> tuple[Any, ...]:
        """Hidden states 0..deepest, each (batch, tokens, d), running no layer past `deepest`.

        A runner gives float32 arrays, torch gives tensors in the model's dtype (`as_array` reads either).
        `layers` names the states the caller reads: a runner may leave the others out (None), which
        spares it copying them out (OpenVINO also converting them from bfloat16).
        """
        self.check_ids(ids, type_ids)
        if self.runner is not None:
            return self.runner(ids, type_ids, mask, deepest, layers)
        self.model  # noqa: B018 - loads and warms the module on first use
        return self._torch_forward(ids, type_ids, mask, deepest)

    def check_ids(self, ids: np.ndarray, type_ids: np.ndarray) -> None:
        """Refuse a token id outside the vocabulary or a segment id outside the model's table, in one line.

        Checked here, not per runtime: torch, ONNX Runtime and OpenVINO each fail differently on a bad id;
        the paths that index the tables themselves (anatomy, attention, `forward`) call it too.
        """
        if ids.size and ids.min() < 0:
            raise InvalidInput(f"token id {int(ids.min())} is out of range: ids are 0..{self.vocab_rows - 1}")
        if ids.size and ids.max() >= self.vocab_rows:
            # the tokenizer's own ids: tokens added to it without resizing the model's embeddings
            raise InvalidInput(past_rows(int(ids.max()), self.vocab_rows))
        if self.type_rows is not None and self.family.uses_token_types and type_ids.size:
            if type_ids.max() >= self.type_rows:  # a pair's second text on a one-segment model
                raise InvalidInput(
                    past_segments(int(type_ids.max()), self.type_rows, "embed the texts apart")
                )

    def _torch_forward(
        self, ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray, deepest: int, module: Any = None
    ) -> Any:
        """Torch's hidden states 0..deepest. The early stop runs a view of the module (`stopped_after`) and
        never changes the module itself, so threads may share one Model, whatever layers each asks."""
        import torch

        module = self._model if module is None else module
        inputs = {
            "input_ids": torch.from_numpy(ids).to(self.device),
            "attention_mask": torch.from_numpy(mask).to(self.device),
        }
        if self.family.uses_token_types:
            inputs["token_type_ids"] = torch.from_numpy(type_ids).to(self.device)
        with torch.inference_mode():
            out = self.family.stopped_after(module, deepest)(
                **inputs, output_hidden_states=True, return_dict=True
            )
        states = getattr(out, "hidden_states", None)
        if states is None:  # code shipped with a model (trust_remote_code) may not report them
            raise ModelLoadError(
                f"{type(module).__name__} returns no hidden states (output_hidden_states=True), "
                "which every bertscope feature reads; this model's code cannot be used"
            )
        return tuple(states)[: deepest + 1]

    def sentences(
        self, texts: Iterable[str], spec: EmbedSpec, *, on_batch: OnBatch | None = None
    ) -> Iterator[SentenceEmbeddings]:
        """Sentence vectors chunk by chunk, in input order; memory is bounded by the chunk size."""
        for views in self.sentence_views(texts, {"": spec}, on_batch=on_batch):
            yield views[""]

    def sentence_views(
        self, texts: Iterable[str], specs: Mapping[str, EmbedSpec], *, on_batch: OnBatch | None = None
    ) -> Iterator[dict[str, SentenceEmbeddings]]:
        """Several views (layers x pooling) of each chunk from one forward per batch, in input order.

        The specs must agree on `long` and `stride` (they decide the batches); the forward stops at
        the deepest layer any view needs. Each chunk gives {name: vectors (texts, d_view)}.
        """
        _check_views(specs)
        first = next(iter(specs.values()))
        start = 0
        for chunk in chunks(texts, self.chunk_size):
            yield self._views_of(self._fit(chunk, first, start), specs, on_batch)
            start += len(chunk)

    def token_sentences(
        self, tokens: Sequence[Tokens], spec: EmbedSpec, *, on_batch: OnBatch | None = None
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) of pre-built Tokens (ids given as they are), in input order.

        The long-text policy of `spec` applies as it does to texts (truncate reports n_dropped; window;
        error). A spec with a prompt is refused: the prompt is text put before the text, which
        tokens built elsewhere cannot carry.
        """
        _check_views({"": spec})
        if spec.prompt:
            raise InvalidSpec(
                f"the prompt {spec.prompt!r} is put before a text as text, and these tokens were built "
                "without it; embed the text itself, or ask for no prompt (prompt='')"
            )
        if not tokens:
            raise InvalidInput("no tokens given: pass at least one text's tokens")
        fitted = [self.tokenizer.fit(t, spec.long, index=i) for i, t in enumerate(tokens)]
        return self.fitted_sentences(fitted, spec, on_batch=on_batch)

    def prepare(self, texts: Sequence[str], spec: EmbedSpec) -> list[Tokens]:
        """The texts tokenized as `sentences` would (prompt put before, long-text policy applied)."""
        return self._fit(texts, spec, 0)

    def fitted_sentences(
        self, tokens: Sequence[Tokens], spec: EmbedSpec, *, on_batch: OnBatch | None = None
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) of tokens already through `prepare` (or `fit`), in input order."""
        _check_views({"": spec})
        size = self.chunk_size
        parts = [
            self._views_of(list(tokens[i : i + size]), {"": spec}, on_batch)[""]
            for i in range(0, len(tokens), size)
        ]
        return SentenceEmbeddings.joined(parts)

    def _views_of(
        self, tokens: list[Tokens], specs: Mapping[str, EmbedSpec], on_batch: OnBatch | None
    ) -> dict[str, SentenceEmbeddings]:
        """Each view's sentence vectors {name: (texts, d_view)} of fitted tokens, in their order.

        A long text's windows are pooled as each batch hands them back (`WindowPool`): memory holds a
        batch and a running sum per long text, never a text's stitched matrix."""
        first = next(iter(specs.values()))
        vectors: dict[str, list[np.ndarray | None]] = {name: [None] * len(tokens) for name in specs}
        pending: dict[tuple[str, int], WindowPool] = {}
        layouts: dict[int, WindowLayout] = {}
        segments = segments_of(tokens, self.tokenizer.max_tokens, first.stride)
        long_texts = windowed(segments)
        for batch, views in self._run_views(segments, specs, on_batch, on_device=self.pools_on_device):
            direct = [row for row, seg in enumerate(batch) if seg.text_index not in long_texts]
            windows = [row for row, seg in enumerate(batch) if seg.text_index in long_texts]
            for name, (hidden, mask) in views.items():
                if direct:
                    rows = hidden if len(direct) == len(batch) else hidden[direct]
                    pooled = self._pool(rows, mask[direct], specs[name])
                    for row, vec in zip(direct, pooled, strict=True):
                        vectors[name][batch[row].text_index] = vec
                # a window's tokens are stitched on the host: copied from the device in one go
                kept = dict(zip(windows, as_array(hidden[windows]), strict=True)) if windows else {}
                for row in windows:
                    seg = batch[row]
                    key = (name, seg.text_index)
                    if key not in pending:
                        pending[key] = self._window_pool(tokens, seg.text_index, specs[name], layouts)
                    pending[key].add(seg.window, kept[row][: len(seg.ids)])
        for (name, index), pool in pending.items():
            vectors[name][index] = self._pool_windows(pool, specs[name])
        n_tokens = np.array([len(t) for t in tokens], dtype=np.int64)
        n_dropped = np.array([t.n_dropped for t in tokens], dtype=np.int64)
        return {
            name: SentenceEmbeddings(
                vectors=np.stack(rows).astype(np.float32, copy=False),  # type: ignore[arg-type]
                n_tokens=n_tokens,
                n_dropped=n_dropped,
                spec=specs[name].as_dict(),
            )
            for name, rows in vectors.items()
        }

    def _window_pool(
        self, tokens: Sequence[Tokens], index: int, spec: EmbedSpec, layouts: dict[int, WindowLayout]
    ) -> WindowPool:
        """The running pool of long text `index`'s windows under `spec`; its layout is made once for
        every view (`layouts`, by text index)."""
        if index not in layouts:
            layouts[index] = WindowLayout(tokens[index], self.tokenizer.max_tokens, spec.stride)
        keep = _kept(tokens[index], spec)
        # cls under a prompt include_prompt false leaves out reads the first token after it (_first_kept)
        first = int(keep.argmax()) if spec.pooling is Pooling.CLS and spec.prompt_length else 0
        return WindowPool(layouts[index], keep, spec.pooling, first=first)

    def _pool_windows(self, pool: WindowPool, spec: EmbedSpec) -> np.ndarray:
        """One long text's sentence vector (d,) from its windows pooled as they came: what pooling the
        windows stitched back together gives (to float32 rounding)."""
        if pool.first is not None:  # cls, pooler: the text's first token, as a one-token text
            return self._pool(pool.first[None], np.ones((1, 1), np.float32), spec)[0]
        return _finished(pool.pooled()[None], spec)[0]

    def sentences_once(
        self, texts: Sequence[str], spec: EmbedSpec, *, on_batch: OnBatch | None = None
    ) -> SentenceEmbeddings:
        """Sentence vectors for a whole list at once, in input order."""
        return SentenceEmbeddings.joined(list(self.sentences(texts, spec, on_batch=on_batch)))

    def token_matrices(
        self, texts: Iterable[str], spec: EmbedSpec, *, on_batch: OnBatch | None = None
    ) -> Iterator[tuple[Tokens, np.ndarray]]:
        """Each text's tokens with their combined-layer vectors (tokens, d), pad trimmed, in input order."""
        start = 0
        for chunk in chunks(texts, self.chunk_size):
            yield from self.fitted_token_matrices(self._fit(chunk, spec, start), spec, on_batch=on_batch)
            start += len(chunk)

    def fitted_token_matrices(
        self, tokens: Sequence[Tokens], spec: EmbedSpec, *, on_batch: OnBatch | None = None
    ) -> Iterator[tuple[Tokens, np.ndarray]]:
        """`token_matrices` of tokens already through `prepare` (or `fit`): no second tokenization.

        The caller bounds the list: its vectors are all held until the last batch has run.
        """
        parts: list[dict[int, np.ndarray]] = [{} for _ in tokens]
        for batch, hidden, _ in self._run(
            segments_of(tokens, self.tokenizer.max_tokens, spec.stride), spec, on_batch
        ):
            for row, seg in enumerate(batch):
                parts[seg.text_index][seg.window] = hidden[row, : len(seg.ids)]
        for tok, by_window in zip(tokens, parts, strict=True):
            pieces = [by_window[w] for w in sorted(by_window)]
            yield tok, stitch(tok, pieces, self.tokenizer.max_tokens, spec.stride)

    def token_blocks(
        self,
        tokens: Tokens,
        spec: EmbedSpec,
        *,
        windows_per_block: int = MIN_ROWS,
        on_batch: OnBatch | None = None,
    ) -> Iterator[np.ndarray]:
        """One fitted text's combined-layer token vectors as consecutive blocks of rows (rows, d), in token
        order: together the matrix `fitted_token_matrices` gives, with memory bounded by
        `windows_per_block` windows instead of the whole text (a book-length line).

        `on_batch` hears each forward's tokens as it runs (a long text shows its progress in tokens), and
        the text, once, with its last block."""
        segments = segments_of([tokens], self.tokenizer.max_tokens, spec.stride)
        if len(segments) == 1:
            for _, hidden, _ in self._run(segments, spec, on_batch):
                yield hidden[0, : len(segments[0].ids)]
            return
        layout = WindowLayout(tokens, self.tokenizer.max_tokens, spec.stride)
        tokens_only = None if on_batch is None else (lambda _texts, n_tokens: on_batch(0, n_tokens))
        for first in range(0, len(segments), windows_per_block):
            group = segments[first : first + windows_per_block]
            parts: dict[int, np.ndarray] = {}
            for batch, hidden, _ in self._run(group, spec, tokens_only):
                for row, seg in enumerate(batch):
                    parts[seg.window] = hidden[row, : len(seg.ids)]
            if on_batch is not None and first + windows_per_block >= len(segments):
                on_batch(1, 0)
            for k in sorted(parts):
                yield parts[k][layout.rows(k, len(parts[k]))[0]]

    def _fit(self, chunk: Sequence[str], spec: EmbedSpec, start: int) -> list[Tokens]:
        texts = prepend(spec.prompt, chunk) if spec.prompt else chunk
        return self.tokenizer.encode_fitted(texts, spec.long, start=start)

    def _run(
        self, segments: list[Segment], spec: EmbedSpec, on_batch: OnBatch | None
    ) -> Iterator[tuple[list[Segment], np.ndarray, np.ndarray]]:
        """(segments, combined hidden (batch, tokens, d) float32, pooling mask (batch, tokens)) per batch."""
        for batch, views in self._run_views(segments, {"": spec}, on_batch):
            yield batch, *views[""]

    def _run_views(
        self,
        segments: list[Segment],
        specs: Mapping[str, EmbedSpec],
        on_batch: OnBatch | None,
        *,
        on_device: bool = False,
    ) -> Iterator[tuple[list[Segment], dict[str, tuple[Any, np.ndarray]]]]:
        """Per batch, one forward to the deepest layer asked, then each view's (hidden, pooling mask).

        `on_device` leaves each hidden a float32 torch tensor where the forward ran (for `_pool`)."""
        wanted = frozenset(i for spec in specs.values() for i in spec.layers)
        deepest = max(wanted)
        budget, min_rows = self.forward_limits(len(wanted))
        # rows still to run per text: a text counts for progress once, in the batch that runs its last window
        left = Counter(s.text_index for s in segments) if on_batch is not None else Counter()
        for batch in batches(segments, budget, self.max_batch, min_rows, self.call_tokens):
            ids, mask = pad_batch([s.ids for s in batch], self.pad_id)
            type_ids, _ = pad_batch([s.token_type_ids for s in batch], 0)
            states = self.forward(ids, type_ids, mask, deepest, wanted)
            arrays = {i: states[i].float() if on_device else as_array(states[i]) for i in wanted}
            attention = mask.astype(np.float32)
            special, _ = pad_batch([s.special for s in batch], 1)
            unspecial = attention * (1 - special.astype(np.float32))
            first_windows = np.array([s.window == 0 for s in batch])
            views = {
                name: (
                    combine_layers([arrays[i] for i in spec.layers], spec.combine),
                    _pooling_mask(unspecial if spec.mask_special else attention, first_windows, spec),
                )
                for name, spec in specs.items()
            }
            if on_batch is not None:
                left.subtract(s.text_index for s in batch)
                done = {s.text_index for s in batch if left[s.text_index] == 0}
                on_batch(len(done), int(mask.sum()))
            yield batch, views

    def forward_limits(self, n_states: int) -> tuple[int, int]:
        """(token budget, least rows of any width) of a forward fetching `n_states` hidden states: the
        engine's own, less where those states as float32 could pass `STATES_BYTES_PER_FORWARD`."""
        tokens = STATES_BYTES_PER_FORWARD // (max(n_states, 1) * self.hidden_size * 4)
        widest = max(self.tokenizer.max_tokens, 1)
        return max(1, min(self.token_budget, tokens)), max(1, min(self.min_rows, tokens // widest))

    def _pool(self, hidden: Any, mask: np.ndarray, spec: EmbedSpec) -> np.ndarray:
        """(batch, d) float32 sentence vectors of hidden (batch, tokens, d) float32 under a 0/1 mask.

        `hidden` is a NumPy array, or a torch tensor on a GPU (`pools_on_device`), pooled there."""
        if spec.pooling is Pooling.CLS and spec.prompt_length:
            hidden, mask = _first_kept(hidden, mask), np.ones((len(mask), 1), np.float32)
        if not isinstance(hidden, np.ndarray) and spec.pooling in TENSOR_POOLINGS:
            pooled = pool_tensor(hidden, mask, spec.pooling)
        else:  # NumPy's pooling, which the model's own pooler also takes
            pooler = self._model_pooler if spec.pooling is Pooling.POOLER and self.has_pooler else None
            pooled = pool_sentences(as_array(hidden), mask, spec.pooling, pooler=pooler)
        return _finished(pooled, spec)

    def _model_pooler(self, hidden: np.ndarray) -> np.ndarray:
        """The model's own trained pooler (dense + tanh over the first token): in NumPy from the folder's
        weights where the family's pooler is known exactly, else in torch on the module."""
        light = self._light_pooler() if self._light_pooler is not None else None
        if light is not None:
            return light(hidden)
        import torch

        module = self.model
        pooler = self.family.pooler(module)
        if pooler is None:  # pooler weights in the folder that transformers' class never builds (GTE, Nomic)
            raise InvalidSpec(
                f"this {self.family.name} model's weights hold a pooler, but transformers builds none for "
                "this family, so no trained pooler runs; use pooling='cls' (the first token) or 'mean'"
            )
        dtype = next(module.parameters()).dtype
        with torch.inference_mode():
            return pooler(torch.from_numpy(hidden).to(self.device, dtype)).float().cpu().numpy()


# The poolings `pool_tensor` runs on torch's device: core/pooling.py's rules (NumPy) in torch, the same
# sums in float32, equal to float32 rounding (a relative ~1e-7; the order of a sum differs between the
# libraries); tests/test_device_pooling.py holds each equal to its rule
TENSOR_POOLINGS = frozenset(
    {Pooling.MEAN, Pooling.MEAN_SQRT_LEN, Pooling.FIRST_LAST_AVG, Pooling.MAX, Pooling.CLS}
)


def pool_tensor(hidden: Any, mask: np.ndarray, pooling: Pooling) -> np.ndarray:
    """(batch, d) float32 sentence vectors of a (batch, tokens, d) float32 torch tensor, pooled on its device
    under a 0/1 mask (batch, tokens), as `pool_sentences` pools a NumPy array."""
    import torch

    if pooling not in TENSOR_POOLINGS:
        raise InvalidSpec(f"pooling {pooling.value!r} is not pooled on the device")
    if pooling is Pooling.CLS:
        return as_array(hidden[:, 0])
    weights = torch.from_numpy(np.asarray(mask, dtype=np.float32)).to(hidden.device)[..., None]
    if pooling is Pooling.MAX:
        floor = torch.tensor(-1e9, device=hidden.device)
        return as_array(torch.where(weights == 0, floor, hidden).amax(dim=1))
    count = weights.sum(dim=1).clamp_min(1e-9)
    total = (hidden * weights).sum(dim=1)
    return as_array(total / (count.sqrt() if pooling is Pooling.MEAN_SQRT_LEN else count))


def as_array(state: Any) -> np.ndarray:
    """A hidden state as a float32 NumPy array: a runner's as it is, a torch tensor widened and copied."""
    if isinstance(state, np.ndarray):
        return state if state.dtype == np.float32 else state.astype(np.float32)
    return state.detach().float().cpu().numpy()


def _first_kept(hidden: Any, mask: np.ndarray) -> Any:
    """(batch, 1, d): each row's first token that `mask` (batch, tokens) keeps, as sentence-transformers 6's
    cls pooling reads it (the mask's argmax, 0 where it keeps none): the first token after a prompt that
    include_prompt false leaves out, not the [CLS] the prompt's tokens were read with."""
    first = np.asarray(mask).argmax(axis=1)
    if isinstance(hidden, np.ndarray):
        return hidden[np.arange(len(first)), first][:, None]
    import torch

    rows = torch.arange(len(first), device=hidden.device)
    return hidden[rows, torch.from_numpy(first).to(hidden.device)][:, None]


def _check_views(specs: Mapping[str, EmbedSpec]) -> None:
    if any(spec.combine is Combine.STACK and len(spec.layers) > 1 for spec in specs.values()):
        raise InvalidSpec(
            "combine='stack' keeps each layer's vector apart, which only token and word rows store "
            "(level='tokens' or 'words'); pool sentence vectors with combine mean, sum or concat"
        )


def _kept(tokens: Tokens, spec: EmbedSpec) -> np.ndarray:
    """(tokens,) 0/1 float32: which of a text's tokens its sentence vector pools (`_pooling_mask`'s rule
    over a whole text: specials out under mask_special, the prompt out where include_prompt is false)."""
    keep = np.array([0.0 if s and spec.mask_special else 1.0 for s in tokens.special_tokens_mask], np.float32)
    keep[: spec.prompt_length] = 0.0
    return keep


def _pooling_mask(mask: np.ndarray, first_windows: np.ndarray, spec: EmbedSpec) -> np.ndarray:
    """(batch, tokens) pooling mask; include_prompt false leaves the prompt (in first windows) out."""
    if not spec.prompt_length:
        return mask
    mask = mask.copy()  # the attention mask itself is still counted for on_batch
    mask[first_windows, : spec.prompt_length] = 0
    return mask


def _finished(pooled: Any, spec: EmbedSpec) -> np.ndarray:
    """Pooled sentence vectors (batch, d) as the engine hands them back: unit length where `spec`
    normalizes, float32."""
    return np.asarray(unit(pooled) if spec.normalize else pooled, dtype=np.float32)
