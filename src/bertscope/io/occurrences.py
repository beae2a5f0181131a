"""Search a token or word store by occurrence: where a word is used, and where it is used in a given sense.

A store of token rows (`level="tokens"`) or word rows (`level="words"`) is read in chunks of whole texts
(a text's rows never straddle two chunks). A word's occurrence is a word row, or the pieces of one word
(same text, same word index) whose span spells it; its vector is the stored word row, or the mean of
its pieces' stored rows, all stored layers concatenated. The query word is embedded in its context the
store's way (same model, layers, combine, subword pooling, long-text policy, stored precision), so a
context taken from the corpus finds its own occurrence at cosine 1.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..core._enums import SubwordPooling
from ..core.given import quoted_text
from ..core.pooling import pool_words, whole_words, word_spans
from ..core.renamed import top_k_given
from ..core.renamed_fields import renamed_field
from ..core.similarity import unit
from ..core.spec import EmbedOptions
from ..core.tokens import check_texts, say_cut
from ..errors import (
    BackendUnavailable,
    BertscopeError,
    CorpusError,
    InvalidInput,
    InvalidSpec,
    ModelLoadError,
)
from .formats import suffixes_where
from .index import index_copies
from .index_copy import CheckedCopy
from .level_table import level_of
from .levels import unpooled_spec, vector_columns
from .parquet_checked import CheckedParquet
from .query import model_for, recorded_limit, same_model
from .stores import Store, open_store

__all__ = [
    "Occurrence",
    "Occurrences",
    "checked_context",
    "search_occurrences",
    "occurrence_vectors",
    "token_store",
    "token_store_made",
]

_SNIPPET = 40
# A context cut at the model's limit, as a query (io/query.py) and as the store's own texts were.
_CONTEXT_CUT = "the context is cut as the store's texts were; give a shorter context around the word"
_CHUNK_ROWS = 65536


@dataclass
class Occurrence:
    """One use of a word: its text's id, `position` its word number in the text (0-based, specials not
    counted, a word of several pieces once: a words store's row position), character span, a marked
    snippet, its cosine."""

    id: str
    position: int
    start: int
    end: int
    snippet: str
    score: float | None = None


@dataclass
class Occurrences:
    """The occurrences found (nearest first when a context was given) and how many the store holds;
    `context_span`: the (start, end) characters of the word's use in the context searched with, its first
    where the context uses it more than once (None without a context); `n_dropped`: the context's word
    pieces the model's limit cut (0 where it was whole, or without a context), as embed_tokens counts them."""

    word: str
    context: str | None
    n_occurrences: int
    hits: list[Occurrence] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    context_span: tuple[int, int] | None = None
    n_dropped: int = 0

    @property
    def total(self) -> int:
        """Deprecated: the old name of `n_occurrences` (the same count), as senses names it."""
        return renamed_field(self.n_occurrences, owner="Occurrences", name="n_occurrences", old="total")


def token_store(store: str | Path | Store) -> Store:
    """Open a store and check that it holds token or word rows (not one vector per text)."""
    opened = store if isinstance(store, Store) else open_store(store)
    level = opened.settings.get("level", "sentence")
    if level_of(level).pooled or not opened.rules.columns:  # occurrences are rows that are not pooled
        where = suffixes_where(lambda r: r.columns)
        raise CorpusError(
            f"{opened.path} holds {level} rows in {opened.path.suffix}; occurrences need a {where} store of "
            "token or word rows: bertscope embed -i CORPUS -o OUT.parquet --tokens (or --level words)"
        )
    return opened


def search_occurrences(
    store: str | Path | Store,
    *,
    word: str,
    context: str | None = None,
    top_k: int | None = None,
    model: Any = None,
    layers: Any = None,
    exact: bool = False,
    k: int | None = None,
) -> Occurrences:
    """The stored occurrences of `word`: the `top_k` nearest to its use in `context` by cosine, or the
    first `top_k` (default 5, as `search`; `k=` is its older spelling, still read). A context that uses
    the word more than once is searched with its first use (`Occurrences.context_span`).

    `model` and `layers` default to the store's own; others are refused (vectors would not compare), and
    so are both without `context` (nothing is embedded).
    When every vector column has a fresh index (`bertscope index build STORE`), the occurrences' vectors
    are read from the index's copies instead of scanning the store's vectors, with the same exact
    cosines; `exact=True`, no index or a stale one (warned) scan the store.
    """
    k = top_k_given(top_k, k, old="k", default=5, error=InvalidInput)
    unread = [name for name, value in (("model", model), ("layers", layers)) if value is not None]
    if context is None and unread:
        raise InvalidInput(
            f"{' and '.join(f'{name}=' for name in unread)} embed the context, and without context= the "
            f"occurrences of {word!r} are listed as stored: add context=TEXT, or drop "
            f"{' and '.join(f'{name}=' for name in unread)}"
        )
    checked_context(context)
    opened = token_store(store)
    target = _checked_word(word)
    m = None
    if context is not None:
        # the context cut as the stored rows were; a folder of other files refused before it loads
        made = token_store_made(opened)
        m = model_for(opened.settings, model, store_limit=True, path=opened.path, made=made)
        _check_same(opened, m, layers)
        _one_word(word, m)  # before the context: a word the tokenizer splits is in no context either
    query, span, dropped = (
        (None, None, 0) if m is None or context is None else _query_vector(opened, target, context, m)
    )
    found = Occurrences(
        word=word, context=context, n_occurrences=0, settings=opened.settings, context_span=span,
        n_dropped=dropped,
    )  # fmt: skip
    best: list[tuple[float, int, Occurrence]] = []
    seen: Counter[str] = Counter()
    # With a fresh index of every vector column, only the occurrences' own rows are read (from the
    # index's memory-mapped copies); the store's vector columns, most of its bytes, are not scanned.
    copies = None if query is None or exact else index_copies(opened)
    offset = 0
    cut = _CutWords(opened, m)
    for chunk in _chunks(opened, with_vectors=query is not None and copies is None):
        matches = _matches(chunk, target, opened.settings["level"], seen, cut, copies=copies, offset=offset)
        offset += chunk.num_rows
        for occurrence, vector in matches:
            found.n_occurrences += 1
            if query is None:
                if len(found.hits) < k:
                    found.hits.append(occurrence)
                continue
            occurrence.score = float(unit(vector[None])[0] @ query)
            item = (occurrence.score, -found.n_occurrences, occurrence)
            (heapq.heappush if len(best) < k else heapq.heappushpop)(best, item)
    if found.n_occurrences == 0:
        raise _never(word, opened, seen, m, given=store)
    if query is not None:
        found.hits = [item[2] for item in sorted(best, key=lambda x: (-x[0], -x[1]))]
    return found


def occurrence_vectors(
    store: str | Path | Store, *, word: str, limit: int = 2000, layer: int | None = None
) -> tuple[list[Occurrence], np.ndarray]:
    """The first `limit` occurrences of `word` and their vectors (n, d): all stored layers concatenated,
    or the one stored `layer` of a store made with combine="stack"."""
    opened = token_store(store)
    target = _checked_word(word)
    hits: list[Occurrence] = []
    vectors: list[np.ndarray] = []
    seen: Counter[str] = Counter()
    cut = _CutWords(opened, None)
    for chunk in _chunks(opened, with_vectors=True, only=_layer_column(opened, layer)):
        for occurrence, vector in _matches(chunk, target, opened.settings["level"], seen, cut):
            hits.append(occurrence)
            vectors.append(vector)
            if len(hits) >= limit:
                return hits, np.stack(vectors)
    if not hits:
        raise _never(word, opened, seen, given=store)
    return hits, np.stack(vectors)


def checked_context(context: str | None) -> None:
    """Refuse an empty context, named as the context (embedding it would name it "text 0")."""
    if isinstance(context, str) and not context.strip():
        raise InvalidInput("the context is empty: give a sentence that uses the word, or leave it out")


def _checked_word(word: str) -> str:
    if not isinstance(word, str) or not word.strip() or len(word.split()) != 1:
        raise InvalidInput(
            f"word {quoted_text(word) if isinstance(word, str) else repr(word)}: give one word (no spaces), "
            "as it is written in the texts"
        )
    return word.strip().casefold()


def _never(
    word: str, store: Store, seen: Counter[str], model: Any = None, *, given: object
) -> BertscopeError:
    """Why `word` was not found: the tokenizer reads it as several words, or it never occurs (and the
    close words that do). The store is named as the caller gave it (`given`): its path, or "the store"
    for an opened Store (the service's, named by the client, whose path on the server is not theirs)."""
    if not word.strip().isalpha():  # letters alone are one word to every tokenizer
        try:
            # the model at hand (a context's), else the store's tokenizer alone: a search with no context
            # loads no model (the service's no-context requests among them) to say a word is missing
            _one_word(word, model if model is not None else _store_tokenizer(store))
        except (ModelLoadError, InvalidSpec, BackendUnavailable):
            pass  # the store's model or tokenizer cannot be read here: say what the rows show
    close = difflib.get_close_matches(word.casefold(), list(seen), n=5, cutoff=0.6)
    hint = f"; close words that do: {', '.join(close)}" if close else "; no close word occurs either"
    where = "the store" if isinstance(given, Store) else str(given)
    return CorpusError(f"{quoted_text(word)} never occurs in {where}{hint}")


def _store_tokenizer(store: Store) -> Any:
    """The store's model folder as a torch-free view (it tokenizes as the model does), or None where only a
    load could read it (a hub id, code shipped with the folder)."""
    from ..core.folder import FolderView

    return FolderView.open(store.settings.get("model_arg"))  # None: the bundled model, as model_for loads it


def _one_word(word: str, model: Any) -> None:
    """Refuse a word the model's tokenizer reads as several (low-lying: low - lying), as `plot words` and
    `contextuality` do: its rows are those words' rows, so it never occurs as one."""
    from ..research.contextuality import given_words  # its check, shared; loaded only for such a word

    if model is None or word.strip().isalpha():
        return
    split = given_words(model, [word])[1]
    if split:
        raise InvalidInput(f"word {quoted_text(word)}: {next(iter(split.values()))}")


def _layer_column(store: Store, layer: int | None) -> str | None:
    """The vector column of one stored layer (None: every vector column), checked against the store."""
    if layer is None:
        return None
    settings = store.settings
    kept = [int(n) for n in settings.get("layers") or ()]
    if settings.get("combine") == "stack" and len(kept) > 1:
        if layer in kept:
            return f"layer_{layer}"
    elif kept == [layer]:
        return None
    joined = ", ".join(map(str, kept))
    combine = settings.get("combine")
    how = "one column each" if combine == "stack" else f"combined by {combine}"
    raise InvalidInput(
        f"layer {layer}: {store.path} keeps layers {joined} ({how}), numbered 0..L as stored; choose one of "
        "them, or embed the corpus again with layers= including it and combine='stack'"
    )


def _chunks(store: Store, *, with_vectors: bool, only: str | None = None) -> Iterator[pa.Table]:
    """The store's rows, whole texts at a time (a text's tail is carried into the next chunk)."""
    checked = CheckedParquet(store.path)
    schema = checked.file.schema_arrow
    vectors = vector_columns(schema)
    wanted = [only] if only else vectors
    columns = [n for n in schema.names if n not in vectors or (with_vectors and n in wanted)]
    carry: pa.Table | None = None
    for table in checked.tables(columns, _CHUNK_ROWS):
        table = table if carry is None else pa.concat_tables([carry, table])
        starts = np.flatnonzero(table.column("position").to_numpy() == 0)
        cut = int(starts[-1]) if len(starts) else 0
        if cut:
            yield table.slice(0, cut)
        carry = table.slice(cut)
    if carry is not None and carry.num_rows:
        yield carry


class _CutWords:
    """Whether a stored text's last word is one the truncation cut ("bank" of bank ##note), which is no
    use of the word: asked of the token rows (which keep every piece) and of the word rows of a store
    written before word rows left such a word out (`whole_words` not in its settings), only for a cut
    text (`truncated`) that keeps its text and whose last word is the one searched for.

    The store's tokenizer tells (`Tokens.last_word_cut`), at the store's recorded limit: `model`'s (the
    caller's, checked as the store's), else read from the store's model folder alone (no model is
    loaded). Where neither can be had (the folder moved away, a hub name), the word is kept, as before.
    """

    def __init__(self, store: Store, model: Any) -> None:
        self.store = store
        self.model = model
        self.asked = store.settings.get("long", "truncate") == "truncate" and not (
            store.settings.get("level") == "words" and store.settings.get("whole_words")
        )

    def __call__(self, text: str) -> bool:
        """Whether the truncation cut `text`'s last kept word, as the store's rows were made."""
        from ..core._enums import LongText

        tokenizer = self._store_tokenizer
        if tokenizer is None:
            return False
        prompt = self.store.settings.get("prompt") or ""  # an older store's default prompt, as recorded
        return bool(tokenizer.encode_fitted([prompt + text], LongText.TRUNCATE)[0].last_word_cut)

    @cached_property
    def _store_tokenizer(self) -> Any:
        """The store's tokenizer cutting at its recorded limit, or None where it cannot be read (found
        once per search: a folder that cannot be read is not opened again for every cut text)."""
        from ..core.folder import FolderView
        from ..core.tokens import TextTokenizer

        own = getattr(getattr(self.model, "engine", None), "tokenizer", None)
        if own is None:
            try:
                view = FolderView.open(self.store.settings.get("model_arg"))
            except (OSError, ValueError, BertscopeError):  # a folder moved or damaged: listing goes on
                return None
            if view is None:
                return None
            own = view.text_tokenizer
        limit = recorded_limit(self.store.settings) or own.max_tokens
        return TextTokenizer(own.backend, max_tokens=limit, token_types=own.token_types)


def _matches(
    chunk: pa.Table,
    target: str,
    level: str,
    seen: Counter[str],
    cut: _CutWords | None = None,
    *,
    copies: list[CheckedCopy] | None = None,
    offset: int = 0,
) -> Iterator[tuple[Occurrence, np.ndarray]]:
    """(occurrence, vector or empty) for each use of `target` in a chunk of whole texts; a text's last
    word that the truncation cut (`cut`) is none.

    The vector is the mean of the occurrence's rows of the chunk's vector columns, or with `copies`
    (the store's vector columns, whole) of their rows `offset` + the chunk's row numbers.
    """
    ids = chunk.column("id").to_pylist()
    positions = chunk.column("position").to_numpy()
    starts = chunk.column("start").to_numpy()
    ends = chunk.column("end").to_numpy()
    texts = chunk.column("text").to_pylist() if "text" in chunk.column_names else [None] * len(ids)
    names = vector_columns(chunk.schema)
    matrix = np.concatenate([_floats(chunk.column(n)) for n in names], axis=1) if names else None
    groups = _word_groups(chunk, level)
    text_of: str | None = None
    first = np.flatnonzero(positions == 0)
    owner = np.searchsorted(first, np.arange(len(ids)), side="right") - 1
    truncated = chunk.column("truncated").to_numpy(zero_copy_only=False) if cut and cut.asked else None
    number, text_row = 0, -1
    for index, (rows, spelled) in enumerate(groups):
        row = rows[0]
        if first[owner[row]] != text_row:  # a new text: its words are numbered from 0
            text_row, number = int(first[owner[row]]), 0
        text_of = texts[text_row]
        start, end = int(starts[rows[0]]), int(ends[rows[-1]])
        if text_of is not None:  # the space a byte-level BPE piece's offsets keep ("Ġbank") is no part of it
            # nor are the next row's characters, where a combining mark after the word is its own piece
            after = rows[-1] + 1
            nxt = [(int(starts[after]), int(ends[after]))] if after < len(ids) and positions[after] else []
            start, end = word_spans(text_of, [(start, end), *nxt], [[0]])[0]
        written = text_of[start:end] if text_of is not None else spelled
        if not written.strip():
            continue  # whitespace alone is no word, as `text_words` (the word rows) leaves it out
        # The word number: a word row's position; a token row's position counts pieces and specials.
        word_number = int(positions[row]) if level == "words" else number
        number += 1
        key = written.casefold()
        last = index + 1 == len(groups) or owner[groups[index + 1][0][0]] != owner[row]
        if key == target and last and truncated is not None and truncated[text_row] > 0 and text_of:
            assert cut is not None
            if cut(text_of):
                continue  # the start of a longer word the truncation cut, not a use of this one
        seen[key] += 1
        if key != target:
            continue
        if copies is not None:
            at = [offset + r for r in rows]
            blocks = [np.asarray(c[at], dtype=np.float32) for c in copies]
            vector = np.concatenate(blocks, axis=1).mean(axis=0)
        else:
            vector = matrix[rows].mean(axis=0) if matrix is not None else np.empty(0, np.float32)
        snippet = _snippet(text_of, start, end) if text_of is not None else f"«{written}»"
        yield Occurrence(ids[row], word_number, start, end, snippet), vector


def _word_groups(chunk: pa.Table, level: str) -> list[tuple[list[int], str]]:
    """Row indices of each word in a chunk and the word as its pieces spell it."""
    if level == "words":
        return [([i], w) for i, w in enumerate(chunk.column("word").to_pylist())]
    pieces = chunk.column("token").to_pylist()
    words = chunk.column("word_index").to_pylist()
    positions = chunk.column("position").to_numpy()
    groups: list[tuple[list[int], str]] = []
    for i, (piece, word) in enumerate(zip(pieces, words, strict=True)):
        if word is None:
            continue
        if groups and positions[i] != 0 and words[i - 1] == word and groups[-1][0][-1] == i - 1:
            groups[-1][0].append(i)
            groups[-1] = (groups[-1][0], groups[-1][1] + _bare(piece))
        else:
            groups.append(([i], _bare(piece)))
    return groups


def _bare(piece: str) -> str:
    """A piece without its word-continuation or word-start marks (WordPiece ##, SentencePiece ▁, BPE Ġ)."""
    return piece.removeprefix("##").lstrip("\u2581\u0120")


def _snippet(text: str, start: int, end: int) -> str:
    left = max(0, start - _SNIPPET)
    right = min(len(text), end + _SNIPPET)
    head = ("…" if left else "") + text[left:start]
    tail = text[end:right] + ("…" if right < len(text) else "")
    return " ".join(f"{head}«{text[start:end]}»{tail}".split())


def _floats(column: Any) -> np.ndarray:
    array = column.combine_chunks()
    width = array.type.list_size
    return np.asarray(array.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, width)


def _query_vector(store: Store, target: str, context: str, m: Any) -> tuple[np.ndarray, tuple[int, int], int]:
    """(d,) unit vector of `target` in `context`, made exactly as the store made its rows by `m` (the
    store's model, checked, at its recorded token limit), the characters of that use (the first), and the
    context's pieces the limit cut (said: `say_cut`)."""
    settings = store.settings
    options = {key: settings[key] for key in ("long", "stride") if key in settings}
    stacked = settings.get("combine") == "stack"
    combine = "concat" if stacked else settings.get("combine", "mean")
    # the store's recipe, its prompt included (none since token and word rows take none; an older store's
    # default prompt as it was recorded), so that the context's spans and vectors are made as its rows were
    recipe = EmbedOptions(
        settings["layers"], combine, long=options.get("long", "truncate"), stride=options.get("stride")
    )
    spec = unpooled_spec(m, recipe, prompt=settings.get("prompt") or "")
    tok = m.token_vectors(check_texts([context]), spec)[0]
    say_cut([tok.n_dropped], m.max_tokens, _CONTEXT_CUT)
    groups, spans = whole_words(tok)  # a word the cut split ("bank" of bank ##note) is not the word
    if settings["level"] == "words":
        # Pooled per layer, as the word level pools each stacked layer on its own.
        how = SubwordPooling.parse(settings["subword"], what="subword pooling")
        blocks = np.split(tok.vectors, len(settings["layers"]), axis=1) if stacked else [tok.vectors]
        vectors = [np.concatenate([pool_words(b, [g], how) for b in blocks], axis=1) for g in groups]
    else:
        vectors = [tok.vectors[g] for g in groups]
    for (start, end), rows_of_word in zip(spans, vectors, strict=True):
        if context[start:end].casefold() == target:
            # Round through the stored precision first, as the stored rows were.
            stored = rows_of_word.astype(np.float16 if settings.get("precision") == "float16" else np.float32)
            return unit(stored.astype(np.float32).mean(axis=0)[None])[0], (start, end), tok.n_dropped
    covered = spans[-1][1] if spans else 0  # the end of the last whole word: a cut one is past it
    if re.search(rf"(?<!\w){re.escape(target)}(?!\w)", context[covered:].casefold()):
        raise InvalidInput(
            f"the context's use of {quoted_text(target)} falls past the model's {m.max_tokens} tokens or is "
            "cut by them (the context is cut there, as the store's rows were): give a shorter context around "
            "the word"
        )
    within = (
        f" within the model's {m.max_tokens} tokens (the context is cut there, as the store's rows were, and "
        "a word the cut splits is not whole)"
        if tok.n_dropped
        else ""
    )
    raise InvalidInput(
        f"the context {quoted_text(context)} does not contain the word {quoted_text(target)} as a whole "
        f"word{within}; give a sentence that uses it"
    )


def _check_same(store: Store, model: Any, layers: Any) -> None:
    """Refuse a model (other files: `query.same_model`) or layers other than the store's: their vectors
    would not compare."""
    from ..core.layers import parse_layers

    settings = store.settings
    made = token_store_made(store)
    same_model(settings, model, path=store.path, made=made)
    if layers is not None and list(parse_layers(layers, model.n_layers)) != list(settings["layers"]):
        raise CorpusError(
            f"{store.path} was made with {made}; layers {layers!r} were asked for: "
            "search it with the store's own layers (leave layers= out)"
        )


def token_store_made(store: Store) -> str:
    """What a token store was made with, as a refusal of another model or layers names it."""
    settings = store.settings
    return f"{settings.get('model')}, layers {settings.get('layers')}, combine {settings.get('combine')}"
