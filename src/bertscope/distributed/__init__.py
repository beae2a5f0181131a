"""The Ray Data runner: the one engine in a pool of actors, for corpora too big or too slow for one machine.

Ray reads the corpus (bertscope's own readers inside Ray read tasks, so ids equal the local job's),
`map_batches` runs a corpus level (`bertscope.io.levels`: sentence, token or word rows) in an actor pool
(the model loaded once per actor) and a Ray datasink writes Parquet shards with the local Parquet sink's
schema and metadata.

Ids: a single input gives the local ids (line or row number, or --id-field); several inputs (a glob)
give `<file stem>:<line or row>`, or the --id-field values as they are (unique across files is the
caller's promise).

The read tasks hand on blocks of about a batch of rows (Ray would join a file's rows into one block,
and one block reaches one actor). A bad record fails the job with the local job's `CorpusError`
naming FILE:LINE, raised as itself (`raising_bertscope_errors`). A finished job writes
`OUTPUT/_bertscope.json` (its inputs, rows and settings digest) last: a folder of shards without it
holds a job that did not finish.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import math
import os
import re
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core._enums import Backend, DType, Mode, Quantize
from .core.encoder import CUDA_TOKEN_BUDGET, Encoder
from .core.loaders import load_model
from .core.spec import reload_arg, stored_settings
from .errors import BertscopeError, CorpusError, InvalidInput, InvalidSpec
from .io.job import JobSummary
from .io.level_table import CorpusOptions, make_level
from .io.levels import vector_columns
from .io.readers import Record, read_corpus
from .io.sinks import with_settings

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .io.level_table import CorpusKeywords

__all__ = [
    "embed_dataset",
    "run_ray_job",
    "IO_CPUS",
    "import_ray",
    "default_batch",
    "gpus_per_worker",
    "input_sources",
    "corpus_datasource",
    "corpus_dataset",
    "raising_bertscope_errors",
    "MANIFEST",
    "shard_folder_note",
]

# Readers and writers are light next to the model; asking no CPU for them keeps them from waiting forever
# behind actors that hold every CPU (2 actors on a 2-CPU machine would otherwise deadlock).
IO_CPUS = 0.0
_INSTALL = "the Ray engine needs Ray: pip install 'bertscope[ray]' (or pip install 'ray[data]')"
# Written last by a finished job, beside its shards; the leading _ keeps Parquet readers of the folder
# (pyarrow, Ray, Spark) from taking it for data.
MANIFEST = "_bertscope.json"
_RAY_ADVICE = re.compile(r"\nFailed to [^\n]* after \d+/\d+ attempts \(total backoff .*\Z", re.DOTALL)
_SHARD_BYTES = 128 << 20  # the rows a write task gathers into one shard: Ray's default largest block


def import_ray() -> Any:
    """The ray module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InvalidInput(_INSTALL) from exc
    return ray


class _Embedder:
    """A Ray actor: loads the model once, then turns Arrow batches into a level's rows through the engine."""

    def __init__(
        self,
        model: str | None,
        device: str,
        dtype: str,
        threads: int,
        text_field: str,
        runtime: dict[str, Any],
        options: CorpusOptions,
    ) -> None:
        self.model = load_model(model, device=device, dtype=dtype, threads=threads, **runtime)
        self.level = make_level(self.model, options)
        self.text_field = text_field
        self.level.empty()  # the typed columns of a batch of only empty texts, found once

    def __call__(self, batch: Any) -> Any:
        """(rows) Arrow table -> the level's rows (sentence: the same rows plus the vector columns)."""
        return self.level.embed_arrow(batch, self.text_field)


def embed_dataset(
    dataset: Any,
    *,
    text_field: str = "text",
    model: str | Encoder | None = None,
    workers: int = 2,
    device: str = "cpu",
    dtype: DType | str = DType.FLOAT32,
    backend: Backend | str = Backend.AUTO,
    quantize: Quantize | str | None = None,
    cpus_per_worker: float = 1.0,
    batch_size: int | None = None,
    max_restarts: int | None = None,
    max_task_retries: int | None = None,
    text_column: str | None = None,
    options: CorpusOptions | None = None,
    **keywords: Unpack[CorpusKeywords],
) -> Any:
    """A Ray Dataset with `embedding` (fixed-size float32 list), `n_tokens` and `truncated` columns added.

    With `level="tokens"` or `"words"` the rows are those of the local job's level (the dataset needs an
    `id` column); see `bertscope.io.levels`. Options (`layers`, `pooling`, `combine`, ...) are those of
    `Model.embed`; rows with an empty text are dropped. `batch_size` (rows per actor call) defaults to a
    quarter of the engine's token budget, so
    each call fills a few token-budgeted forward batches. A failed actor is restarted and its tasks
    retried by Ray (`max_restarts`, `max_task_retries`; Ray's default -1 is without limit).
    `text_column` is the old name of `text_field` (deprecated: it warns). The recipe and level keywords
    (`CorpusKeywords`: level, keep_text, precision, subword, chunks, ...) may come as one `options`.
    """
    asked = _options(options, keywords)
    ray = import_ray()
    model_arg = reload_arg(model) if isinstance(model, Encoder) else model
    if isinstance(model, Encoder):
        if model.calibration_digest:
            raise InvalidSpec(
                "Ray workers load the model from its folder, so its int8 would be fitted on the shipped "
                "calibration texts, not yours; embed with embed_corpus, or use the shipped calibration"
            )
        backend, quantize, dtype = model.backend, model.quantize, model.info().dtype
    gpus = gpus_per_worker(ray, device)
    retries = {"max_restarts": max_restarts, "max_task_retries": max_task_retries}
    return dataset.map_batches(
        _Embedder,
        batch_size=batch_size or default_batch(gpus),
        batch_format="pyarrow",
        zero_copy_batch=True,
        compute=ray.data.ActorPoolStrategy(size=workers),
        fn_constructor_kwargs={
            "model": model_arg,
            "device": device,
            "dtype": dtype,
            "threads": max(1, int(cpus_per_worker)),
            "text_field": _text_field(text_field, text_column),
            "runtime": {"backend": backend, "quantize": quantize},
            "options": asked,
        },
        num_cpus=cpus_per_worker,
        num_gpus=gpus,
        # Only when asked: Ray warns on these (its defaults already restart and retry without limit).
        **{k: v for k, v in retries.items() if v is not None},
    )


def _options(options: CorpusOptions | None, keywords: CorpusKeywords) -> CorpusOptions:
    """The options given as one object or as keywords (not both)."""
    if options is not None and keywords:
        raise InvalidInput(f"give the options as options= or as keywords, not both ({', '.join(keywords)})")
    return options or CorpusOptions.of(**keywords)


def _text_field(text_field: str, text_column: str | None) -> str:
    if text_column is None:
        return text_field
    warnings.warn(
        "embed_dataset(text_column=...) is deprecated; use text_field=..., as embed_corpus does",
        DeprecationWarning,
        stacklevel=3,
    )
    return text_column


def default_batch(gpus: float) -> int:
    """Rows per Ray batch when none is given: a GPU's token budget / 4, or 512 rows on CPUs (the engine
    splits a Ray batch into forwards by its own budget; a Ray batch amortises Ray's per-batch cost)."""
    return CUDA_TOKEN_BUDGET // 4 if gpus else 512


def gpus_per_worker(ray: Any, device: str) -> float:
    """GPUs each embedding actor asks Ray for on `device` (auto: one where the cluster has GPUs)."""
    if device.startswith("cuda"):
        return 1.0
    if device == "auto":
        if not ray.is_initialized():
            ray.init()
        return 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
    return 0.0


def run_ray_job(
    source: str | list[str],
    output: str | Path,
    *,
    model: str | None = None,
    device: str = "cpu",
    dtype: DType | str = DType.FLOAT32,
    backend: Backend | str = Backend.AUTO,
    quantize: Quantize | str | None = None,
    workers: int = 2,
    cpus_per_worker: float = 1.0,
    address: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    overwrite: bool = False,
    batch_size: int | None = None,
    progress: bool = True,
    mode: Mode | str = Mode.EXACT,
    fast_min_cosine: float | None = None,
    options: CorpusOptions | None = None,
    **keywords: Unpack[CorpusKeywords],
) -> JobSummary:
    """Embed a corpus (a file, a glob or a list of texts) into Parquet shards `OUTPUT/part-*.parquet`,
    then `OUTPUT/_bertscope.json` once every shard is written.

    `mode="fast"` is resolved once, by the driver (CPU); the actors run the mode it chose. `batch_size`:
    rows per actor call (`embed_dataset`'s); `cpus_per_worker`: each actor's CPUs and torch threads. A
    bad record raises the local job's `CorpusError` (FILE:LINE). The recipe and level keywords
    (`CorpusKeywords`) may come as one `options`, as the command line gives them.
    """
    asked = _options(options, keywords)
    ray = import_ray()

    out = _output_dir(Path(output), overwrite=overwrite)
    sources = input_sources(source)
    # The driver loads the model (CPU) only to check the options and to write the same provenance.
    # With int8 or onnxruntime this also exports the model once, so the actors find it in the cache.
    m = load_model(
        model, device="cpu", dtype=dtype, backend=backend, quantize=quantize, mode=mode,
        fast_min_cosine=fast_min_cosine,
    )  # fmt: skip
    if m.mode == Mode.FAST:
        info = m.info()
        dtype, backend, quantize = info.dtype, info.backend, info.quantize
    rows_of = make_level(m, asked)
    # keep_text as the local job records it: the two runners' stores carry the same settings
    settings = {**stored_settings(m, rows_of.recorded(), model), "keep_text": asked.level.keep_text}
    schema = with_settings(rows_of.empty(), settings).schema
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    start = time.perf_counter()
    rows = batch_size or default_batch(gpus_per_worker(ray, device))
    # The reader refuses a text the tokenizer gives no pieces, naming its line, as the local job's does.
    tokenizer = m.tokenizer if isinstance(m, Encoder) else None
    corpus = corpus_dataset(sources, text_field, id_field, rows, tokenizer=tokenizer)
    embedded = embed_dataset(
        corpus, model=model, workers=workers, device=device, dtype=dtype, backend=backend,
        quantize=quantize, cpus_per_worker=cpus_per_worker, batch_size=rows, options=asked,
    )  # fmt: skip
    with raising_bertscope_errors(embedded):
        embedded.write_datasink(_shard_sink(out, schema), ray_remote_args={"num_cpus": IO_CPUS})
    summary = _summary(out, rows_of, schema)
    summary.seconds = time.perf_counter() - start
    _write_manifest(out, source, summary, schema)
    return summary


def _summary(out: Path, rows_of: Any, schema: Any) -> JobSummary:
    """The job's counts, read back from its shards (their light columns)."""
    import pyarrow.parquet as pq

    summary = JobSummary(output=out, files=sorted(out.glob("part-*.parquet")))
    vectors = set(vector_columns(schema))
    for shard in summary.files:
        counts = rows_of.tally(pq.read_table(shard, columns=[n for n in schema.names if n not in vectors]))
        summary.embedded += counts[0]
        summary.tokens += counts[1]
        summary.truncated += counts[2]
    return summary


def _write_manifest(out: Path, source: str | list[str], summary: JobSummary, schema: Any) -> None:
    """Mark the job finished: what it read, what it wrote, and the digest of the shards' settings."""
    import pyarrow.parquet as pq

    manifest = {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": source if isinstance(source, str) else f"{len(source)} texts",
        "texts": summary.embedded,
        "tokens": summary.tokens,
        "truncated": summary.truncated,
        "rows": sum(pq.read_metadata(s).num_rows for s in summary.files),
        "shards": [s.name for s in summary.files],
        # sha256 of the `bertscope` metadata every shard holds: a shard from another job differs
        "settings_digest": hashlib.sha256(schema.metadata[b"bertscope"]).hexdigest(),
    }
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST)


def _output_dir(out: Path, *, overwrite: bool) -> Path:
    if out.suffix.lower() in (".parquet", ".npy", ".db", ".sqlite", ".sqlite3"):
        raise InvalidInput(f"{out}: the Ray engine writes a folder of Parquet shards; name a folder")
    if not out.parent.exists():
        raise CorpusError(f"cannot write {out}: the folder {out.parent} does not exist")
    old = sorted(out.glob("part-*.parquet*"))
    manifest = out / MANIFEST
    if (old or manifest.exists()) and not overwrite:
        note = shard_folder_note(out) or f"{out} holds the output of an earlier job"
        raise CorpusError(f"{note}; pass --overwrite to replace it")
    manifest.unlink(missing_ok=True)  # first: a job stopped while clearing the folder is not finished
    for shard in old:
        shard.unlink()
    out.mkdir(exist_ok=True)
    return out


def shard_folder_note(path: str | Path) -> str | None:
    """What a Ray job's output folder (or a shard in one) holds, for a reader to say; None for other paths.

    A folder of `part-*.parquet` shards with `_bertscope.json` holds a finished job; without it, a job
    that was stopped or failed (or written before bertscope marked finished jobs), whose shards are
    some of its rows, not all.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    begun = sorted(folder.glob("part-*.parquet*"))  # with the .tmp of a shard being written
    if not (path.is_dir() or path.name.startswith("part-")) or not begun:
        return None
    if (folder / "settings.json").exists():  # a local job's part folder, which says its own state
        return None
    if (folder / MANIFEST).exists():
        return (
            None if path.is_file() else f"{folder} holds a finished Ray job of {len(begun)} Parquet shard(s)"
        )
    what = f"a shard of {folder}, which holds" if path.is_file() else f"{folder} holds"
    return (
        f"{what} {len(begun)} shard(s) of a Ray job that did not finish (no {MANIFEST}: it was stopped "
        "or failed), so some rows are missing"
    )


def input_sources(source: str | list[str]) -> list[Any]:
    """The inputs a Ray job reads: a list of texts as one source, or the files a path or glob names."""
    if isinstance(source, list):
        return [source]
    if source == "-":
        raise InvalidInput("the Ray engine reads files, not stdin; write the texts to a file first")
    paths = sorted(glob.glob(source)) if glob.has_magic(source) else [source]
    if not paths:
        raise CorpusError(f"{source}: no file matches")
    stems = [Path(p).stem for p in paths]
    if len(set(stems)) < len(stems):
        raise CorpusError(f"{source}: several files share a name stem, so `<stem>:<row>` ids would clash")
    for path in paths:
        read_corpus(path)  # checks existence and type now, on the driver; records are read lazily
    return paths


def corpus_dataset(
    sources: list[Any], text_field: str, id_field: str | None, rows: int, *, tokenizer: Any = None
) -> Any:
    """A Ray Dataset of the inputs' `id` and `text` columns, in blocks of about `rows` rows.

    Ray joins the tables a read task yields into blocks of up to 128 MiB, and an actor pool hands one
    block to one actor: a single input file would reach a single actor. Asking Ray for one block per
    `rows` rows (counted from Parquet metadata, estimated from the first MiB of a text file) has it cut
    each read task's blocks so; how many does not change the rows or their ids. `tokenizer` (the model's)
    makes a text it gives no word pieces a bad record, named by FILE:LINE as the local job names it.
    """
    ray = import_ray()
    blocks = sum(max(1, math.ceil(_estimated_rows(s) / rows)) for s in sources)
    return ray.data.read_datasource(
        corpus_datasource(sources, text_field, id_field, rows, tokenizer=tokenizer),
        num_cpus=IO_CPUS,
        override_num_blocks=blocks,
    )


def _estimated_rows(source: Any, *, sample: int = 1 << 20) -> int:
    """How many records an input holds: exact for a list or Parquet, lines by the first MiB for text."""
    if isinstance(source, list):
        return len(source)
    path = Path(source)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    with path.open("rb") as stream:
        head = stream.read(sample)
    if not head:
        return 0
    lines = head.count(b"\n") + (not head.endswith(b"\n"))
    return math.ceil(path.stat().st_size * lines / len(head))


def corpus_datasource(
    sources: list[Any], text_field: str, id_field: str | None, rows: int, *, tokenizer: Any = None
) -> Any:
    """A Ray datasource: one read task per input, streaming bertscope's reader in tables of `rows`
    (`corpus_dataset` reads it in blocks of that size). `tokenizer`: as `read_corpus`'s, sent once."""
    from ray.data import Datasource
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    several = len(sources) > 1
    # In the object store once, not pickled into every read task (a large vocabulary is megabytes).
    shared = None if tokenizer is None else import_ray().put(tokenizer)

    # Defined here because Ray is optional: importing bertscope.distributed must not need it.
    class BertscopeCorpus(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return sum(os.path.getsize(s) for s in sources if isinstance(s, str)) or None

        def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> list[Any]:
            meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None)
            return [
                ReadTask(_reader(s, text_field, id_field, _prefix(s, several, id_field), rows, shared), meta)
                for s in sources
            ]

    return BertscopeCorpus()


@contextmanager
def raising_bertscope_errors(dataset: Any) -> Iterator[None]:
    """Run `dataset` so that a BertscopeError raised in a read task or an actor comes out as itself.

    Ray wraps it (RayTaskError; an actor's in a UserCodeException that loses it, unless the dataset's
    context asks for the original, as this sets) and prints its own traceback of it: the command line
    would show that instead of the local job's one line. Ray Data's console errors are held back
    meanwhile: dropped when the error was bertscope's, shown as they were for any other failure.
    """
    dataset.context.raise_original_map_exception = True  # this dataset's own copy of the context
    held, found = _HeldErrors(), None
    try:
        yield
    except Exception as exc:
        found = _bertscope_error(exc)
        if found is None:
            raise
        # Ray appends its retry advice to the message (args); the local job says only what is before it
        if found.args and isinstance(found.args[0], str):
            found.args = (_RAY_ADVICE.sub("", found.args[0]), *found.args[1:])
        raise found from None
    finally:
        held.release(show=found is None)


def _bertscope_error(exc: BaseException) -> BertscopeError | None:
    """The BertscopeError a Ray error carries (its `cause`, or down its exception chain), or None."""
    from ray.exceptions import RayError

    todo, seen = [exc], set()
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        # RayTaskError(CorpusError) is a CorpusError too, but its message is Ray's: take the cause's.
        if isinstance(current, BertscopeError) and not isinstance(current, RayError):
            return current
        linked = (getattr(current, "cause", None), current.__cause__, current.__context__)
        todo.extend(e for e in linked if isinstance(e, BaseException))
    return None


class _HeldErrors:
    """Ray Data's error records, held back from its console handlers until the job's outcome is known."""

    def __init__(self) -> None:
        self.held: list[logging.LogRecord] = []
        self.handlers = [
            h
            for h in logging.getLogger("ray.data").handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
        ]
        for handler in self.handlers:
            handler.addFilter(self._hold)

    def _hold(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        self.held.append(record)
        return False

    def release(self, *, show: bool) -> None:
        for handler in self.handlers:
            handler.removeFilter(self._hold)
        if show:
            for record in dict.fromkeys(self.held):  # a record held by two handlers is shown once by each
                for handler in self.handlers:
                    handler.handle(record)
        self.held.clear()


def _prefix(source: Any, several: bool, id_field: str | None) -> str:
    return f"{Path(source).stem}:" if several and id_field is None else ""


def _shard_sink(out: Path, schema: Any) -> Any:
    """A Ray datasink: each write task writes one shard `part-<task>.parquet` with the local schema, of
    about 128 MiB (a small job's rows in one)."""
    from ray.data import Datasink
    from ray.data.block import BlockAccessor

    class BertscopeShards(Datasink):
        @property
        def min_bytes_per_write(self) -> int:
            # Ray would write a shard per few batches (thousands of small files for a big corpus)
            return _SHARD_BYTES

        def write(self, blocks: Iterable[Any], ctx: Any) -> None:
            import pyarrow.parquet as pq

            # Named by task, written under a temporary name: a retried task replaces its shard, adds none.
            part = out / f"part-{ctx.task_idx:06d}.parquet"
            tmp = part.with_name(part.name + ".tmp")
            writer = None
            for block in blocks:
                table = BlockAccessor.for_block(block).to_arrow()
                if table.num_rows:
                    # The level's columns in its order and types (extra input columns dropped), settings kept.
                    shard = table.select(schema.names).cast(schema)
                    writer = writer or pq.ParquetWriter(tmp, schema)
                    writer.write_table(shard)
            if writer is not None:
                writer.close()
                os.replace(tmp, part)

    return BertscopeShards()


def _reader(
    source: Any, text_field: str, id_field: str | None, prefix: str, rows: int, tokenizer: Any
) -> Any:
    def read() -> Iterator[Any]:
        import pyarrow as pa

        tok = None if tokenizer is None else import_ray().get(tokenizer)
        records = read_corpus(source, text_field=text_field, id_field=id_field, tokenizer=tok)
        for chunk in _chunks(records, rows):
            yield pa.table({"id": [prefix + r.id for r in chunk], "text": [r.text for r in chunk]})

    return read


def _chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
