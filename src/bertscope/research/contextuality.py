"""How contextual a word's vector is at each layer (Ethayarajh 2019), measured on the user's own corpus.

Per layer, for words seen in several sentences:
    self_similarity   mean cosine between a word's vectors in different sentences
    intra_sentence    mean cosine between each word of a sentence and the sentence's mean word vector
    baseline          anisotropy: mean cosine over distinct random pairs of word occurrences from different
                      sentences (every such pair of the sample where it allows no more than asked)
    *_adjusted        the figure minus its baseline (self and intra: the baseline above; mev: the share
                      the first principal direction holds of the baseline's sample, the paper's adjustment)
    mev               share of the variance of a word's (uncentred) occurrence vectors on their first
                      principal direction, as in the paper: 1 for a vector that never changes, and at
                      least 1/n of n vectors (1/2 of 2), so a word of few occurrences scores high

Each figure says its n (`settings`: n_occurrences per word, n_baseline_pairs, n_intra_sentences, the
sentences of two words or more that intra_sentence averages), and `note` says where it is small: a word
measured on fewer than FEW_OCCURRENCES occurrences, a baseline of fewer than FEW_PAIRS distinct pairs (and
whether more pairs or more sentences would give more).

A context is a distinct sentence: sentences that tokenize to the same ids (identical, or case variants to
an uncased model) are merged before anything is measured (they would
give a word identical vectors, self-similarity 1, and pair a sentence with its own copy in the baseline);
`settings` says how many repeats were merged, with the seed and size of the baseline's random sample.

A word is one of the tokenizer's pre-tokenised words (its word ids: "don't" is three, `don ' t`, to a
WordPiece tokenizer), matched without case; a word named twice, or in two cases, is measured once. Named
words that cannot be measured (split by the tokenizer, or in fewer than two distinct sentences) are
left out and named in `note`. The corpus streams through the model CHUNK sentences at a time: memory
holds one chunk's token vectors, the kept occurrences, the baseline's sample, a 16-byte hash per distinct
sentence (to merge repeats) and, without `words`, a count per distinct word (to choose the most
frequent), never the corpus. Choosing the most frequent words takes two passes: a corpus that can be
read again (a list, a file re-opened) is read twice; a one-pass iterator (a generator, stdin) has its
distinct sentences kept between the passes, the one thing that then grows with it.

The rows are "static" and the layers 0..L. "static" is the mean of the word's piece rows in the input
embedding matrix (the word part of layer 0, with no position, no segment and no LayerNorm): its
self-similarity is 1 (to float precision) whenever the tokenizer gives the word the same pieces (always in
an uncased WordPiece vocabulary). Layer 0 is the embedding layer's output, LayerNorm(word + position +
segment): two occurrences at the same position in different sentences have identical layer-0 vectors,
and at other positions they differ only through the position row, so layer-0 self-similarity is high but
below 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import SubwordPooling
from ..core.pooling import pool_words, text_words
from ..core.progress import progress_callback
from ..core.renamed import top_k_given
from ..core.renamed_fields import renamed_field
from ..core.similarity import unit
from ..core.spec import whole_number
from ..core.texts_given import iter_checked, text_items
from ..core.tokens import refuse_unordered
from ..errors import InvalidInput
from .states import CHUNK, check_seed, chunked_token_matrices, layered, tokens_key

if TYPE_CHECKING:
    from ..core.encoder import Encoder

__all__ = [
    "BASELINE_PAIRS",
    "FEW_OCCURRENCES",
    "FEW_PAIRS",
    "MAX_BASELINE_PAIRS",
    "MIN_CONTEXTS_LEAST",
    "Contextuality",
    "contextuality",
    "word_occurrences",
]

# The baseline's sample keeps two occurrences per pair, each with a vector for every layer, in memory: the
# pairs are bounded so that memory is (10000 pairs: 20000 x 8 x 384 float32, 246 MB, for the bundled model).
MIN_CONTEXTS = 5  # sentences a most frequent word needs, by default
MIN_CONTEXTS_LEAST = 2  # a word is measured across two distinct sentences at least: fewer chooses nothing
# Under these a figure is said to rest on few: self-similarity of n occurrences averages n(n-1)/2 pairs
# (1 pair at n = 2) and MEV of n vectors is at least 1/n; the baseline, a mean of P cosines, moves from
# seed to seed by their standard deviation over sqrt(P): 0.13 to 0.20 by layer for the bundled model on
# tests/data/contexts.txt, so 0.02 to 0.03 at 50 pairs.
FEW_OCCURRENCES = 5
FEW_PAIRS = 50
MAX_BASELINE_PAIRS = 10_000
MIN_CONTEXTS_MEANS = "distinct sentences a word needs; a word is compared across two at least"
BASELINE_PAIRS = "random pairs for the baseline; each holds two word vectors of every layer in memory"
_PAIR_BLOCK = 1024


@dataclass
class Contextuality:
    """Per-layer records (layer "static", 0..L) and per-word self-similarity; `n_occurrences`, each word's
    count of occurrences measured (in distinct sentences; `occurrences` is its deprecated old name);
    `settings`: model, n_sentences and n_distinct_sentences (`repeats_merged`), n_intra_sentences (those
    of two words or more, which intra_sentence averages), seed, baseline_pairs, n_baseline_pairs (the
    distinct pairs from different sentences measured; `baseline_pairs_used` its older name),
    n_baseline_sample, n_baseline_pairs_possible (the distinct such pairs that sample allows) and the
    words' choice; `note` names
    the words left out and why, and the figures that rest on few occurrences or pairs, or is None."""

    records: list[dict[str, Any]]
    per_word: dict[str, list[float]]
    n_occurrences: dict[str, int]
    settings: dict[str, Any] = field(default_factory=dict)
    note: str | None = None

    @property
    def occurrences(self) -> dict[str, int]:
        """Deprecated: the old name of `n_occurrences` (the same counts; docs/names.md keeps `occurrences`
        for a list of occurrences)."""
        return renamed_field(
            self.n_occurrences, owner="Contextuality", name="n_occurrences", old="occurrences"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: {"records", "per_word", "n_occurrences", "settings", "note"}."""
        return {
            "records": self.records,
            "per_word": self.per_word,
            "n_occurrences": self.n_occurrences,
            "settings": self.settings,
            "note": self.note,
        }


@dataclass
class _Occurrences:
    """Word occurrences found in a corpus: per word, sentence index and vectors per layer (the first
    `max_contexts`), and `seen`: every occurrence counted, kept or not."""

    sentences: dict[str, list[int]]
    layered: dict[str, list[np.ndarray]]
    static: dict[str, list[np.ndarray]]
    seen: dict[str, int] = field(default_factory=dict)

    def capped(self, kept: Sequence[str]) -> str:
        """'bank: the first 200 of 230 occurrences' for each of `kept` past the cap, '' where none is."""
        cut = [
            f"{w}: the first {len(self.sentences[w])} of {self.seen[w]} occurrences"
            for w in kept
            if self.seen.get(w, 0) > len(self.sentences.get(w, []))
        ]
        return ", ".join(cut)


def _words_of(tok: Any) -> tuple[list[list[int]], list[str]]:
    groups, spans = text_words(tok)
    return groups, [tok.text[s:e].lower() for s, e in spans]


def frequent_words(model: Encoder, sentences: Iterable[str], *, top: int, min_contexts: int) -> list[str]:
    """The `top` most frequent alphabetic words that occur in at least `min_contexts` sentences."""
    counts: Counter[str] = Counter()
    iterator = iter(sentences)
    while chunk := list(islice(iterator, CHUNK)):  # a chunk's Tokens at a time, never the corpus's
        for tok in model.tokenize(chunk, long="window"):  # every word
            counts.update({w for w in _words_of(tok)[1] if w.isalpha()})
    return [w for w, n in counts.most_common() if n >= min_contexts][:top]


def given_words(model: Encoder, words: Sequence[str] | str) -> tuple[list[str], dict[str, str]]:
    """The named words stripped and lowercased, each once, that are one word to the tokenizer; and those
    that are not (word: why). A lone string is one word."""
    listed = [words] if isinstance(words, str) else list(words)
    if any(not isinstance(w, str) for w in listed):
        raise InvalidInput("words: give a list of strings, e.g. words=['bank', 'river']")
    names = list(dict.fromkeys(w.strip().lower() for w in listed if w.strip()))
    if not names:
        raise InvalidInput("words: no word given (only blanks); name a word or more, e.g. words=['bank']")
    kept: list[str] = []
    split: dict[str, str] = {}
    for name, tok in zip(names, model.tokenize(names), strict=True):
        parts = _words_of(tok)[1]
        if parts == [name]:
            kept.append(name)
        else:
            shown = f"{len(parts)} words, {' '.join(parts)}" if parts else "no word"
            split[name] = f"the tokenizer reads {shown}: name one of them"
    return kept, split


class _Intra:
    """The intra-sentence figures summed over sentences (static, 0..L), a running sum: one row per
    sentence is never kept."""

    def __init__(self, count: int) -> None:
        self.total, self.sentences = np.zeros(count + 1), 0

    def add(self, row: list[float]) -> None:
        self.total += row
        self.sentences += 1

    def mean(self) -> np.ndarray:
        """(L+2,) mean over the sentences of two words or more; nan where there were none."""
        return self.total / self.sentences if self.sentences else np.full(len(self.total), np.nan)


def word_occurrences(
    model: Encoder,
    sentences: Iterable[str],
    words: Sequence[str],
    *,
    max_contexts: int = 200,
    sample: int = 4000,
    seed: int = 0,
    progress: bool | None = None,
    total: int | None = None,
) -> Any:
    """Target words' vectors (L+1, d) and static vectors per sentence (one pass over `sentences`, which may
    stream), the mean intra-sentence figures (static, 0..L), and a uniform sample of `sample` word
    occurrences for the anisotropy baseline (`sample=0`: none, where no baseline is read). A sentence is
    keyed by its position in `sentences`: give distinct sentences where a repeat must be the same context
    (`contextuality` does). `progress` as `layer_states`'s, over `total` sentences (None: their number
    where `sentences` has one)."""
    targets = {w.lower() for w in words}
    # windowed, so a word past the model's limit is counted in its context, never dropped in silence
    spec = model.spec(layers="all", combine="concat", pooling="mean", long="window")
    count = model.n_layers + 1
    found = _Occurrences({}, {}, {})
    intra = _Intra(count)
    pool = _Reservoir(sample, np.random.default_rng(seed))
    if total is None and isinstance(sentences, Sequence):
        total = len(sentences)
    with progress_callback(total, enabled=progress) as on_batch:
        matrices = chunked_token_matrices(model, sentences, spec, on_batch=on_batch)
        for index, (tok, vectors) in enumerate(matrices):
            _offer(model, index, tok, vectors, count, found, intra, pool, targets, max_contexts)
    return found, intra.mean(), pool.items, intra.sentences


def _offer(
    model: Encoder, index: int, tok: Any, vectors: np.ndarray, count: int, found: _Occurrences,
    intra: _Intra, pool: _Reservoir, targets: set[str], max_contexts: int,
) -> None:  # fmt: skip
    """One sentence's words: its intra-sentence figures, the baseline's sample, the target occurrences.
    What is kept is copied, so that no kept row holds its sentence's whole array."""
    groups, names = _words_of(tok)
    if not groups:
        return
    layered = pool_words(vectors, groups, SubwordPooling.MEAN).reshape(len(groups), count, -1)
    rows = model.embedding_rows(tok.ids)  # float32, read from the folder where the model is light
    static = pool_words(rows, groups, SubwordPooling.MEAN)
    if len(groups) > 1:
        intra.add([_intra(static)] + [_intra(layered[:, k]) for k in range(count)])
    for name, lay, sta in zip(names, layered, static, strict=True):
        pool.offer((index, lay, sta))
        if name not in targets:
            continue
        found.seen[name] = found.seen.get(name, 0) + 1
        if len(found.sentences.get(name, [])) < max_contexts:
            found.sentences.setdefault(name, []).append(index)
            found.layered.setdefault(name, []).append(lay.copy())
            found.static.setdefault(name, []).append(sta.copy())


class _Reservoir:
    """A uniform sample of at most `size` of the items offered (reservoir sampling, seeded by `rng`); an
    item's arrays are copied when it is kept (a row of a sentence's array would hold the whole array)."""

    def __init__(self, size: int, rng: np.random.Generator) -> None:
        self.size, self.rng, self.seen = size, rng, 0
        self.items: list[tuple[int, np.ndarray, np.ndarray]] = []

    def offer(self, item: tuple[int, np.ndarray, np.ndarray]) -> None:
        if not self.size:  # no sample asked (a picture reads none): no draw per word
            return
        self.seen += 1
        slot = len(self.items) if len(self.items) < self.size else int(self.rng.integers(0, self.seen))
        if slot < self.size:
            index, lay, sta = item
            kept = (index, lay.copy(), sta.copy())
            if slot == len(self.items):
                self.items.append(kept)
            else:
                self.items[slot] = kept


def contextuality(
    model: Encoder,
    sentences: Iterable[str],
    *,
    words: Sequence[str] | None = None,
    top_k: int | None = None,
    min_contexts: int | None = None,
    max_contexts: int = 200,
    baseline_pairs: int = 2000,
    seed: int = 0,
    progress: bool | None = None,
    top: int | None = None,
) -> Contextuality:
    """Self-similarity, intra-sentence similarity, anisotropy baseline, adjusted figures and MEV per layer.

    Sentences that tokenize to the same ids (identical, or case variants to an uncased model) are one
    context (merged first; `settings["repeats_merged"]` counts them). The `words` (default: the `top_k`
    most frequent, default 10, in `min_contexts` sentences or more, default 5, refused with words; `top=`
    is the older spelling of `top_k=`, still read) keep at most
    `max_contexts` occurrences each; the baseline is `baseline_pairs` distinct random pairs of occurrences
    from different sentences, drawn with `seed` from a sample of 2 x `baseline_pairs` occurrences (every
    such pair of the sample where it allows no more). `progress`: a progress bar or log lines on stderr (None:
    from 256 sentences). `sentences` stream (see the module docstring for what memory keeps)."""
    layered(model, "contextuality of layers")
    # Checked before any work: a negative top would slice from the end, a zero one refuse confusingly.
    if words is not None and (top_k is not None or top is not None):  # silently ignored before
        raise InvalidInput(
            f"top_k={top_k if top is None else top} chooses the most frequent words, which words= replaces: "
            "leave top_k out or drop words"
        )
    # Ignored in silence before; the CLI refuses it too. The default's value is let through while the
    # callers that pass it whatever words says (Model.contextuality, the CLI) still do.
    if words is not None and min_contexts is not None:
        raise InvalidInput(
            f"min_contexts={min_contexts} applies without words= (it chooses the most frequent words, which "
            "words= names instead): leave min_contexts out or drop words"
        )
    min_contexts = MIN_CONTEXTS if min_contexts is None else min_contexts
    if isinstance(words, (list, tuple)) and not words:
        raise InvalidInput(
            "words=[] names no word: name one or more, or leave words out for the most frequent"
        )
    top = top_k_given(top_k, top, old="top", default=10, meaning="the most frequent words measured")
    whole_number(min_contexts, "min_contexts", least=MIN_CONTEXTS_LEAST, meaning=MIN_CONTEXTS_MEANS)
    whole_number(max_contexts, "max_contexts", least=2, meaning="occurrences kept per word")
    whole_number(baseline_pairs, "baseline_pairs", most=MAX_BASELINE_PAIRS, meaning=BASELINE_PAIRS)
    check_seed(seed)
    refuse_unordered(sentences)
    if isinstance(sentences, str):  # list() would make each character a sentence
        raise InvalidInput(
            f"sentences={sentences[:30]!r} is one string: give a list of sentences (a word is compared "
            "across them), e.g. read from a file"
        )
    items = text_items(sentences)  # refused here if no stream of texts, before any work
    contexts_of = _Distinct(model, items)
    # A corpus that can be read again is read twice: first to count its distinct sentences (the
    # progress's total) and choose the most frequent words, then to measure. A one-pass stream (a
    # generator, stdin) is measured as it comes with words given; without, its distinct sentences are
    # kept for the second pass, the one thing that grows with it.
    once = isinstance(items, Iterator)
    first: Iterable[str] = list(contexts_of.stream()) if once and not words else contexts_of.stream()
    if words:
        chosen, left_out = given_words(model, words)
        if not once:
            for _ in first:  # counted only
                pass
    else:
        chosen, left_out = frequent_words(model, first, top=top, min_contexts=min_contexts), {}
        if not chosen:
            raise InvalidInput(
                f"no word occurs in {min_contexts} or more distinct sentences of the corpus "
                f"({contexts_of.distinct} distinct); lower min_contexts, give a larger corpus, or name words"
            )
    distinct = first if once else contexts_of.stream()
    found, intra, pool, n_intra = word_occurrences(
        model, distinct, chosen, max_contexts=max_contexts, sample=2 * baseline_pairs, seed=seed,
        progress=progress, total=None if once and words else contexts_of.distinct,
    )  # fmt: skip
    n_given, n_distinct = contexts_of.given, contexts_of.distinct
    contexts = {w: len(set(found.sentences.get(w, []))) for w in chosen}
    kept = [w for w in chosen if contexts[w] >= 2]
    # a word past the cap is counted on its first max_contexts occurrences: the cap, not the corpus, is short
    capped = {w for w in chosen if found.seen.get(w, 0) > max_contexts}
    among = f" among its first {max_contexts} occurrences (max_contexts={max_contexts})"
    left_out.update(
        {
            w: f"in {contexts[w]} distinct sentence(s){among if w in capped else ''}, 2 needed"
            for w in chosen
            if contexts[w] < 2
        }
    )
    note = _left_out_note(left_out)
    if not kept:
        fix = "raise max_contexts, " if capped & set(left_out) else ""
        repeats = n_given - n_distinct
        # bank/Bank/BANK to an uncased model are one sentence: say why the three count as one
        merged = f" ({repeats} of the {n_given} sentences repeat another as tokens)" if repeats else ""
        raise InvalidInput(
            f"no word to measure: {note}{merged}; {fix}name words that occur in two or more distinct "
            "sentences (one word each, as the tokenizer splits text), or give a larger corpus"
        )
    labels: list[str | int] = ["static", *range(model.n_layers + 1)]
    baseline, used, allowed = _baseline(pool, baseline_pairs, seed)
    mev_baseline = _mev_baseline(pool)
    per_word: dict[str, list[float]] = {}
    mev: dict[str, list[float]] = {}
    for w in kept:
        stacks = [np.stack(found.static[w])] + list(np.stack(found.layered[w]).transpose(1, 0, 2))
        per_word[w] = [_self_similarity(s, found.sentences[w]) for s in stacks]
        mev[w] = [_mev(s) for s in stacks]
    records = []
    for i, label in enumerate(labels):
        self_sim = float(np.mean([per_word[w][i] for w in kept]))
        intra_sim = float(intra[i])
        records.append(
            {
                "layer": label,
                "self_similarity": self_sim,
                "intra_sentence": intra_sim,
                "baseline": baseline[i],
                "self_adjusted": self_sim - baseline[i],
                "intra_adjusted": intra_sim - baseline[i],
                "mev": float(np.mean([mev[w][i] for w in kept])),
                "mev_adjusted": float(np.mean([mev[w][i] for w in kept])) - mev_baseline[i],
            }
        )
    n_occurrences = {w: len(found.sentences[w]) for w in kept}
    settings = {
        "model": model.loaded.source, "n_sentences": n_given, "n_distinct_sentences": n_distinct,
        "repeats_merged": n_given - n_distinct, "n_intra_sentences": n_intra, "seed": seed,
        "baseline_pairs": baseline_pairs, "n_baseline_pairs": used, "baseline_pairs_used": used,
        "n_baseline_sample": len(pool), "n_baseline_pairs_possible": allowed, "max_contexts": max_contexts,
        "words": "given" if words else f"the {top} most frequent in {min_contexts} sentences or more",
    }  # fmt: skip
    notes = [f"words left out: {note}"] if note else []
    if capped := found.capped(
        kept
    ):  # kept in corpus order, so a word past the cap is measured on the corpus's start
        notes.append(f"occurrences kept per word (max_contexts={max_contexts}): {capped}")
    pairs = {w: _pairs_across(found.sentences[w]) for w in kept}
    # a word cut at max_contexts has its count said by the cap's note: the few it rests on were asked for
    uncut = {w: n for w, n in n_occurrences.items() if found.seen.get(w, 0) <= max_contexts}
    notes += _few_note(uncut, pairs)
    notes += _few_pairs_note(used, pool, asked=baseline_pairs, allowed=allowed)
    return Contextuality(records, per_word, n_occurrences, settings, "; ".join(notes) or None)


class _Distinct:
    """The sentences, each first of those that tokenize to the same ids: a sentence given twice, or in
    another case to an uncased model, has identical vectors, so it is one context, not several. Streamed:
    what is kept is a 16-byte hash per distinct sentence; `given` and `distinct` count the last pass."""

    def __init__(self, model: Encoder, items: Iterable[object]) -> None:
        self.model, self.items = model, items
        self.given = self.distinct = 0

    def stream(self) -> Iterator[str]:
        """One pass over the sentences (checked one by one), repeats left out; counted as it goes."""
        seen: set[bytes] = set()
        self.given = self.distinct = 0
        iterator = iter_checked(self.items)
        while chunk := list(islice(iterator, CHUNK)):  # a chunk's Tokens at a time, never the corpus's
            self.given += len(chunk)
            for text, tok in zip(chunk, self.model.tokenize(chunk, long="window"), strict=True):
                key = tokens_key(tok.ids)
                if key not in seen:
                    seen.add(key)
                    self.distinct += 1
                    yield text
        if not self.given:
            raise InvalidInput("no texts given: pass at least one non-empty string")


def _left_out_note(left_out: dict[str, str]) -> str:
    """`zebra (in 0 distinct sentence(s), 2 needed), don't (...)`, the first ten; '' for none."""
    shown = ", ".join(f"{w} ({why})" for w, why in list(left_out.items())[:10])
    return shown + (f" and {len(left_out) - 10} more" if len(left_out) > 10 else "")


def _intra(vectors: np.ndarray) -> float:
    """Mean cosine of each word vector with the sentence's mean word vector."""
    return float((unit(vectors, dtype=np.float64) @ unit(vectors.mean(axis=0), dtype=np.float64)).mean())


def _self_similarity(vectors: np.ndarray, sentence_ids: Sequence[int]) -> float:
    """Mean cosine over pairs of occurrences that come from different sentences."""
    rows = unit(vectors, dtype=np.float64)
    ids = np.asarray(sentence_ids)
    different = ids[:, None] != ids[None, :]
    return float((rows @ rows.T)[np.triu(different, 1)].mean())


def _pairs_across(sentence_ids: Sequence[int]) -> int:
    """How many pairs of occurrences come from different sentences: those self-similarity averages."""
    n = len(sentence_ids)
    return n * (n - 1) // 2 - sum(c * (c - 1) // 2 for c in Counter(sentence_ids).values())


def _few_note(n_occurrences: dict[str, int], word_pairs: dict[str, int]) -> list[str]:
    """The words of under FEW_OCCURRENCES occurrences, with the pairs their self-similarity averages; []
    where none is."""
    if not (few := {w: n for w, n in n_occurrences.items() if n < FEW_OCCURRENCES}):
        return []
    shown = ", ".join(f"{w} ({n} occurrences, {word_pairs[w]} pair(s))" for w, n in few.items())
    return [
        f"few occurrences (under {FEW_OCCURRENCES}): {shown}; self-similarity averages those pairs and "
        "MEV of n vectors is at least 1/n (1/2 of 2), so read these words' figures as rough, or give "
        "more sentences"
    ]


def _few_pairs_note(
    used: int, pool: list[tuple[int, np.ndarray, np.ndarray]], *, asked: int, allowed: int
) -> list[str]:
    """A baseline of under FEW_PAIRS distinct pairs and what would give more: more sentences where the
    sample allows no more pairs and asking for more would not help, else more pairs; [] where it rests
    on enough."""
    if used >= FEW_PAIRS:
        return []
    sentences = len({item[0] for item in pool})
    said = (
        f"the baseline rests on {used} distinct pair(s) of occurrences from different sentences (under "
        f"{FEW_PAIRS}; a sample of {len(pool)} occurrences in {sentences} distinct sentences"
    )
    whole = len(pool) < 2 * asked  # the sample is every word occurrence of the corpus
    if used == allowed and (whole or asked >= FEW_PAIRS):  # asking for more pairs would add none
        every = "every word occurrence of the corpus, " if whole else ""
        return [
            f"{said}, {every}which allow no more): the corpus is too small for a steady baseline; give "
            "more sentences"
        ]
    return [f"{said}): it moves with the seed; give baseline_pairs={FEW_PAIRS} or more"]


def _mev_baseline(pool: list[tuple[int, np.ndarray, np.ndarray]]) -> list[float]:
    """Per row (static, 0..L): MEV of the baseline's sample, uniformly drawn word occurrences: the share
    of their variance the first principal direction holds, what Ethayarajh (2019) subtracts from
    MEV to adjust it for anisotropy."""
    # one layer's (sample, d) at a time: the whole sample stacked would double what the pool holds
    rows = len(pool[0][1])
    layers = (np.stack([item[1][k] for item in pool]) for k in range(rows))
    return [_mev(np.stack([item[2] for item in pool])), *(_mev(layer) for layer in layers)]


def _mev(vectors: np.ndarray) -> float:
    """The share of the rows' (uncentred) variance on their first principal direction: the largest
    eigenvalue of the Gram matrix over its trace, the squared singular values' share without the SVD (a
    (20000, 768) sample: 3.5 s, not 8.2)."""
    rows = np.asarray(vectors, dtype=np.float64)
    gram = rows.T @ rows if rows.shape[0] >= rows.shape[1] else rows @ rows.T  # the smaller of the two
    return float(np.linalg.eigvalsh(gram)[-1] / max(float(np.square(rows).sum()), 1e-24))


def _baseline(
    pool: list[tuple[int, np.ndarray, np.ndarray]], pairs: int, seed: int
) -> tuple[list[float], int, int]:
    """Per row (static, 0..L): mean cosine of random word-occurrence pairs from different sentences, how
    many distinct pairs that was (up to `pairs`), and how many distinct such pairs the sample allows."""
    sentence = np.array([item[0] for item in pool])
    allowed = _pairs_across(sentence.tolist())
    if not allowed:
        # the words measured are in two sentences at least, so the corpus has them: the sample is too small
        raise InvalidInput(
            f"baseline_pairs={pairs} drew no pair of words from two different sentences (its sample of "
            f"{len(pool)} word occurrences, 2 x baseline_pairs, is all from one sentence); give "
            f"baseline_pairs={FEW_PAIRS} or more (fewer are measured where they draw a pair, with a note "
            "that the baseline rests on few)"
        )
    keep = _every_pair(sentence) if allowed <= pairs else _distinct_pairs(sentence, pairs, seed)
    # Summed a block of pairs at a time: the pairs' vectors are never stacked all at once.
    static, layers = 0.0, np.zeros(len(pool[0][1]))
    for start in range(0, len(keep), _PAIR_BLOCK):
        block = keep[start : start + _PAIR_BLOCK]
        a = np.array([pool[i][2] for i, _ in block]), np.stack([pool[i][1] for i, _ in block])
        b = np.array([pool[j][2] for _, j in block]), np.stack([pool[j][1] for _, j in block])
        static += float((unit(a[0], dtype=np.float64) * unit(b[0], dtype=np.float64)).sum())
        layers += (unit(a[1], dtype=np.float64) * unit(b[1], dtype=np.float64)).sum(-1).sum(axis=0)
    return [static / len(keep), *(float(v) / len(keep) for v in layers)], len(keep), allowed


def _every_pair(sentence: np.ndarray) -> list[tuple[int, int]]:
    """Every pair of sample items (i < j) from different sentences: where the sample allows no more than
    the pairs asked, the baseline is their mean, not a draw that repeats some of them."""
    return [
        (i, int(j))
        for i in range(len(sentence))
        for j in np.flatnonzero(sentence[i + 1 :] != sentence[i]) + i + 1
    ]


def _distinct_pairs(sentence: np.ndarray, pairs: int, seed: int) -> list[tuple[int, int]]:
    """`pairs` distinct pairs of sample items from different sentences, drawn with `seed` (the sample
    allows more): a pair drawn twice, in either order, counts once, so the n said is the pairs measured.
    Drawn in rounds of 2 x `pairs` until enough (the first round is the draw taken before repeats were
    dropped, so a large corpus keeps its pairs)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[int, int]] = set()
    keep: list[tuple[int, int]] = []
    while len(keep) < pairs:
        for a, b in zip(*rng.integers(0, len(sentence), size=(2, pairs * 2)).tolist(), strict=True):
            key = (min(a, b), max(a, b))
            if sentence[a] != sentence[b] and key not in seen and len(keep) < pairs:
                seen.add(key)
                keep.append((a, b))
    return keep
