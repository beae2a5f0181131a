"""A resumable corpus job: read -> embed (the one engine) -> write, in batches, streaming."""

from __future__ import annotations

import errno
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._enums import Level
from ..core.encoder import Encoder, open_encoder
from ..core.folder import BUNDLED
from ..core.renamed_fields import renamed_field
from ..core.spec import reload_arg, stored_settings
from ..core.tokens import named_as
from ..errors import CorpusError, InvalidInput, InvalidSpec, JobInterrupted, Terminated
from ..static_model import StaticModel, is_model2vec, load_static
from .formats import Format, format_of, open_sink, refuse_idle_store_options
from .job_lock import job_lock
from .level_table import CorpusOptions, make_level, refuse_idle_level_options
from .levels import CorpusLevel
from .readers import (
    Record,
    Rejects,
    empty_corpus,
    given_texts,
    read_corpus,
    refuse_fields_without_records,
    source_name,
)
from .sink_base import Sink

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .level_table import CorpusKeywords

__all__ = [
    "JobSummary", "JobInterrupted", "embed_corpus", "nothing_to_embed", "refuse_idle_job_options",
    "refuse_resume_with_overwrite", "run_level",
]  # fmt: skip


@dataclass
class JobSummary:
    """What a corpus job did: texts embedded, skipped and reused, tokens, truncations, time, files.

    `rows` counts the rows written in the unit of the job's `level` (a word, a chunk; a text for sentence
    rows, a token for token rows); `tokens` the word pieces behind them (a word row's pieces, a
    sentence's tokens with its specials). `n_truncated` counts the texts (chunks, for a chunk job) that
    lost tokens to the model's limit, as `SentenceEmbeddings.n_truncated` does; the tokens each lost are
    the store's `truncated` column (`n_dropped` in the library). `truncated`, its old name, still reads
    it, with a DeprecationWarning.
    """

    output: Path
    files: list[Path] = field(default_factory=list)
    embedded: int = 0
    resumed_from: int = 0
    reused: int = 0
    already: int = 0
    empty: int = 0
    rejected: int = 0
    tokens: int = 0
    n_truncated: int = 0
    seconds: float = 0.0
    rejects_file: Path | None = None
    level: Level = Level.SENTENCE
    rows: int = 0

    def line(self) -> str:
        """The one-line summary printed at the end of a job: texts, then the rows in the level's unit
        (`672 words (677 word pieces)`), or the tokens where a row is a text or a token."""
        texts = "text" if self.embedded == 1 else "texts"
        parts = [f"{self.embedded} {texts} embedded", self._rows(), f"{self.n_truncated} truncated"]
        if self.resumed_from:
            parts.append(f"{self.resumed_from} already done")
        if self.already:
            parts.append(f"{self.already} already stored")
        if self.reused:
            parts.append(f"{self.reused} reused by content hash")
        if self.empty:
            parts.append(f"{self.empty} empty skipped")
        if self.rejected:
            parts.append(f"{self.rejected} rejected (see {self.rejects_file})")
        rate = self.embedded / self.seconds if self.seconds else 0.0
        # Long documents go a few a second: "0 texts/s" for 3 texts in 13.6 s said nothing.
        shown = f"{rate:.0f}" if rate >= 10 or rate == 0 else f"{rate:.2g}"
        return f"{', '.join(parts)} in {self.seconds:.1f}s ({shown} texts/s) -> {self.output}"

    @property
    def truncated(self) -> int:
        """Deprecated: the old name of `n_truncated` (the same count), with a DeprecationWarning."""
        return renamed_field(self.n_truncated, owner="JobSummary", name="n_truncated", old="truncated")

    def _rows(self) -> str:
        if self.level in (Level.SENTENCE, Level.TOKENS):
            return f"{self.tokens} tokens"
        pieces = "word pieces" if self.level is Level.WORDS else "tokens"
        return f"{self.rows} {self.level.value} ({self.tokens} {pieces})"


def embed_corpus(
    input_path: str | Path | Iterable[str],
    output: str | Path,
    *,
    model: Any = None,
    text_field: str = "text",
    id_field: str | None = None,
    collection: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    skip_bad: bool = False,
    batch_size: int = 1024,
    progress: bool | None = None,
    views: Iterable[str] | Mapping[str, Mapping[str, Any]] | None = None,
    options: CorpusOptions | None = None,
    **keywords: Unpack[CorpusKeywords],
) -> JobSummary:
    """Embed a corpus into Parquet, NumPy or an SQLite collection; resumable, memory-bounded.

    `input_path` is a corpus file (.txt, .jsonl, .csv, .tsv, .parquet; "-" for stdin) or the texts
    themselves: a list, or any iterable of str (a generator is read a batch at a time, never held whole).
    Ids count from 1 where the input names none (`id_field`): a text's line number in a file, its place in
    a list or iterable, so the ids of `texts` are "1".."n" and a search's `Hit(id="2")` is `texts[1]`.
    A resumed job (`resume=True`) reads its input again from the start, proving the texts already stored
    are the same: give it the same texts again (a fresh generator over them, not the one already used).

    `views` ({name: {layers, pooling, ...}} or ["last=-1/mean", ...]) stores several sentence views
    from one forward pass, each in its own Parquet column `embedding_<name>`, its spec in the metadata.
    `level` is what a row is: "sentence" (one vector per text), "tokens" (one row per word piece) or
    "words" (pieces pooled by `subword`); see `bertscope.io.levels`. `combine="stack"` keeps each layer
    of a token or word row in its own `layer_N` column; `precision="float16"` halves the stored size.
    The embedding options (`layers` ... `prompt`) are those of `Model.embed`, stored with the output.
    "chunks" writes one row per chunk of each document (`chunks`, `late`, `chunk_size`, `chunk_overlap`
    as in `Model.embed_chunks`; late chunks always run windows over the whole document). The recipe and
    level keywords (`CorpusKeywords`; `keep_text=False` leaves texts out) may come as one `options`.
    An option that would have no effect is refused (InvalidSpec) before the model loads: a level option
    the level does not read, `text_field`/`id_field` without records, `collection` outside SQLite,
    `precision="float16"` into SQLite (`refuse_idle_job_options`).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidSpec(f"batch_size={batch_size!r}: give a whole number of texts per batch, at least 1")
    refuse_resume_with_overwrite(resume=resume, overwrite=overwrite)
    if options is not None and keywords:
        raise InvalidSpec(f"give the options as options= or as keywords, not both ({', '.join(keywords)})")
    asked = options or CorpusOptions.of(**keywords)
    refuse_idle_job_options(input_path, output, asked, text_field=text_field, id_field=id_field,
                            collection=collection)  # fmt: skip
    loaded = isinstance(model, (Encoder, StaticModel))
    model_arg = None if model is None or loaded or str(model) == BUNDLED else str(model)
    m = model if loaded else load_static(model_arg) if is_model2vec(model_arg) else open_encoder(model_arg)
    kind = Level.parse(asked.level.level, what="level")
    if isinstance(m, StaticModel) and (views or kind is not Level.SENTENCE):
        raise m.refusal("several views" if views else f"{kind.value} rows", plural=True)
    if views:
        from .views import views_level

        rows_of: CorpusLevel = views_level(m, views, options=asked.recipe, asked=asked.level, output=output)
    else:
        rows_of = make_level(m, asked)
    arg = model_arg if not loaded else reload_arg(m)
    # Whether the texts are kept changes the rows written, so a resumed job compares it with the rest.
    settings = {**stored_settings(m, rows_of.recorded(), arg), "keep_text": asked.level.keep_text}
    rejects = Rejects()
    records = read_corpus(
        input_path, text_field=text_field, id_field=id_field, skip_bad=skip_bad, rejects=rejects,
        offers_skip_bad=True, tokenizer=m.tokenizer if isinstance(m, Encoder) else None,
    )  # fmt: skip
    # A corpus with no text is refused before the output is opened: no empty store is made, and
    # --overwrite deletes nothing for a job that would write nothing in its place.
    first = next(records, None)
    if first is None:
        raise CorpusError(nothing_to_embed(input_path, output, rejects, text_field=text_field))
    records = chain([first], records)
    locked = (collection or "default") if format_of(output) is Format.SQLITE else None
    # One job per output: a second one (say a --resume while this runs) is refused, naming this one.
    with job_lock(output, collection=locked):
        sink = open_sink(
            output,
            settings=settings,
            collection=collection,
            resume=resume,
            overwrite=overwrite,
            keep_text=asked.level.keep_text,
        )
        summary = run_level(
            _said_saved(records, sink), rows_of, sink, source=input_path, output=output, rejects=rejects,
            resume=resume, batch_size=batch_size, progress=progress,
        )  # fmt: skip
        _finish(sink, summary, output)
        # a Parquet or NumPy output is this job's whole, as is one it overwrote; rows added to an SQLite
        # collection sit beside an earlier job's, whose rejects list is kept
        replaced = overwrite or format_of(output) is not Format.SQLITE
        _put_rejects(summary, rejects, output, replaced=replaced)
    return summary


def _put_rejects(summary: JobSummary, rejects: Rejects, output: str | Path, *, replaced: bool) -> None:
    """Count what the job passed over and write `OUTPUT.rejects`, the records this job set aside, once its
    output is in place; an earlier job's rejects file goes where this job `replaced` the output and set
    none aside (--overwrite kept the old run's list beside an output that had none)."""
    summary.empty = rejects.empty
    summary.rejected = len(rejects.bad)
    path = Path(str(output) + ".rejects")
    if rejects.bad:
        summary.rejects_file = path
        path.write_text("".join(line + "\n" for line in rejects.bad))
    elif replaced:
        path.unlink(missing_ok=True)


def refuse_idle_job_options(
    source: object,
    output: str | Path,
    asked: CorpusOptions,
    *,
    text_field: str = "text",
    id_field: str | None = None,
    collection: str | None = None,
) -> None:
    """Refuse, before a model loads or a file is written, an option the job would ignore in silence (or
    record falsely): a level option its level does not read, fields of a corpus without records, a
    collection outside SQLite, float16 into SQLite. The Ray job asks the same (with no collection)."""
    refuse_idle_level_options(asked.level)
    refuse_fields_without_records(source, text_field=text_field, id_field=id_field)
    refuse_idle_store_options(output, collection=collection, precision=asked.level.precision)


def refuse_resume_with_overwrite(*, resume: bool, overwrite: bool) -> None:
    """Refuse resume and overwrite together: one goes on with the saved work, the other discards it."""
    if resume and overwrite:
        raise InvalidSpec(
            "resume=True (--resume) goes on from the saved work and overwrite=True (--overwrite) "
            "discards it: drop overwrite=True (--overwrite) to go on from it, or resume=True (--resume) "
            "to start again"
        )


def _said_saved(records: Iterator[Record], sink: Sink) -> Iterator[Record]:
    """The records; a corpus error met reading them (a bad line) after some texts were saved says how
    many, and that --resume goes on from them once the input is fixed."""
    try:
        yield from records
    except CorpusError as exc:
        if not sink.done:
            raise
        raise CorpusError(f"{exc}{_saved_tail(sink.done)}") from None


def _saved_tail(done: int) -> str:
    """What a job stopped by a bad record adds once `done` texts are saved: --resume goes on from them."""
    saved = "1 text is" if done == 1 else f"{done} texts are"
    return f"; {saved} saved: fix the input, then run again with resume=True (--resume) to go on from them"


def _record_named(records: list[Record], source: object) -> Callable[[str, int], str]:
    """How a refusal raised embedding a batch names its text `i`: by its file and line, as a bad record is
    named ("long.txt:23: the text has 402 tokens ..."), not by its place in the batch ("text 2")."""
    name = source_name(source)
    return lambda kind, i: f"{name}:{records[i].line}: the {kind}"


@contextmanager
def _refused_here(sink: Sink) -> Iterator[None]:
    """A text the model refuses (over its limit under long='error') stops the job as a bad record does:
    once some texts are saved, the refusal says how many and that --resume goes on from them."""
    try:
        yield
    except InvalidInput as exc:
        if not sink.done:
            raise
        raise type(exc)(f"{exc}{_saved_tail(sink.done)}") from None


def _finish(sink: Sink, summary: JobSummary, output: str | Path) -> None:
    """Make the sink's output whole and count its time and its reuse into the summary."""
    start = time.perf_counter() - summary.seconds
    try:
        summary.files = sink.finish()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise CorpusError(
            f"{output}: could not write the finished output ({reason}); all {sink.done} texts are saved as "
            "parts beside it: fix that, then run again with resume=True (--resume) to write it"
        ) from None
    summary.seconds = time.perf_counter() - start
    summary.reused = sink.reused
    summary.already = sink.already


def run_level(
    records: Iterator[Record],
    rows_of: CorpusLevel,
    sink: Sink,
    *,
    source: str | Path | Iterable[str],
    output: str | Path,
    rejects: Rejects,
    resume: bool = False,
    batch_size: int = 1024,
    progress: bool | None = None,
) -> JobSummary:
    """Turn each batch of a corpus's records into a level's rows and hand them to a sink; Ctrl-C safe.

    The sink decides what a batch becomes (part files, SQLite rows, a running reduction); on resume its
    `done` records are skipped (`Sink.resumed`, which proves them the ones it holds where it can). The
    summary's `seconds` counts this loop; CorpusError when nothing was there to embed (the sink is then
    abandoned).
    """
    from ..core.progress import progress_callback

    input_path = source
    summary = JobSummary(output=Path(output), resumed_from=sink.done if resume else 0, level=rows_of.name)
    if sink.done and resume and sink.resumes_by_position:
        records = sink.resumed(records, input_path)
    start = time.perf_counter()
    shown = progress if progress is not None else sys.stderr.isatty()
    total = _count_records(input_path) if shown else None
    with (
        _abandoned_on_failure(sink),
        _stop_on_interrupt() as stop,
        progress_callback(total, enabled=progress) as on_batch,
    ):
        try:
            batches = _batches(records, batch_size)
            batch = next(batches, None)
            while batch is not None:
                # Asked before a batch's forward: stop now, not after embedding it.
                if stop.is_set():
                    summary.seconds = time.perf_counter() - start
                    raise JobInterrupted(_interrupted(summary.embedded, sink.done))
                todo = sink.pending(batch)
                if todo:
                    with _refused_here(sink), named_as(_record_named(todo, source)):
                        rows = rows_of.embed(todo, on_batch=on_batch)
                    try:
                        sink.write(todo, rows)
                    except OSError as exc:
                        raise CorpusError(_write_failed(output, exc, sink.done)) from None
                    summary.embedded += rows.texts
                    summary.tokens += rows.tokens
                    summary.rows += rows.table.num_rows
                    summary.n_truncated += rows.truncated
                if stop.is_set() and len(batch) == batch_size and not _reads_without_waiting(source):
                    # stdin or a pipe may wait for lines that never come: stop now, not after a read
                    summary.seconds = time.perf_counter() - start
                    raise JobInterrupted(_interrupted(summary.embedded, sink.done))
                # Else read on before looking at the flag (above): a stop asked during the last batch (a short
                # one ended the input) finishes the job, its whole input saved, rather than leave parts that
                # --resume only writes out.
                batch = next(batches, None)
        except Terminated:
            # SIGTERM (`timeout`, a scheduler): stopped mid-batch, at once; the batches written before are
            # saved, and the line says so and how to go on, as a Ctrl-C's does (a second Ctrl-C stays one)
            summary.seconds = time.perf_counter() - start
            raise JobInterrupted(_interrupted(summary.embedded, sink.done)) from None
    if sink.done == 0:
        sink.abandon()
        raise CorpusError(nothing_to_embed(input_path, output, rejects))
    summary.seconds = time.perf_counter() - start
    return summary


def _reads_without_waiting(source: str | Path | Iterable[str]) -> bool:
    """Whether reading the next batch of `source` returns at once: a regular file, or texts in memory;
    not stdin or a pipe, which wait for a writer."""
    if isinstance(source, (str, Path)):
        return str(source) != "-" and Path(source).is_file()
    return True


def _interrupted(embedded: int, saved: int) -> str:
    """What a job stopped by Ctrl-C says: what it saved and how to go on from it."""
    if not saved:
        return "interrupted before any text was saved; nothing was written: run it again to start over"
    texts = "text" if embedded == 1 else "texts"
    if not embedded:  # a resumed job stopped before its first batch
        return (
            f"interrupted before this run embedded a text; the {saved} saved before are kept: run it "
            "again with resume=True (--resume) to continue"
        )
    return (
        f"interrupted after {embedded} {texts}; everything up to there is saved. "
        "Run it again with resume=True (--resume) to continue"
    )


def nothing_to_embed(
    source: object, output: str | Path, rejects: Rejects, *, text_field: str = "text"
) -> str:
    """Why a job found no text: the corpus is empty, every line or record's text is, or every text in it
    was empty or rejected."""
    name = "the texts given" if given_texts(source) else source_name(source)
    if not rejects.bad:  # nothing, or blank lines and empty texts only: in every command's words
        what = empty_corpus(source, rejects, text_field=text_field)
    else:
        what = f"no texts to embed ({rejects.empty} empty, {len(rejects.bad)} rejected)"
    # an aggregation in memory (static_from_corpus without a checkpoint) writes nowhere to speak of
    written = "" if str(output) == "memory" else f"; nothing was written to {output}"
    return f"{name}: {what}{written}{_rejected(rejects.bad)}"


def _rejected(bad: list[str], *, shown: int = 3) -> str:
    """Why the records a job set aside were (its first `shown`): with nothing written, no .rejects file
    lists them."""
    if not bad:
        return ""
    more = f" (and {len(bad) - shown} more)" if len(bad) > shown else ""
    return f". Rejected: {'; '.join(bad[:shown])}{more}"


# a full disk, a file-size limit (ulimit -f), a quota: the same fix (Windows has no EDQUOT)
_FULL = frozenset(
    code for code in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", None)) if code is not None
)


def _write_failed(output: str | Path, exc: OSError, done: int) -> str:
    """What a failed write (a full disk, a file-size limit, permissions) means for the job."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    fix = "free the disk or lift the limit" if exc.errno in _FULL else "fix that"
    kept = (
        f"the {done} texts saved before it are kept; {fix}, then run again with resume=True (--resume)"
        if done
        else f"nothing was saved: {fix}, then run the same job again"
    )
    return f"{output}: could not write a batch ({reason}); {kept}"


def _count_records(source: object) -> int | None:
    """How many records a corpus holds, cheaply (lines or Parquet metadata), for the progress ETA (None for
    texts whose number is not known without reading them: a generator)."""
    if given_texts(source):
        return len(source) if isinstance(source, Sized) else None
    path = Path(str(source))
    if str(source) == "-" or not path.is_file():
        return None
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (OSError, ValueError):  # an unreadable file is reported by the reader, with its name
            return None
    with path.open("rb") as handle:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return max(0, lines - (1 if path.suffix.lower() in (".csv", ".tsv") else 0))


@contextmanager
def _abandoned_on_failure(sink: Sink) -> Iterator[None]:
    """A job that fails before saving anything leaves nothing behind to trip the next run."""
    try:
        yield
    except BaseException:
        if sink.done == 0:
            sink.abandon()
        raise


def _batches(records: Iterator[Record], size: int) -> Iterator[list[Record]]:
    while batch := list(islice(records, size)):
        yield batch


class _stop_on_interrupt:
    """Turn the first Ctrl-C into a flag checked between batches (a second one stops at once)."""

    def __enter__(self) -> threading.Event:
        self.event = threading.Event()
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.getsignal(signal.SIGINT)

            def handler(signum: int, frame: Any) -> None:
                if self.event.is_set():
                    raise KeyboardInterrupt
                self.event.set()

            signal.signal(signal.SIGINT, handler)
        return self.event

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
