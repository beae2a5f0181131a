"""The Ray Data runner: the one engine in a pool of actors, for corpora too big or too slow for one machine.

Ray reads the corpus (bertscope's own readers inside Ray read tasks, so ids equal the local job's),
`map_batches` runs `Engine.sentences_once` in an actor pool (the model loaded once per actor) and a Ray
datasink writes Parquet shards with the local Parquet sink's schema and metadata.

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
from typing import Any

import numpy as np

from ._enums import Combine, LongText, Pooling
from .errors import CorpusError, InvalidInput
from .io.job import JobSummary
from .io.readers import Record, read_corpus
from .io.sinks import arrow_table, parquet_schema
from .layers import LayerSpec
from .model import CPU_TOKEN_BUDGET, CUDA_TOKEN_BUDGET, Model
from .spec import EmbedOptions, PostArg, reload_arg, resolve

__all__ = ["embed_dataset", "run_ray_job"]

# Readers and writers are light next to the model; asking no CPU for them keeps them from waiting forever
# behind actors that hold every CPU (2 actors on a 2-CPU machine would otherwise deadlock).
_IO_CPUS = 0.0
_INSTALL = "the Ray engine needs Ray: pip install 'bertscope[ray]' (or pip install 'ray[data]')"


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise InvalidInput(_INSTALL) from exc
    return ray


class _Embedder:
    """A Ray actor: loads the model once, then embeds Arrow batches through the one engine."""

    def __init__(
        self,
        model: str | None,
        device: str,
        dtype: str,
        threads: int,
        text_field: str,
        runtime: dict[str, Any],
        options: EmbedOptions,
    ) -> None:
        from .model import load

        self.model = load(model, device=device, dtype=dtype, threads=threads, **runtime)
        self.recipe = resolve(self.model, options)
        self.text_field = text_field
        # The width after post-processing, so that a batch of only empty texts still has typed columns.
        self.dimension = self._embed(["a"]).vectors.shape[1]

    def _embed(self, texts: list[str]) -> Any:
        return self.recipe.finish(self.model.engine.sentences_once(texts, self.recipe.spec))

    def __call__(self, batch: Any) -> Any:
        """(rows) Arrow table -> the same rows with texts, plus embedding, n_tokens and truncated."""
        import pyarrow as pa

        texts = batch.column(self.text_field).to_pylist()
        keep = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]
        if len(keep) < len(texts):  # empty texts are skipped, as the local job skips them
            batch = batch.take(pa.array(keep, pa.int64()))
            texts = [texts[i] for i in keep]
        if texts:
            result = self._embed(texts)
            vectors, n_tokens, truncated = result.vectors, result.n_tokens, result.truncated
        else:
            vectors, n_tokens, truncated = np.zeros((0, self.dimension)), np.zeros(0), np.zeros(0)
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
        batch = batch.append_column("embedding", pa.FixedSizeListArray.from_arrays(flat, self.dimension))
        batch = batch.append_column("n_tokens", pa.array(n_tokens.astype(np.int32)))
        return batch.append_column("truncated", pa.array(truncated.astype(np.int32)))


def embed_dataset(
    dataset: Any,
    *,
    text_field: str = "text",
    model: str | Model | None = None,
    workers: int = 2,
    device: str = "cpu",
    dtype: str = "float32",
    backend: str = "auto",
    quantize: str | None = None,
    cpus_per_worker: float = 1.0,
    batch_size: int | None = None,
    max_restarts: int | None = None,
    max_task_retries: int | None = None,
    layers: LayerSpec | None = None,
    combine: Combine | str = "mean",
    pooling: Pooling | str = "auto",
    mask_special: bool = False,
    normalize: bool | None = None,
    long: LongText | str = "truncate",
    stride: int | None = None,
    post: PostArg = None,
    text_column: str | None = None,
) -> Any:
    """A Ray Dataset with `embedding` (fixed-size float32 list), `n_tokens` and `truncated` columns added.

    Options (`layers`, `pooling`, `combine`, ...) are those of `Model.embed`; rows with an empty text are
    dropped. `batch_size` (rows per actor call) defaults to a quarter of the engine's token budget, so
    each call fills a few token-budgeted forward batches. A failed actor is restarted and its tasks
    retried by Ray (`max_restarts`, `max_task_retries`; Ray's default -1 is without limit).
    `text_column` is the old name of `text_field` (deprecated: it warns).
    """
    options = EmbedOptions(layers, combine, pooling, mask_special, normalize, long, stride, post)
    ray = _ray()
    model_arg = reload_arg(model) if isinstance(model, Model) else model
    if isinstance(model, Model):
        backend, quantize = model.backend, model.quantize
    gpus = _gpus_per_worker(ray, device)
    retries = {"max_restarts": max_restarts, "max_task_retries": max_task_retries}
    return dataset.map_batches(
        _Embedder,
        batch_size=batch_size or _default_batch(gpus),
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
            "options": options,
        },
        num_cpus=cpus_per_worker,
        num_gpus=gpus,
        # Only when asked: Ray warns on these (its defaults already restart and retry without limit).
        **{k: v for k, v in retries.items() if v is not None},
    )


def _text_field(text_field: str, text_column: str | None) -> str:
    if text_column is None:
        return text_field
    warnings.warn(
        "embed_dataset(text_column=...) is deprecated; use text_field=..., as embed_corpus does",
        DeprecationWarning,
        stacklevel=3,
    )
    return text_column


def _default_batch(gpus: float) -> int:
    return max(64, (CUDA_TOKEN_BUDGET if gpus else CPU_TOKEN_BUDGET) // 4)


def _gpus_per_worker(ray: Any, device: str) -> float:
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
    dtype: str = "float32",
    backend: str = "auto",
    quantize: str | None = None,
    workers: int = 2,
    address: str | None = None,
    text_field: str = "text",
    id_field: str | None = None,
    keep_text: bool = True,
    overwrite: bool = False,
    batch_size: int | None = None,
    progress: bool = True,
    layers: LayerSpec | None = None,
    combine: Combine | str = "mean",
    pooling: Pooling | str = "auto",
    mask_special: bool = False,
    normalize: bool | None = None,
    long: LongText | str = "truncate",
    stride: int | None = None,
    post: PostArg = None,
) -> JobSummary:
    """Embed a corpus (a file, a glob or a list of texts) into Parquet shards `OUTPUT/part-*.parquet`."""
    ray = _ray()
    import pyarrow.parquet as pq

    from .model import load

    out = _output_dir(Path(output), overwrite=overwrite)
    sources = _sources(source)
    # The driver loads the model (CPU) only to check the options and to write the same provenance.
    # With int8 or onnxruntime this also exports the model once, so the actors find it in the cache.
    m = load(model, device="cpu", dtype=dtype, backend=backend, quantize=quantize)
    options = EmbedOptions(layers, combine, pooling, mask_special, normalize, long, stride, post)
    settings = resolve(m, options).settings(m, model)
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    start = time.perf_counter()
    rows = batch_size or _default_batch(_gpus_per_worker(ray, device))
    corpus = ray.data.read_datasource(
        _corpus_source(sources, text_field, id_field, rows),
        num_cpus=_IO_CPUS,
        override_num_blocks=len(sources),
    )
    embedded = embed_dataset(
        corpus, model=model, workers=workers, device=device, dtype=dtype, backend=backend, quantize=quantize,
        batch_size=rows, layers=layers, combine=combine, pooling=pooling, mask_special=mask_special,
        normalize=normalize, long=long, stride=stride, post=post,
    )  # fmt: skip
    embedded.write_datasink(_shard_sink(out, settings, keep_text), ray_remote_args={"num_cpus": _IO_CPUS})
    summary = JobSummary(output=out, files=sorted(out.glob("part-*.parquet")))
    for shard in summary.files:
        counts = pq.read_table(shard, columns=["n_tokens", "truncated"])
        summary.embedded += counts.num_rows
        summary.tokens += int(counts.column("n_tokens").to_numpy().sum())
        summary.truncated += int(np.count_nonzero(counts.column("truncated").to_numpy()))
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


def _sources(source: str | list[str]) -> list[Any]:
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


def _corpus_source(sources: list[Any], text_field: str, id_field: str | None, rows: int) -> Any:
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


def _shard_sink(out: Path, settings: dict[str, Any], keep_text: bool) -> Any:
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
                    shard = _shard_table(table, settings, keep_text)
                    writer = writer or pq.ParquetWriter(tmp, shard.schema)
                    writer.write_table(shard)
            if writer is not None:
                writer.close()
                os.replace(tmp, part)

    return BertscopeShards()


def _shard_table(table: Any, settings: dict[str, Any], keep_text: bool) -> Any:
    """(rows) id, text, embedding, n_tokens, truncated -> the local Parquet sink's table and metadata."""
    column = table.column("embedding").combine_chunks()
    dimension = column.type.list_size
    vectors = np.asarray(column.flatten()).reshape(-1, dimension)
    texts = table.column("text").to_pylist()
    records = [Record(i, t, 0) for i, t in zip(table.column("id").to_pylist(), texts, strict=True)]
    schema = parquet_schema(settings, dimension, keep_text=keep_text)
    n_tokens = np.asarray(table.column("n_tokens"))
    truncated = np.asarray(table.column("truncated"))
    return arrow_table(schema, records, vectors, n_tokens, truncated, keep_text)


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
