"""A resumable corpus job: read -> embed (the one engine) -> write, in batches, streaming."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BertscopeError, CorpusError
from ..post import apply_post, prepare_post
from .readers import Record, Rejects, read_corpus
from .sinks import open_sink

__all__ = ["JobSummary", "JobInterrupted", "embed_corpus", "job_settings"]


class JobInterrupted(BertscopeError):
    """The job stopped on Ctrl-C after saving its last whole batch; `--resume` continues it."""


@dataclass
class JobSummary:
    """What a corpus job did: texts embedded, skipped and reused, tokens, truncations, time, files."""

    output: Path
    files: list[Path] = field(default_factory=list)
    embedded: int = 0
    resumed_from: int = 0
    reused: int = 0
    already: int = 0
    empty: int = 0
    rejected: int = 0
    tokens: int = 0
    truncated: int = 0
    seconds: float = 0.0
    rejects_file: Path | None = None

    def line(self) -> str:
        """The one-line summary printed at the end of a job."""
        parts = [f"{self.embedded} texts embedded", f"{self.tokens} tokens", f"{self.truncated} truncated"]
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
        return f"{', '.join(parts)} in {self.seconds:.1f}s ({rate:.0f} texts/s) -> {self.output}"


def job_settings(model: Any, spec_dict: dict[str, Any], model_arg: str | None) -> dict[str, Any]:
    """The provenance stored with every output: model, how to reload it, how it ran, the embedding spec."""
    info = model.info()
    runtime = {"dtype": info.dtype, "backend": info.backend, "quantize": info.quantize}
    settings = {"model": info.source, "model_arg": model_arg, **runtime, **spec_dict}
    # The JSON round trip makes what is compared now equal what was stored (tuples become lists).
    return json.loads(json.dumps(settings))


def embed_corpus(
    input_path: str | Path | list[str],
    output: str | Path,
    *,
    model: Any = None,
    text_field: str = "text",
    id_field: str | None = None,
    collection: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    skip_bad: bool = False,
    keep_text: bool = True,
    batch_size: int = 1024,
    progress: bool | None = None,
    post: Any = None,
    views: Iterable[str] | Mapping[str, Mapping[str, Any]] | None = None,
    **options: Any,
) -> JobSummary:
    """Embed a corpus file into Parquet, NumPy or an SQLite collection; resumable, memory-bounded.

    `views` ({name: {layers, pooling, ...}} or ["last=-1/mean", ...]) stores several sentence views
    from one forward pass, each in its own Parquet column `embedding_<name>`, its spec in the metadata.
    """
    from ..model import Model, load
    from ..progress import progress_callback

    model_arg = None if model is None or isinstance(model, Model) else str(model)
    m = model if isinstance(model, Model) else load(model_arg)
    spec: Any = m.spec(**options) if not views else _view_specs(m, views, options, output, post)
    processor = prepare_post(post, spec.as_dict()) if not views else None
    recorded = _recorded(spec) if views else spec.as_dict()
    recorded.update({"post": processor.describe()} if processor else {})
    settings = job_settings(m, recorded, model_arg if not isinstance(model, Model) else _arg_of(m))
    rejects = Rejects()
    records = read_corpus(
        input_path, text_field=text_field, id_field=id_field, skip_bad=skip_bad, rejects=rejects
    )
    sink = open_sink(
        output,
        settings=settings,
        collection=collection,
        resume=resume,
        overwrite=overwrite,
        keep_text=keep_text,
    )
    summary = JobSummary(output=Path(output), resumed_from=sink.done if resume else 0)
    if sink.done and resume and sink.resumes_by_position:
        records = _skip(records, sink.done, input_path)
    start = time.perf_counter()
    shown = progress if progress is not None else sys.stderr.isatty()
    total = _count_records(input_path) if shown else None
    with _stop_on_interrupt() as stop, progress_callback(total, enabled=progress) as on_batch:
        for batch in _batches(records, batch_size):
            todo = sink.pending(batch)
            if todo:
                vectors, n_tokens, truncated = _embed_batch(
                    m, [r.text for r in todo], spec, processor, on_batch
                )
                sink.write(todo, vectors, n_tokens, truncated)
                summary.embedded += len(todo)
                summary.tokens += int(n_tokens.sum())
                summary.truncated += int((truncated > 0).sum())
            if stop.is_set():
                summary.seconds = time.perf_counter() - start
                raise JobInterrupted(
                    f"interrupted after {summary.embedded} texts; everything up to there is saved. "
                    "Run the same command with --resume to continue"
                )
    if sink.done == 0:
        sink.abandon()
        raise CorpusError(
            f"{input_path}: no texts to embed ({rejects.empty} empty, {len(rejects.bad)} rejected); "
            f"nothing was written to {output}"
        )
    summary.files = sink.finish()
    summary.seconds = time.perf_counter() - start
    summary.reused = sink.reused
    summary.already = sink.already
    summary.empty = rejects.empty
    summary.rejected = len(rejects.bad)
    if rejects.bad:
        summary.rejects_file = Path(str(output) + ".rejects")
        summary.rejects_file.write_text("".join(line + "\n" for line in rejects.bad))
    return summary


def _view_specs(m: Any, views: Any, options: dict[str, Any], output: str | Path, post: Any) -> dict[str, Any]:
    """Each view's resolved spec: the job's options with the view's own on top."""
    from .views import parse_views

    if Path(output).suffix.lower() != ".parquet":
        raise CorpusError(f"{output}: several views are stored as Parquet columns; write to a .parquet file")
    if post is not None:
        raise CorpusError("post-processing is fitted to one view; leave --post out when asking for views")
    return {name: m.spec(**{**options, **view}) for name, view in parse_views(views).items()}


def _recorded(specs: dict[str, Any]) -> dict[str, Any]:
    """Settings of a job with views: the shared long-text options, then each view's own spec."""
    from .views import VIEW_KEYS

    first = next(iter(specs.values())).as_dict()
    shared = {key: value for key, value in first.items() if key not in VIEW_KEYS}
    views = {name: {key: spec.as_dict()[key] for key in VIEW_KEYS} for name, spec in specs.items()}
    return {**shared, "views": views}


def _embed_batch(
    m: Any, texts: list[str], spec: Any, processor: Any, on_batch: Any
) -> tuple[Any, np.ndarray, np.ndarray]:
    """(vectors (texts, d), or {view: vectors}; n_tokens; truncated) of one batch, in one forward pass."""
    if isinstance(spec, dict):
        chunks = list(m.engine.sentence_views(texts, spec, on_batch=on_batch))
        vectors = {name: np.concatenate([c[name].vectors for c in chunks]) for name in spec}
        first = [next(iter(c.values())) for c in chunks]
        return (
            vectors,
            np.concatenate([c.n_tokens for c in first]),
            np.concatenate([c.truncated for c in first]),
        )
    result = apply_post(m.engine.sentences_once(texts, spec, on_batch=on_batch), processor)
    return result.vectors, result.n_tokens, result.truncated


def _count_records(source: str | Path | list[str]) -> int | None:
    """How many records a corpus holds, cheaply (lines or Parquet metadata), for the progress ETA."""
    if isinstance(source, list):
        return len(source)
    path = Path(str(source))
    if str(source) == "-" or not path.is_file():
        return None
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    with path.open("rb") as handle:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return max(0, lines - (1 if path.suffix.lower() in (".csv", ".tsv") else 0))


def _arg_of(model: Any) -> str | None:
    from ..loading import DEFAULT_MODEL

    return None if model.loaded.source == DEFAULT_MODEL else model.loaded.source


def _batches(records: Iterator[Record], size: int) -> Iterator[list[Record]]:
    while batch := list(islice(records, size)):
        yield batch


def _skip(records: Iterator[Record], count: int, source: object) -> Iterator[Record]:
    skipped = sum(1 for _ in islice(records, count))
    if skipped < count:
        raise CorpusError(
            f"{source} has fewer texts ({skipped}) than the unfinished job already wrote ({count})"
        )
    yield from records


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
