"""The service's shared state: the model, the limits, the loaded post-processings and the one worker.

Routes take a `Service` and hand model work to it: `sentences` (batched with other requests) or
`on_worker` (anything else that touches the model).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import contextvars
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi.concurrency import run_in_threadpool

from ..core._enums import LongText
from ..core.fingerprint_facts import store_fingerprint
from ..core.finite import refuse_non_finite
from ..core.post import PostProcessor, load_post
from ..core.results import SentenceEmbeddings
from ..core.spec import EmbedOptions, EmbedSpec, Recipe, resolve
from ..core.tokens import Tokens, check_texts
from ..errors import InvalidInput, InvalidSpec
from ..research.baseline import Baseline
from .answers import current_client, reserve
from .batching import Batcher
from .bounds import least_tokens
from .error_answers import AnswerTooLarge, OverBudget, TooManyInputs
from .gate import FairGate
from .settings import ServerSettings
from .tickets import Ticket
from .timing import record_jobs, tokenizing

if TYPE_CHECKING:
    from ..model import Model

__all__ = ["Service", "request_token_budget"]

T = TypeVar("T", bound=Sequence[Sized])  # per text, something of len() tokens
R = TypeVar("R")
_INLINE_TEXTS = 16
_BASELINES_KEPT = 8
# Characters past which a request's texts are tokenized one request at a time, on one thread. Tokenizing a
# text whole holds hundreds of bytes a token until it is cut (long="truncate": 4.2 MB of words, 900k
# tokens, 612 MB), and the body budget lets 16 such bodies in at once; gated, the memory they hold
# together is one's. One thread, not one at a time on any: the allocator keeps what a thread freed for
# that thread (glibc's arenas), so big texts taken in turn by the pool's live threads would each keep
# their peak (3 in turn: 2.8 GB; on one thread: 1.4 GB). Requests under it, nearly all, never wait.
_BIG_CHARACTERS = 1 << 18
# Big requests one client may have waiting for the gate (`gate.FairGate`); one more is a 429.
_BIG_WAITING_PER_CLIENT = 4
# Set on the gate's thread: a request's work runs there in its turn, and `gated` runs it as it is.
_ON_GATE = threading.local()


class CompactEncoding:
    """A `tokenizers.Encoding`'s ids, pieces, offsets and special mask, as `tei._simple` reads them, in
    arrays of machine integers (about 13 bytes a token, where the Encoding holds hundreds): a big
    tokenization is turned into these at once, inside the gate, and its Encodings dropped."""

    __slots__ = ("_pieces", "ids", "special_tokens_mask", "starts", "stops")

    def __init__(self, encoding: Any, pieces: Sequence[str]) -> None:
        self.ids = array.array("I", encoding.ids)
        offsets = encoding.offsets
        self.starts = array.array("I", (start for start, _ in offsets))
        self.stops = array.array("I", (stop for _, stop in offsets))
        del offsets
        self.special_tokens_mask = array.array("B", encoding.special_tokens_mask)
        self._pieces = pieces

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def tokens(self) -> Iterator[str]:
        """Each token's piece, from the vocabulary (what the Encoding's tokens are)."""
        return (self._pieces[i] for i in self.ids)

    @property
    def offsets(self) -> Iterator[tuple[int, int]]:
        """Each token's (start, stop) characters."""
        return zip(self.starts, self.stops, strict=True)


_INLINE_CHARS = 20_000
_COPIES = 8  # float32 copies of each kept token-layer while a request runs (`request_token_budget`)


def request_token_budget(model: Model) -> int:
    """--max-request-tokens' default: what an eighth of this machine's memory holds.

    A token costs hidden x 4 bytes for each layer a route keeps of it, and about 8 such copies while
    a request runs (windows overlapping, stitched, float64 sums): tokens x layers kept x hidden x 32
    bytes stay under an eighth of the memory (the container's limit where it has one), and never under
    4 windows of the model.
    """
    per = model.info().hidden_size * 4 * _COPIES
    return max(4 * model.max_tokens, _memory_bytes() // 8 // per)


def _memory_bytes() -> int:
    """The machine's memory, or the container's limit (cgroup v2) when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with contextlib.suppress(OSError, ValueError):
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def cut_offer(long: Any) -> str:
    """The cut a refusal may offer: `"long": "truncate"` where the request read long texts whole (window);
    nothing where they were cut already, refused, or cannot be cut (late chunking, TEI's routes)."""
    whole = long is not None and LongText.parse(long, what="long-text policy") is LongText.WINDOW
    return ', or cut them ("long": "truncate")' if whole else ""


def _window_tokens(tokens: Tokens, max_tokens: int, stride: int) -> int:
    """Half the tokens of the windows `stride` apart that a text is run in (`Tokens.n_windows`), or its
    own tokens where that is more: one window, or a stride out of range (the engine refuses it)."""
    try:
        windows = tokens.n_windows(max_tokens, stride)
    except InvalidInput:
        return len(tokens)
    return len(tokens) if windows == 1 else max(len(tokens), windows * max_tokens // 2)


def _chars(items: list[Any]) -> int:
    """Characters of checked texts, both parts of a pair counted."""
    return sum(len(t) if isinstance(t, str) else sum(map(len, t)) for t in items)


def _raw_chars(texts: Any) -> int:
    """Characters of texts not checked yet (a text, texts, [A, B] pairs), anything else counted as 0."""
    if isinstance(texts, str):
        return len(texts)
    if not isinstance(texts, (list, tuple)):
        return 0
    return sum(
        len(t) if isinstance(t, str) else sum(len(p) for p in t if isinstance(p, str))
        for t in texts
        if isinstance(t, (str, list, tuple))
    )


def _mark_gate_thread() -> None:
    _ON_GATE.on = True


def _small(texts: Any) -> bool:
    """Whether texts are few and short enough to check on the event loop itself."""
    items = [texts] if isinstance(texts, str) else texts
    if len(items) > _INLINE_TEXTS:
        return False
    return sum(len(t) if isinstance(t, str) else sum(map(len, t)) for t in items) <= _INLINE_CHARS


class Service:
    """What the endpoints share: the model, the limits and the worker."""

    def __init__(self, model: Model, settings: ServerSettings, batcher: Batcher) -> None:
        self.model = model
        self.settings = settings
        self.batcher = batcher
        self.name = model.info().source
        self.posts = {name: load_post(path) for name, path in settings.posts}
        self.max_request_tokens = settings.max_request_tokens or request_token_budget(model)
        # Baselines on the shipped reference, by spec: fitting one embeds the whole reference corpus.
        self._baselines: OrderedDict[str, Baseline] = OrderedDict()
        # Big requests wait here for their turn, on the event loop, by client (`tokenizing`).
        what = f"requests of over {_BIG_CHARACTERS:,} characters to tokenize"
        self.big_tokenizing = FairGate(_BIG_WAITING_PER_CLIENT, what=what)
        # The gate's one thread (`_BIG_CHARACTERS`), started when the first big request comes.
        self._big_thread = ThreadPoolExecutor(
            1, thread_name_prefix="bertscope-big-tokenize", initializer=_mark_gate_thread
        )

    @cached_property
    def fingerprint(self) -> dict[str, Any]:
        """The served model's fingerprint (id, settings, file hashes: what its stores carry), made once:
        hashing the weights takes a moment."""
        return store_fingerprint(self.model)

    @cached_property
    def compute_type(self) -> str:
        """TEI's x-compute-type: cpu, or gpu where the model runs on an accelerator."""
        return "cpu" if str(self.model.info().device).startswith("cpu") else "gpu"

    def recipe(self, options: EmbedOptions, post: str | None = None) -> Recipe:
        """A request's options resolved once: the spec, and the loaded post-processing called `post`."""
        return resolve(self.model, options.with_post(self.post(post)))

    def post(self, name: str | None) -> PostProcessor | None:
        """The loaded post-processing called `name` (None for none), or InvalidSpec naming those loaded."""
        if name is None:
            return None
        if name not in self.posts:
            loaded = ", ".join(self.posts) or "none (start bertscope serve with --post NAME=FILE)"
            raise InvalidSpec(f"post: no post-processing named {name!r} is loaded; loaded: {loaded}")
        return self.posts[name]

    def check_count(self, n: int, *, splittable: bool = False, field: str = "inputs") -> None:
        """Raise TooManyInputs when a request's `field` carries more than --max-inputs items; a request
        for sentence vectors (`splittable`) passes under --auto-split, and only its refusal names it."""
        limit = self.settings.max_inputs
        if n <= limit or (splittable and self.settings.auto_split):
            return
        fix = "--auto-split or a higher --max-inputs" if splittable else "a higher --max-inputs"
        raise TooManyInputs(
            f"{field}: {n} in one request, over the limit of {limit} per request (--max-inputs); send "
            f"several requests, or start bertscope serve with {fix}"
        )

    async def sentences(self, texts: Any, spec: EmbedSpec, *, field: str = "inputs") -> SentenceEmbeddings:
        """Sentence vectors (n, d) through the shared worker, checked first, split under --auto-split
        (`field`: the texts' field in the request, named by a refusal)."""
        n = 1 if isinstance(texts, str) else len(texts)
        self.check_count(n, splittable=True, field=field)
        # A client with its share of the queue's jobs waiting is refused before its texts are tokenized.
        self.refuse_when_full(-(-n // self.settings.max_inputs))
        with self.batcher.arriving():
            with tokenizing():
                if _small(texts):
                    # A thread hop costs more than tokenizing a few short texts, and under load waits for
                    # the GIL.
                    tokens = self._prepare(texts, spec)
                else:
                    tokens = await self.tokenizing(texts, self._prepare, texts, spec)
            self.check_tokens(sum(map(len, tokens)), long=spec.long)
            self.check_windows(tokens, spec.long, spec.stride)
            futures = self._queue(tokens, spec)
        return await self._joined(futures)

    async def fitted_sentences(
        self, tokens: list[Tokens], spec: EmbedSpec, *, field: str = "inputs"
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) of tokens already fitted (`Engine.prepare`, `fit`), through the worker."""
        self.check_count(len(tokens), splittable=True, field=field)
        self.check_tokens(sum(map(len, tokens)))
        with self.batcher.arriving():
            futures = self._queue(tokens, spec)
        return await self._joined(futures)

    async def _joined(self, futures: list[Future[Any]]) -> SentenceEmbeddings:
        """The parts' vectors as one, in order; vectors that are not finite refused (answered 500 in the
        service's words: error_answers), never sent as NaN."""
        found = SentenceEmbeddings.joined(await self._wait(futures))
        refuse_non_finite(found.vectors)
        return found

    def _queue(self, tokens: list[Tokens], spec: EmbedSpec) -> list[Future[Any]]:
        """Queue the tokens in parts of --max-inputs, all or none; one future per part."""
        size = self.settings.max_inputs
        chunks = [tokens[i : i + size] for i in range(0, len(tokens), size)]
        parts = [(chunk, sum(map(len, chunk))) for chunk in chunks]
        if len(parts) > self.batcher.max_queue:
            raise TooManyInputs(
                f"inputs: {len(tokens)} need {len(parts)} parts of {size}, more than the queue "
                f"holds ({self.batcher.max_queue}, --max-queue); send at most "
                f"{size * self.batcher.max_queue} per request, or start bertscope serve with a higher "
                "--max-queue or --max-inputs"
            )
        return self.batcher.sentences(parts, spec, current_client())

    def _prepare(self, texts: Any, spec: EmbedSpec) -> list[Tokens]:
        # Everything that can reject a request happens here, before the queue: a batch only gets good
        # work, and the tokens made here are the ones embedded (a request is tokenized once).
        items = check_texts(texts, pairs=True)
        least = self.least_tokens(items, spec.long, over=self.max_request_tokens)
        self.check_tokens(least, least=True, long=spec.long)
        return self.gated(items, lambda: self.model.engine.prepare(items, spec))

    async def baseline(
        self, options: EmbedOptions, reference: list[str] | None = None, *, post: str | None = None
    ) -> Baseline:
        """`Model.baseline` for these options and the loaded post-processing called `post`, fitted on the
        worker.

        Fitted once per spec and post on the shipped reference sentences and kept (the last few); a
        request's own reference (at most --max-inputs texts) is fitted for that request alone.
        """
        keywords: dict[str, Any] = {f.name: getattr(options, f.name) for f in fields(options)}
        keywords["post"] = self.post(post)
        if reference is not None:
            self.check_count(len(reference), field="reference")
            # The reference is embedded like the sentences: counted and held to the same token budget.
            counted = await self.tokenizing(
                reference, lambda: self.count_tokens(reference, options.long, stride=options.stride)
            )
            count = self.check_tokens(counted, long=options.long)
            texts = check_texts(reference)

            def fit() -> Baseline:
                return self.model.baseline(reference=texts, **keywords)

            return await self.on_worker(fit, n_tokens=count)
        key = json.dumps({**resolve(self.model, options).spec.as_dict(), "post": post}, sort_keys=True)
        if key not in self._baselines:
            fitted = await self.on_worker(lambda: self.model.baseline(**keywords))
            self._baselines[key] = fitted
            while len(self._baselines) > _BASELINES_KEPT:
                self._baselines.popitem(last=False)
        self._baselines.move_to_end(key)
        return self._baselines[key]

    async def on_worker(self, fn: Callable[[], Any], *, n_tokens: int | None = None) -> Any:
        """Run `fn` on the worker thread that owns the model (`n_tokens`: what it runs, when known)."""
        return (await self._wait([self.batcher.call(fn, n_tokens, current_client())]))[0]

    def refuse_when_full(self, n_jobs: int) -> None:
        """QueueFull (429 with Retry-After), the answer the queue would give this request of `n_jobs`
        jobs, when its client already has its share of the queue's jobs waiting: checked before the
        request is tokenized or cut (`FairQueue.refuse_share_full`), so a flood's refusals cost no CPU."""
        if n_jobs <= self.batcher.max_queue:  # more parts than the queue holds: `_queue` says so
            self.batcher.refuse_share_full(n_jobs, current_client())

    def check_tokens(
        self, count: int, *, layers: int = 1, least: bool = False, stride: int | None = None, long: Any = None
    ) -> int:
        """`count` tokens (`least`: at least that many; `stride`: counted in windows that step so), or
        OverBudget (413) when they (x the layers kept of each) pass the budget; the refusal offers the cut
        only where the request's `long` read texts whole (window): cut already, or refused, or on a route
        whose texts cannot be cut, it would not help."""
        limit = self.max_request_tokens
        cost = count * layers
        if cost > limit:
            kept = f" x {layers} layers kept = {cost:,}" if layers > 1 else ""
            runs = "at least " if least else ""
            how = (
                f" (long texts in windows every {stride} tokens, half of each window counted)"
                if stride
                else ""
            )
            fix = "a longer stride, " if stride else ""
            raise OverBudget(
                f"this request runs {runs}{count:,} tokens{how}{kept}, over the limit of {limit:,} per "
                f"request (--max-request-tokens); send {fix}fewer or shorter texts{cut_offer(long)}"
            )
        return count

    def check_windows(
        self,
        tokens: Sequence[Tokens],
        long: Any,
        stride: int | None,
        *,
        layers: int = 1,
        cuttable: bool = True,
    ) -> None:
        """OverBudget (413) when the windows a short `stride` makes of long texts pass the budget.

        The budget counts a text read whole once, which the default stride (half a window) keeps true:
        each token is in two windows of which half is counted. A shorter stride puts each token in more
        windows (stride 1: in every one of 254), so a 3,000-token text would run 700,000 tokens and hold
        their vectors; each long text counts here as half the tokens of its windows, when that is more.
        """
        if stride is None or LongText.parse(long, what="long-text policy") is not LongText.WINDOW:
            return
        runs = sum(_window_tokens(t, self.model.max_tokens, stride) for t in tokens)
        if runs > sum(map(len, tokens)):
            self.check_tokens(runs, layers=layers, stride=stride, long=long if cuttable else None)

    def check_answer(self, numbers: int, made_of: str, fix: str, *, least: bool = False) -> None:
        """AnswerTooLarge (413) when an answer would hold more than --max-answer-floats numbers; else the
        answer is reserved (`answers.reserve`) for the request being served, before its work: a 503 with
        Retry-After when the answers' budget, or its client's share of it, has no room now."""
        self.refuse_answer(numbers, made_of, fix, least=least)
        reserve(numbers)

    def refuse_answer(self, numbers: int, made_of: str, fix: str, *, least: bool = False) -> None:
        """AnswerTooLarge (413) when an answer would hold more than --max-answer-floats numbers (`least`:
        at least that many, counted so far), reserving nothing: `check_answer`'s refusal alone."""
        limit = self.settings.max_answer_floats
        if numbers > limit:
            hold = "at least " if least else ""
            raise AnswerTooLarge(
                f"the answer would hold {hold}{numbers:,} numbers ({made_of}), over the limit of "
                f"{limit:,} (--max-answer-floats); {fix}"
            )

    def tokenized(
        self, items: list[Any], long: Any, fields: int, fix: str, tokenize: Callable[[], T]
    ) -> tuple[T, int]:
        """`tokenize()` and its token count, for an answer of `fields` values a token: refused on a cheap
        count first where the texts are read whole, then on the count made; a big request's tokenization
        waits for the one before (`gated`), and its Encodings become `CompactEncoding`s there.

        The answer is reserved (`check_answer`) on the cheap count before any tokenizing: a request the
        answers' budget has no room for is refused before it costs a tokenization (a 1.6M-token text
        costs about 800 MB while it is tokenized); the rest is reserved on the count made."""
        made_of = f"tokens x {fields} values"
        over = self.settings.max_answer_floats // fields
        least = self.least_tokens(items, long, over=over)
        if not least and _chars(items) > _BIG_CHARACTERS and self._whole(long):
            # Under the limit for sure, yet big: counted anyway, so its answer is reserved before the work.
            least = least_tokens(self.model.tokenizer.backend, items, stop_at=over)
        self.check_answer(least * fields, made_of, fix, least=True)
        made = self.gated(items, lambda: self._compact(tokenize(), items))
        count = sum(map(len, made))
        self.check_answer(count * fields, made_of, fix)
        return made, count

    def _compact(self, made: T, items: list[Any]) -> T:
        """A big request's `tokenizers.Encoding`s as `CompactEncoding`s (anything else as it is)."""
        if _chars(items) <= _BIG_CHARACTERS or not isinstance(made, list) or not made:
            return made
        if not all(type(e).__name__ == "Encoding" for e in made):
            return made
        pieces = self._pieces
        for i, encoding in enumerate(made):
            made[i] = CompactEncoding(encoding, pieces)
            del encoding  # each Encoding is freed as soon as its arrays are made
        return made

    @cached_property
    def _pieces(self) -> list[str]:
        """The tokenizer's piece of every id (added tokens too), as an Encoding's tokens name them."""
        vocab = self.model.tokenizer.backend.get_vocab(with_added_tokens=True)
        pieces = [""] * (max(vocab.values(), default=-1) + 1)
        for piece, token_id in vocab.items():
            pieces[token_id] = piece
        return pieces

    @staticmethod
    def _whole(long: Any) -> bool:
        return LongText.parse(long, what="long-text policy") is LongText.WINDOW

    async def tokenizing(self, texts: Any, fn: Callable[..., R], *args: Any) -> R:
        """`fn(*args)`, work that tokenizes `texts` (raw or checked), off the event loop: on the shared
        thread pool, or, past `_BIG_CHARACTERS`, in its client's turn at the gate on the gate's one
        thread. The wait for the turn is on the event loop, so waiters hold no thread of the pool that
        answers `/info` and builds answers; a client with `_BIG_WAITING_PER_CLIENT` waiting gets 429."""
        if _raw_chars(texts) <= _BIG_CHARACTERS:
            return await run_in_threadpool(fn, *args)
        gate = self.big_tokenizing
        await gate.enter(current_client())
        try:
            context = contextvars.copy_context()  # the request's client and answer reservation
            future = self._big_thread.submit(context.run, fn, *args)
        except BaseException:
            gate.leave()
            raise
        loop = asyncio.get_running_loop()

        def done(_: Future[R]) -> None:
            # The turn ends when the work does, even if its client left (the thread cannot be stopped).
            with contextlib.suppress(RuntimeError):  # the loop closed at shutdown
                loop.call_soon_threadsafe(gate.leave)

        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def gated(self, items: list[Any], tokenize: Callable[[], R]) -> R:
        """`tokenize()` of the checked texts `items`: past `_BIG_CHARACTERS`, on the gate's one thread.
        Every route that tokenizes a request's texts goes through here (or `tokenized`, `count_tokens`,
        `_prepare`), inside `tokenizing`, which waited for the request's turn at the gate and runs it on
        that thread; a caller that did not is still run there, one at a time, in the order it came."""
        if _chars(items) <= _BIG_CHARACTERS or getattr(_ON_GATE, "on", False):
            return tokenize()
        return self._big_thread.submit(contextvars.copy_context().run, tokenize).result()

    def least_tokens(self, items: list[Any], long: Any, *, over: int) -> int:
        """At least how many tokens checked texts make under `long`, counted without tokenizing them whole
        (`bounds.least_tokens`), and only where it could pass `over`: read whole (window), with more
        characters than `over` (a piece has fewer tokens than characters, bar odd scripts). 0 otherwise.

        A request refused on this count costs a count, not the Tokens of every text it sent.
        """
        if LongText.parse(long, what="long-text policy") is not LongText.WINDOW or _chars(items) <= over:
            return 0
        return least_tokens(self.model.tokenizer.backend, items, stop_at=over)

    def count_tokens(
        self,
        texts: Any,
        long: Any = "window",
        *,
        layers: int = 1,
        stride: int | None = None,
        cuttable: bool = True,
    ) -> int:
        """Tokens the texts run under the long-text policy `long` (window: read whole), before any forward;
        OverBudget first when they pass --max-request-tokens (x `layers`) for sure, before tokenizing, and
        when a short window `stride` makes them run more (`check_windows`). `cuttable`: whether the
        request may ask for the cut (not late chunking's documents, nor a store's recorded policy)."""
        items = check_texts(texts)
        over = self.max_request_tokens // layers
        offered = long if cuttable else None
        self.check_tokens(self.least_tokens(items, long, over=over), layers=layers, least=True, long=offered)
        tokens = self.gated(items, lambda: self.model.tokenize(items, long=long))
        self.check_windows(tokens, long, stride, layers=layers, cuttable=cuttable)
        return sum(len(t) for t in tokens)

    async def _wait(self, futures: list[Future[Any]]) -> list[Any]:
        """The futures' results; when the request is cancelled (its client left), the work is abandoned."""
        try:
            done = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        except asyncio.CancelledError:
            self.batcher.abandon(futures)
            raise
        record_jobs(f for f in futures if isinstance(f, Ticket))  # TEI's x-queue-time, x-inference-time
        return done

    def texts(self, inputs: Any, field: str = "inputs") -> list[str]:
        """Checked texts (and (A, B) pairs, given as 2-lists) within the per-request limit."""
        items = check_texts(inputs, pairs=True)
        self.check_count(len(items), field=field)
        return items
