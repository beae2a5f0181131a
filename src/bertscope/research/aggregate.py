"""Static vectors aggregated from a corpus (Bommasani et al. 2020): each word's mean layer-L vector.

Every occurrence of a word in the corpus is embedded in its sentence (the word level of a corpus job:
pieces pooled by `subword`), and the vectors of one word are summed per layer as the corpus streams by.
Word rows go straight into the running sums (`_SummedWords`), never into a batch's Arrow table, and a text
longer than one window is read a few windows at a time (`Engine.token_blocks`): memory grows with the
corpus's vocabulary and a batch's texts, plus a long text's tokens (not its vectors). The reduction is a
`Sink` run by the corpus job's own loop (`io.job.run_level`), so it resumes like every corpus job: after
each batch the running sums, counts and records done are saved at once (float64 sums: a resumed run
equals an unbroken one).

Words are keyed by their text as the tokenizer normalises it (lowercased and accent-stripped for
uncased BERT, as written for cased models). A text over the model's limit is windowed by default, so
every word of it counts; with long="truncate" its end is cut, and the result says how many texts were
(`settings["n_truncated"]`, with a `TruncatedTextsWarning`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core._enums import Combine, Level, SubwordPooling
from ..core.engine import OnBatch
from ..core.exports import ExportFormat, export_format, staged, write_vectors
from ..core.pooling import pool_words, whole_words
from ..core.segments import MIN_ROWS
from ..core.spec import EmbedOptions, reload_arg, stored_settings
from ..encode import say_truncated
from ..errors import CorpusError, InvalidInput, InvalidSpec, TruncatedTextsWarning, caller_level
from ..io.job import JobSummary, run_level
from ..io.level_table import CorpusOptions, make_level
from ..io.levels import CorpusLevel, LevelOptions, Rows, WordLevel
from ..io.readers import Record, Rejects, read_corpus, refuse_fields_without_records
from ..io.sink_base import RecordDigest, Sink
from ..io.sink_settings import going_on, settings_diff, settings_differ
from ..static import refuse_replacing, stand_in, written_files

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.spec import TokenKeywords

__all__ = [
    "AggregatedStatic",
    "TruncatedTextsWarning",
    "layer_column",
    "aggregated",
    "check_export",
    "export_files",
    "static_from_corpus",
    "word_level",
    "reduce_tables",
    "word_key",
]

_STATE = "state.npz"
_SETTINGS = "settings.json"
_OWN = (_STATE, _STATE + ".tmp", _SETTINGS)  # every file a checkpoint folder holds
_SLICE = 2048
# What keeps every word of a long text, said when long="truncate" cut some.
_WINDOW = "long='window' keeps every word"


def layer_column(layers: Sequence[int], layer: int, done: str) -> int:
    """The column of `layer` among the `layers` a result holds: an absolute number (1, 6), or -1 for the
    last of them, else InvalidInput naming those there are. Other negative numbers are refused: `layers=`
    counts them from the model's last layer, which the result does not know."""
    if layer < -1:
        raise InvalidInput(
            f"layer {layer}: give the layer's absolute number, or -1 for the last {done}; these were: "
            f"{list(layers)}"
        )
    chosen = layers[-1] if layer == -1 else layer
    if chosen not in layers:
        raise InvalidInput(f"layer {layer} was not {done}; these were: {list(layers)}")
    return list(layers).index(chosen)


@dataclass
class AggregatedStatic:
    """One vector per corpus word and layer: words (n,), counts (n,), vectors (n, layers, d) float32."""

    words: list[str]
    counts: np.ndarray
    layers: tuple[int, ...]
    vectors: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)
    summary: JobSummary | None = None
    files: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}

    def layer(self, layer: int) -> np.ndarray:
        """(n, d) vectors of one aggregated layer: its absolute number (1, 6), or -1 for the last of them."""
        return self.vectors[:, layer_column(self.layers, layer, "aggregated")]

    def __repr__(self) -> str:
        return f"AggregatedStatic({len(self.words)} words x {len(self.layers)} layers {list(self.layers)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: settings, layers, the number of words (`n_words`) and per word its count (not the
        vectors: export them)."""
        return {
            "n_words": len(self.words),
            "layers": list(self.layers),
            "counts": dict(zip(self.words, self.counts.tolist(), strict=True)),
            "settings": self.settings,
        }

    def export(self, path: str | Path, *, format: str | None = None, overwrite: bool = False) -> list[Path]:
        """Write word, count and vector per word: word2vec text, npy, parquet or projector (see static).

        Several layers write one file set per layer, named `<stem>.layerN<suffix>`. A file it would
        replace (side files too) is refused without `overwrite=True`, as static rows' exports refuse it.
        """
        if not overwrite:
            refuse_replacing(export_files(path, self.layers, format=format))
        written: list[Path] = []
        # one commit for every layer: a layer that fails leaves no other layer's files (a rerun would
        # refuse them) and every file it would replace as it was
        with staged() as stage:
            for k, named in enumerate(_layer_paths(Path(path), self.layers)):
                written += write_vectors(
                    named, format, self.words, self.counts, self.vectors[:, k], stage=stage
                )
        return written


def _layer_paths(path: Path, layers: Sequence[int]) -> list[Path]:
    """The path each layer's file set is written at: `path` for one layer, `<stem>.layerN<suffix>` each."""
    if len(layers) == 1:
        return [path]
    return [path.with_name(f"{path.stem}.layer{layer}{path.suffix}") for layer in layers]


def _word_files(path: Path, fmt: ExportFormat) -> list[Path]:
    """The files `write_vectors` writes for word rows (word and count beside each vector) at `path`, as
    core.exports' writers name them (tests/test_static_corpus_audit7.py proves the two agree)."""
    return written_files(path, fmt, columns=2)


def export_files(path: str | Path, layers: Sequence[int], *, format: str | None = None) -> list[Path]:
    """Every file `AggregatedStatic.export(path, format=format)` writes for `layers`, in its order."""
    path = Path(path)
    fmt = export_format(path, format)
    return [file for named in _layer_paths(path, layers) for file in _word_files(named, fmt)]


def check_export(
    path: str | Path, layers: Sequence[int], *, format: str | None, resume: bool, overwrite: bool,
    checkpoint: Path | None = None,
) -> None:  # fmt: skip
    """Refuse, before any forward, an aggregation that would replace files without `overwrite`: any file
    the export writes (every layer's, side files too). With `resume` and no unfinished state in
    `checkpoint` the existing output is a finished one: nothing to resume. A format or name the export
    refuses ("-", stdout, among them: `export_format`) is refused here, before any forward, too."""
    export_format(Path(path), format)
    if overwrite:
        return
    there = [file for file in export_files(path, layers, format=format) if file.exists()]
    if not there:
        return
    if resume and checkpoint is not None and (checkpoint / _STATE).exists():
        return  # killed after writing its export but before clearing its state: the sink checks the rest
    if resume:
        # embed's wording (io.parts_sink); a layer's files are named when the path itself is none of them
        shown = str(path) if Path(path) in there else f"{path} ({', '.join(map(str, there))})"
        raise CorpusError(
            f"{shown} is already complete: nothing to resume (overwrite=True (--overwrite) redoes it)"
        )
    refuse_replacing(there, CorpusError)  # static rows' exports say it in the same words


def word_key(model: Any) -> Any:
    """The function that turns a word's text into its key: the tokenizer's own normaliser, stripped."""
    normalizer = model.tokenizer.backend.normalizer
    if normalizer is None:
        return str.strip
    return lambda word: normalizer.normalize_str(word).strip()


class _Running:
    """Running float64 sums (words, layers, d) and counts, grown by doubling as new words arrive."""

    def __init__(self, layers: int, width: int) -> None:
        self.words: list[str] = []
        self.index: dict[str, int] = {}
        self.sums = np.zeros((64, layers, width), dtype=np.float64)
        self.counts = np.zeros(64, dtype=np.int64)

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Add (rows, layers, d) vectors to the words `keys` (one per row)."""
        rows = np.fromiter((self._slot(k) for k in keys), dtype=np.int64, count=len(keys))
        # In slices: a float64 copy of a whole batch of long documents' rows would be gigabytes.
        for start in range(0, len(rows), _SLICE):
            part = slice(start, start + _SLICE)
            np.add.at(self.sums, rows[part], vectors[part].astype(np.float64))
        np.add.at(self.counts, rows, 1)

    def _slot(self, key: str) -> int:
        slot = self.index.get(key)
        if slot is None:
            slot = self.index[key] = len(self.words)
            self.words.append(key)
            if slot == len(self.counts):
                self.sums = np.concatenate([self.sums, np.zeros_like(self.sums)])
                self.counts = np.concatenate([self.counts, np.zeros_like(self.counts)])
        return slot

    def save(self, path: Path, done: int, read: str) -> None:
        """Everything so far, the records it covers and their digest (`read`), in one file replaced
        atomically: a resume proves it reads the same records again."""
        n = len(self.words)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as handle:
            words = np.array(self.words, dtype=str)
            np.savez(
                handle, sums=self.sums[:n], counts=self.counts[:n], words=words, done=np.array(done),
                read=np.array(read),
            )  # fmt: skip
        os.replace(tmp, path)

    def load(self, path: Path) -> tuple[int, str | None]:
        """Restore a saved state; the number of records it covers and their digest (None: saved before
        states held one)."""
        with np.load(path, allow_pickle=False) as state:
            read = str(state["read"]) if "read" in state.files else None
            self.words = [str(w) for w in state["words"]]
            self.index = {w: i for i, w in enumerate(self.words)}
            n = len(self.words)
            self.sums = np.zeros((max(64, 2 * n), *state["sums"].shape[1:]), dtype=np.float64)
            self.sums[:n] = state["sums"]
            self.counts = np.zeros(len(self.sums), dtype=np.int64)
            self.counts[:n] = state["counts"]
            return int(state["done"]), read


class AggregateSink(Sink):
    """A corpus job's sink that reduces word rows into running sums instead of writing them."""

    record_fields = ("text_field",)  # a record's id is its place: static --corpus reads no id field

    def __init__(
        self, level: WordLevel, key: Any, *, checkpoint: Path | None, settings: dict[str, Any],
        resume: bool, overwrite: bool,
    ) -> None:  # fmt: skip
        self.level, self.key, self.path = level, key, checkpoint or Path("(memory)")
        self.checkpoint = checkpoint
        width = level.empty().schema.field(level.vector_names()[0]).type.list_size
        self.running = _Running(len(level.spec.layers), width)
        self.names = level.vector_names()
        self.read = RecordDigest("")  # of the records added, saved with the sums
        if checkpoint is not None:
            self._open(checkpoint, settings, resume=resume, overwrite=overwrite)

    def _open(self, folder: Path, settings: dict[str, Any], *, resume: bool, overwrite: bool) -> None:
        if not folder.parent.exists():
            raise CorpusError(f"cannot write {folder}: the folder {folder.parent} does not exist")
        if overwrite:
            _clear(folder, refuse_others=True)
        elif resume and (folder / _SETTINGS).exists():
            stored = json.loads((folder / _SETTINGS).read_text())
            if settings_differ(stored, settings):
                raise CorpusError(
                    f"{folder}: the unfinished aggregation was started with other settings "
                    f"({settings_diff(stored, settings)}); "
                    + going_on(stored, settings, "resume with the same options, or --overwrite")
                )
            if (folder / _STATE).exists():
                self.done, self.saved_input = self.running.load(folder / _STATE)
        elif folder.exists():
            raise CorpusError(
                f"{folder} holds an unfinished aggregation; pass --resume to continue it or --overwrite "
                "to start again"
            )
        folder.mkdir(exist_ok=True)
        (folder / _SETTINGS).write_text(json.dumps(settings, sort_keys=True))

    def write(self, records: list[Record], rows: Any) -> None:
        """Add a batch's word rows to the running sums, then save the state (when checkpointing)."""
        if self.read_before is not None:  # resumed: go on from the records proven read before
            self.read, self.read_before = self.read_before, None
        for record in records:
            self.read.add(record)
        self.add(rows.table, len(records))
        if self.checkpoint is not None:
            self.running.save(self.checkpoint / _STATE, self.done, self.read.hexdigest())

    def add(self, table: Any, texts: int) -> None:
        """Add the word rows of `texts` texts (a word level's Arrow table) to the running sums."""
        blocks = [_matrix(table.column(name)) for name in self.names]
        vectors = np.stack(blocks, axis=1) if len(blocks) > 1 else blocks[0][:, None, :]
        self.running.add([self.key(w) for w in table.column("word").to_pylist()], vectors)
        self.done += texts

    def finish(self) -> list[Path]:
        """The state stays until the caller has written its export (then `abandon` removes it)."""
        return []

    def abandon(self) -> None:
        """Remove the checkpoint folder."""
        if self.checkpoint is not None:
            _clear(self.checkpoint, refuse_others=False)


def _clear(folder: Path, *, refuse_others: bool) -> None:
    """Remove an aggregation's checkpoint: its own files, then the folder if that left it empty. A folder
    holding anything else (a `checkpoint=` naming some other folder) is refused, or kept, never emptied."""
    if not folder.is_dir():
        return
    others = sorted(e.name for e in folder.iterdir() if e.name not in _OWN)
    if others and refuse_others:
        raise CorpusError(
            f"{folder} holds files that are not an aggregation's checkpoint ({', '.join(others[:3])}), so "
            "overwrite leaves it alone: name another checkpoint folder, or remove it yourself"
        )
    for name in _OWN:
        (folder / name).unlink(missing_ok=True)
    if not others:
        folder.rmdir()


class _SummedWords(CorpusLevel):
    """The word level as an aggregation reads it: each batch's word vectors go straight into the running
    sums, and `embed` returns no rows (an empty table with the texts, pieces and truncated texts behind
    it). Texts that fit one window run batched; a longer one a few windows at a time, its words pooled
    as their pieces arrive, so no text's whole (tokens, layers, d) matrix or word table is ever held."""

    name = WordLevel.name

    def __init__(self, level: WordLevel, running: _Running, key: Any) -> None:
        super().__init__(level.model, level.spec, keep_text=False, precision=level.precision)
        self.level, self.running, self.key = level, running, key
        self.words = 0  # word occurrences summed: the job's rows

    def recorded(self) -> dict[str, Any]:
        """The word level's settings."""
        return self.level.recorded()

    def tally(self, table: Any) -> tuple[int, int, int]:
        """As the word level counts its rows."""
        return self.level.tally(table)

    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """Sum the words of `records` into the running sums; the (empty) rows and what was behind them."""
        engine, spec = self.model.engine, self.spec
        fitted = engine.tokenizer.encode_fitted([r.text for r in records], spec.long)
        limit = engine.tokenizer.max_tokens
        short = [tok for tok in fitted if len(tok) <= limit]
        pieces = sum(
            self._add(tok, [m]) for tok, m in engine.fitted_token_matrices(short, spec, on_batch=on_batch)
        )
        # a long text's windows a forward's worth at a time (the engine's token budget, 16 at least)
        windows = max(MIN_ROWS, engine.token_budget // limit)
        for tok in (tok for tok in fitted if len(tok) > limit):
            blocks = engine.token_blocks(tok, spec, windows_per_block=windows, on_batch=on_batch)
            pieces += self._add(tok, blocks)
        truncated = sum(1 for tok in fitted if tok.n_dropped)
        return Rows(self.level.empty(), len(records), pieces, truncated)

    def _add(self, tok: Any, blocks: Iterable[np.ndarray]) -> int:
        """Pool and sum one text's words from its (tokens, k*d) rows given in consecutive blocks; the
        word pieces read. Rows are kept only from the first word not yet complete. A word whose end
        `long="truncate"` cut off is no word of the corpus ("stor" of "storm"): it is left out."""
        groups, spans = whole_words(tok)
        layers = len(self.spec.layers)
        carry: np.ndarray | None = None
        base = first = 0  # the token index of carry's first row; the first word not summed yet
        for block in blocks:
            rows = block if carry is None else np.concatenate([carry, block])
            end = base + len(rows)
            last = first
            while last < len(groups) and groups[last][-1] < end:
                last += 1
            if last > first:
                local = [[i - base for i in group] for group in groups[first:last]]
                parts = np.split(rows, layers, axis=1) if layers > 1 else [rows]
                vectors = np.stack([pool_words(part, local, self.level.subword) for part in parts], axis=1)
                self.running.add([self.key(tok.text[a:b]) for a, b in spans[first:last]], vectors)
                first = last
            keep = groups[first][0] if first < len(groups) else end
            carry, base = rows[keep - base :].copy(), keep
        self.words += len(groups)
        return sum(len(g) for g in groups)


def _matrix(column: Any) -> np.ndarray:
    array = column.combine_chunks()
    return np.asarray(array.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(
        -1, array.type.list_size
    )


def static_from_corpus(
    model: Any,
    corpus: str | Path | list[str],
    *,
    min_count: int = 1,
    subword: SubwordPooling | str = "mean",
    checkpoint: str | Path | None = None,
    export: str | Path | None = None,
    format: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    batch_size: int = 64,
    progress: bool | None = None,
    text_field: str = "text",
    **options: Unpack[TokenKeywords],
) -> AggregatedStatic:
    """Each corpus word's mean vector at each of `layers` over all its occurrences, with its count.

    `model` is a loaded Model. `corpus` is a file (text, JSONL, CSV, Parquet; "-" stdin) or a list of
    texts. A text over the model's limit is windowed (`long="window"`, the default), so all its words
    count; `long="truncate"` cuts its end, and how many texts were cut is `settings["n_truncated"]` and a
    `TruncatedTextsWarning`. With `checkpoint` (a folder) the running sums are saved after every batch
    of `batch_size` texts and `resume=True` continues a killed run exactly; it is removed once the result
    (and `export`, written as `AggregatedStatic.export` does) is complete. Words seen fewer than
    `min_count` times are left out. `options`: `layers` (default 1), `long` (default "window"),
    `stride` (`TokenKeywords`; every layer is kept apart, so no `combine`).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size={batch_size!r}: give a whole number of texts per batch, at least 1")
    level, settings = word_level(model, aggregated(**options), subword)
    _check_min_count(min_count)
    folder = None if checkpoint is None else Path(checkpoint)
    refuse_fields_without_records(corpus, text_field=text_field)  # a .txt has no field to read it from
    rejects = Rejects()
    records = read_corpus(corpus, text_field=text_field, rejects=rejects)
    if export is not None:  # before any forward: a finished output is not replaced by surprise
        check_export(export, level.spec.layers, format=format, resume=resume, overwrite=overwrite,
                     checkpoint=folder)  # fmt: skip
    sink = AggregateSink(level, word_key(model), checkpoint=folder, settings=settings, resume=resume,
                         overwrite=overwrite)  # fmt: skip
    summed = _SummedWords(level, sink.running, sink.key)
    # Messages name the file asked for (`-o agg.vec`), not the checkpoint beside it (agg.vec.parts)
    output = export if export is not None else folder or "memory"
    summary = run_level(
        records, summed, sink, source=corpus, output=output, rejects=rejects, resume=resume,
        batch_size=batch_size, progress=progress,
    )  # fmt: skip
    summary.rows = summed.words
    result = _result(sink, level, settings, summary, min_count, corpus)
    # At the caller's line, however it came here (Model.static_from_corpus, Ray's aggregate_on_ray)
    say_truncated(
        summary.n_truncated, summary.embedded, model.max_tokens, _WINDOW, stacklevel=caller_level() + 1
    )
    if export is not None:
        # check_export refused, before the first forward, what overwrite did not allow
        result.files = result.export(export, format=format, overwrite=True)
        summary.output = Path(export)  # the file the job made, not its checkpoint folder (gone next line)
    sink.abandon()
    return result


def aggregated(**options: Unpack[TokenKeywords]) -> EmbedOptions:
    """The recipe of an aggregation: `layers` (default 1), `long` (default "window": every word of a long
    text counts, as the command line's --long window) and `stride`; each layer kept apart."""
    if (options.get("combine") or Combine.STACK) != Combine.STACK:  # None: the default, as left out
        raise InvalidSpec(
            "an aggregation keeps each of its layers apart (one vector per layer); leave combine out"
        )
    layers = options.get("layers", 1)
    return EmbedOptions(
        layers, Combine.STACK, long=options.get("long") or "window", stride=options.get("stride")
    )


def word_level(
    model: Any, options: EmbedOptions, subword: SubwordPooling | str
) -> tuple[WordLevel, dict[str, Any]]:
    """The word level (every layer in its own column) an aggregation reduces, and its stored settings."""
    asked = LevelOptions(level=Level.WORDS, keep_text=False, subword=subword)
    level = make_level(model, CorpusOptions(replace(options, combine=Combine.STACK), asked))
    assert isinstance(level, WordLevel)
    # min_count applies at the end only: a finished run resumed with another min_count reuses its sums.
    recorded = {**level.recorded(), "kind": "aggregated"}
    return level, stored_settings(model, recorded, reload_arg(model))


def _times(count: int) -> str:
    """`count` occurrences in words: once, 2 times."""
    return "once" if count == 1 else f"{count} times"


def _check_min_count(min_count: int) -> None:
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise InvalidInput(f"min_count={min_count!r}: give a whole number of occurrences, at least 1")


def reduce_tables(
    model: Any, level: WordLevel, settings: dict[str, Any], tables: Iterable[Any], *, min_count: int,
    corpus: object,
) -> AggregatedStatic:  # fmt: skip
    """Aggregate word-level Arrow tables made elsewhere (Ray's actors) as the local job does; a table with
    the word level's `truncated` column counts the texts it cut."""
    _check_min_count(min_count)
    sink = AggregateSink(level, word_key(model), checkpoint=None, settings=settings, resume=False,
                         overwrite=False)  # fmt: skip
    summary = JobSummary(output=Path("memory"))
    for table in tables:
        if table.num_rows:
            texts = int(np.count_nonzero(table.column("position").to_numpy() == 0))
            sink.add(table, texts)
            summary.embedded += texts
            if "truncated" in table.column_names:
                summary.n_truncated += level.tally(table)[2]
    if sink.done == 0:
        raise CorpusError(f"{corpus}: no texts to embed (all empty)")
    result = _result(sink, level, settings, summary, min_count, corpus)
    # At the caller's line, however it came here (Model.static_from_corpus, Ray's aggregate_on_ray)
    say_truncated(
        summary.n_truncated, summary.embedded, model.max_tokens, _WINDOW, stacklevel=caller_level() + 1
    )
    return result


def _result(
    sink: AggregateSink, level: WordLevel, settings: dict[str, Any], summary: JobSummary, min_count: int,
    corpus: object,
) -> AggregatedStatic:  # fmt: skip
    running = sink.running
    n = len(running.words)
    counts = running.counts[:n]
    # A word read as [UNK] summed the unknown token's vectors, not its own: left out as rare words are.
    unspelled = _unspelled(level.model, running.words)
    spelled = np.ones(n, dtype=bool)
    spelled[unspelled] = False
    if not spelled.any():
        raise CorpusError(
            f"{corpus}: the vocabulary spells none of its {n} words (each reads as [UNK], e.g. "
            f"{running.words[0]!r}): no word has a vector of its own"
        )
    keep = np.flatnonzero((counts >= min_count) & spelled)
    if len(keep) == 0:
        counts = np.where(spelled, counts, 0)
        top = int(np.argmax(counts))
        # in the library's words (min_count=, resume=True): the command line reads them as its flags
        raise CorpusError(
            f"{corpus}: no word occurs {_times(min_count)} (the most frequent, {running.words[top]!r}, "
            f"occurs {_times(int(counts[top]))}); give a lower min_count="
            + (f" (the sums are kept in {sink.checkpoint}: add resume=True)" if sink.checkpoint else "")
        )
    # Commonest first, then by first appearance: the order word2vec files use.
    keep = keep[np.argsort(-counts[keep], kind="stable")]
    means = (running.sums[keep] / counts[keep, None, None]).astype(np.float32)
    counted = {
        "n_texts": sink.done,
        "n_truncated": summary.n_truncated,
        "n_words_seen": n,
        "n_words_kept": len(keep),
        "n_words_unspelled": len(unspelled),
    }
    if unspelled:
        example = running.words[unspelled[0]]
        warnings.warn(
            f"{len(unspelled)} word(s) the vocabulary cannot spell left out (e.g. {example!r}, read as "
            f"{list(level.model.pieces(example).tokens)}): their vectors would be [UNK]'s, not theirs",
            stacklevel=caller_level(),
        )
    result_settings = {**settings, **counted}
    return AggregatedStatic(
        [running.words[i] for i in keep], counts[keep].copy(), tuple(level.spec.layers), means,
        result_settings, summary,
    )  # fmt: skip


def _unspelled(model: Any, words: Sequence[str]) -> list[int]:
    """Indices of the words a piece of which stands in for what the vocabulary lacks (`static.stand_in`:
    a special piece the word does not spell, [UNK]); a word of known pieces and an [UNK] is one too."""
    return [i for i, word in enumerate(words) if stand_in(model, word, model.pieces(word)) is not None]
