"""The Ray Data runner: the one engine in a pool of actors, for corpora too big or too slow for one machine.

Ray reads the corpus (bertscope's own readers inside Ray read tasks, so ids equal the local job's),
`map_batches` runs a corpus level (`bertscope.io.levels`: sentence, token or word rows) in an actor pool
(the model loaded once per actor) and a Ray datasink writes Parquet shards with the local Parquet sink's
schema and metadata.

Ids: a single input gives the local ids (line or row number, or --id-field); several inputs (a glob)
give `<file stem>:<line or row>`, or the --id-field values as they are (unique across files is the
caller's promise).
"""

from __future__ import annotations

import glob
import os
import time
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core._enums import Backend, DType, Mode, Quantize
from .core.encoder import CUDA_TOKEN_BUDGET, Encoder
from .core.loaders import load_model
from .core.spec import reload_arg, stored_settings
from .errors import CorpusError, InvalidInput, InvalidSpec
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
]

# Readers and writers are light next to the model; asking no CPU for them keeps them from waiting forever
# behind actors that hold every CPU (2 actors on a 2-CPU machine would otherwise deadlock).
IO_CPUS = 0.0
_INSTALL = "the Ray engine needs Ray: pip install 'bertscope[ray]' (or pip install 'ray[data]')"


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
    address: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    overwrite: bool = False,
    batch_size: int | None = None,
    progress: bool = True,
    mode: Mode | str = Mode.EXACT,
    fast_min_cosine: float = 0.999,
    options: CorpusOptions | None = None,
    **keywords: Unpack[CorpusKeywords],
) -> JobSummary:
    """Embed a corpus (a file, a glob or a list of texts) into Parquet shards `OUTPUT/part-*.parquet`.

    `mode="fast"` is resolved once, by the driver (CPU); the actors run the mode it chose. The recipe
    and level keywords (`CorpusKeywords`) may come as one `options`, as the command line gives them.
    """
    asked = _options(options, keywords)
    ray = import_ray()
    import pyarrow.parquet as pq

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
    corpus = ray.data.read_datasource(
        corpus_datasource(sources, text_field, id_field, rows),
        num_cpus=IO_CPUS,
        override_num_blocks=len(sources),
    )
    embedded = embed_dataset(
        corpus, model=model, workers=workers, device=device, dtype=dtype, backend=backend, quantize=quantize,
        batch_size=rows, options=asked,
    )  # fmt: skip
    embedded.write_datasink(_shard_sink(out, schema), ray_remote_args={"num_cpus": IO_CPUS})
    summary = JobSummary(output=out, files=sorted(out.glob("part-*.parquet")))
    vectors = set(vector_columns(schema))
    for shard in summary.files:
        counts = rows_of.tally(pq.read_table(shard, columns=[n for n in schema.names if n not in vectors]))
        summary.embedded += counts[0]
        summary.tokens += counts[1]
        summary.truncated += counts[2]
    summary.seconds = time.perf_counter() - start
    return summary


def _output_dir(out: Path, *, overwrite: bool) -> Path:
    if out.suffix.lower() in (".parquet", ".npy", ".db", ".sqlite", ".sqlite3"):
        raise InvalidInput(f"{out}: the Ray engine writes a folder of Parquet shards; name a folder")
    if not out.parent.exists():
        raise CorpusError(f"cannot write {out}: the folder {out.parent} does not exist")
    old = sorted(out.glob("part-*.parquet*"))
    if old and not overwrite:
        raise CorpusError(f"{out} already holds {len(old)} shard(s); pass --overwrite to replace them")
    for shard in old:
        shard.unlink()
    out.mkdir(exist_ok=True)
    return out


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


def corpus_datasource(sources: list[Any], text_field: str, id_field: str | None, rows: int) -> Any:
    """A Ray datasource: one read task per input, streaming bertscope's reader in blocks of `rows`."""
    from ray.data import Datasource
    from ray.data.block import BlockMetadata
    from ray.data.datasource import ReadTask

    several = len(sources) > 1

    # Defined here because Ray is optional: importing bertscope.distributed must not need it.
    class BertscopeCorpus(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return sum(os.path.getsize(s) for s in sources if isinstance(s, str)) or None

        def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> list[Any]:
            meta = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None, input_files=None)
            return [
                ReadTask(_reader(s, text_field, id_field, _prefix(s, several, id_field), rows), meta)
                for s in sources
            ]

    return BertscopeCorpus()


def _prefix(source: Any, several: bool, id_field: str | None) -> str:
    return f"{Path(source).stem}:" if several and id_field is None else ""


def _shard_sink(out: Path, schema: Any) -> Any:
    """A Ray datasink: each write task writes one shard `part-<task>.parquet` with the local schema."""
    from ray.data import Datasink
    from ray.data.block import BlockAccessor

    class BertscopeShards(Datasink):
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


def _reader(source: Any, text_field: str, id_field: str | None, prefix: str, rows: int) -> Any:
    def read() -> Iterator[Any]:
        import pyarrow as pa

        records = read_corpus(source, text_field=text_field, id_field=id_field)
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
