"""The Ray Data runner: the one engine in a pool of actors, for corpora too big or too slow for one machine.

Ray reads the corpus (`reading`: bertscope's own readers inside Ray read tasks, so ids equal the local
job's), `map_batches` runs a corpus level (`bertscope.io.levels`: sentence, token, word or chunk rows)
in an actor pool (the model loaded once per actor) and a Ray datasink writes Parquet shards with the
local Parquet sink's schema, metadata and checksums (`shards`).

A bad record fails the job with the local job's `CorpusError` naming FILE:LINE, raised as itself
(`raising_bertscope_errors`). A finished job writes `OUTPUT/_bertscope.json` (its inputs, rows and
settings digest) last: a folder of shards without it holds a job that did not finish, which `resume=True`
(`--resume`) continues as the local job does: the records whose rows are saved are skipped (proven the
same records), the settings must be the saved ones, and the output equals an uninterrupted run's.
"""

from __future__ import annotations

import shutil
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._enums import Backend, DType, Level, Mode, Quantize
from ..core.cpu import usable_cpus
from ..core.encoder import Encoder
from ..core.exports import refuse_stdout
from ..core.loaders import load_model
from ..core.spec import reload_arg, stored_settings
from ..errors import BertscopeError, InvalidInput, InvalidSpec, JobInterrupted
from ..io.job import JobSummary, refuse_idle_job_options, refuse_resume_with_overwrite
from ..io.job_lock import job_lock
from ..io.level_table import LEVELS, CorpusOptions, make_level, refuse_idle_level_options
from ..io.levels import SentenceLevel, vector_columns
from ..io.parquet_sink import with_settings
from .cluster import IO_CPUS, default_batch, gpus_per_worker, import_ray, raising_bertscope_errors, start_ray
from .reading import (
    corpus_dataset,
    corpus_datasource,
    empty_texts,
    input_sources,
    refuse_empty_corpus,
    refuse_unfit_dataset,
    source_prefix,
)
from .shards import (
    MANIFEST,
    RESUME,
    ShardFolder,
    abandoned_if_unwritten,
    finish_swap,
    open_folder,
    shard_folder_note,
    shard_sink,
    swap_in,
    write_manifest,
)
from .units import RECORD, embed_located, embed_units

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..io.level_table import CorpusKeywords

__all__ = [
    "embed_dataset",
    "run_ray_job",
    "RayJobSummary",
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
    "source_prefix",
]


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
        located: bool = False,
    ) -> None:
        self.refused: BertscopeError | None = None
        self.text_field = text_field
        self.located = located  # a job's own read (corpus_dataset(located=True)), not a user's dataset
        try:
            # Ray may give an actor more logical CPUs than its node has: load() refuses more threads
            self.model = load_model(
                model, device=device, dtype=dtype, threads=min(threads, usable_cpus()), **runtime
            )
            self.level = make_level(self.model, options)
            self.level.empty()  # the typed columns of a batch of only empty texts, found once
        except BertscopeError as refused:
            # Raised from the first batch instead: a failed __init__ is Ray's ActorDiedError, which keeps
            # only the text of the error (a 40-line one) and is retried, where a batch's error is the
            # exception itself, which raising_bertscope_errors gives back as the local job's one line.
            self.refused = refused

    def __call__(self, batch: Any) -> Any:
        """(rows) Arrow table -> the level's rows (sentence: the same rows plus the vector columns); a
        corpus job's numbered rows come tagged with their units (`units`)."""
        if self.refused is not None:
            raise self.refused
        if self.located and RECORD in batch.column_names:
            return embed_units(self.level, batch, self.text_field)
        return embed_located(self.level, batch, self.text_field, located=self.located)


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
    located: bool = False,
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
    `located`: the dataset is `corpus_dataset(..., located=True)`'s, whose `_where` column (each row's
    FILE:LINE, named by a refusal) the actors read and drop; any other dataset keeps all its columns.
    """
    asked = _options(options, keywords)
    ray = import_ray()
    field = _text_field(text_field, text_column)
    model_arg = reload_arg(model) if isinstance(model, Encoder) else model
    if isinstance(model, Encoder):
        if model.calibration_digest:
            raise InvalidSpec(
                "Ray workers load the model from its folder, so its int8 would be fitted on the shipped "
                "calibration texts, not yours; embed with embed_corpus, or use the shipped calibration"
            )
        backend, quantize, dtype = model.backend, model.quantize, model.info().dtype
    gpus = gpus_per_worker(ray, device)
    limits = {"max_restarts": max_restarts, "max_task_retries": max_task_retries}
    retries = {k: v for k, v in limits.items() if v is not None}  # 0 is asked too: no restart
    if retries and not _takes_remote_args(dataset.map_batches):
        version = getattr(ray, "__version__", "?")
        raise InvalidSpec(
            f"this Ray ({version}) takes no {' or '.join(retries)} in map_batches (Ray 2.64 removed them); "
            "leave them out: Ray restarts a failed actor and retries its tasks without limit"
        )
    # A field missing or of numbers is refused now where Ray knows the schema; else by the actors, alike.
    refuse_unfit_dataset(dataset, field, needs_id=LEVELS[Level(asked.level.level)] is not SentenceLevel)
    embedded = dataset.map_batches(
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
            "text_field": field,
            "runtime": {"backend": backend, "quantize": quantize},
            "options": asked,
            "located": located,
        },
        num_cpus=cpus_per_worker,
        num_gpus=gpus,
        # Only when asked: Ray 2.60-2.63 warn on these (its defaults already restart and retry without limit).
        **retries,
    )
    # An actor's refusal (a value that is not text) comes out as the InvalidInput it is, not Ray's
    # UserCodeException; this dataset's own context, not the caller's.
    embedded.context.raise_original_map_exception = True
    return embedded


def _takes_remote_args(map_batches: Any) -> bool:
    """Whether Ray's `map_batches` still passes extra keywords on to the actors (`**ray_remote_args`)."""
    import inspect

    kinds = [p.kind for p in inspect.signature(map_batches).parameters.values()]
    return inspect.Parameter.VAR_KEYWORD in kinds


def _options(options: CorpusOptions | None, keywords: CorpusKeywords) -> CorpusOptions:
    """The options given as one object or as keywords (not both); a level option the level does not read
    is refused, as the local job refuses it."""
    if options is not None and keywords:
        raise InvalidInput(f"give the options as options= or as keywords, not both ({', '.join(keywords)})")
    asked = options or CorpusOptions.of(**keywords)
    refuse_idle_level_options(asked.level)
    return asked


def _text_field(text_field: str, text_column: str | None) -> str:
    if text_column is None:
        return text_field
    warnings.warn(
        "embed_dataset(text_column=...) is deprecated; use text_field=..., as embed_corpus does",
        DeprecationWarning,
        stacklevel=3,
    )
    return text_column


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
    resume: bool = False,
    overwrite: bool = False,
    batch_size: int | None = None,
    progress: bool = True,
    mode: Mode | str = Mode.EXACT,
    fast_min_cosine: float | None = None,
    options: CorpusOptions | None = None,
    **keywords: Unpack[CorpusKeywords],
) -> RayJobSummary:
    """Embed a corpus (a file, a glob or a list of texts) into Parquet shards `OUTPUT/part-*.parquet`,
    then `OUTPUT/_bertscope.json` once every shard is written.

    `resume=True` continues a job that did not finish, as `embed_corpus(resume=True)` does: the texts
    whose rows are saved are skipped (`resumed_from` counts them), the rest embedded; other settings or
    another input than the saved shards' are refused. `mode="fast"` is resolved once, by the driver
    (CPU); the actors run the mode it chose. `batch_size`: rows per actor call (`embed_dataset`'s);
    `cpus_per_worker`: each actor's CPUs and torch threads. A bad record raises the local job's
    `CorpusError` (FILE:LINE). The recipe and level keywords (`CorpusKeywords`) may come as one
    `options`, as the command line gives them.
    """
    asked = _options(options, keywords)
    # the local job's refusals, before a model loads: resume with overwrite (overwrite emptied the folder
    # and resumed nothing), fields of texts without records, idle level options
    refuse_resume_with_overwrite(resume=resume, overwrite=overwrite)
    refuse_idle_job_options(source, output, asked, text_field=text_field, id_field=id_field)
    shards = "a Ray corpus job writes its vectors to a folder of Parquet shards"
    refuse_stdout(output, f"{shards}; give a folder name such as vectors")
    ray = import_ray()
    out = Path(output)
    sources = input_sources(source)
    # An empty corpus is refused as the local job refuses it: before a model loads or Ray starts, and
    # before the output is opened (no folder of no rows to trip the next run).
    refuse_empty_corpus(source, sources, out, text_field=text_field, id_field=id_field)
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
    # One job per output, as the local job: a second one (a --resume while this runs) is refused.
    with job_lock(out):
        recovered = finish_swap(out)
        if recovered is not None:
            warnings.warn(recovered, UserWarning, stacklevel=2)
        made = not out.exists()
        folder = open_folder(out, resume=resume, overwrite=overwrite)
        # where this run writes: `out`, or beside it where it replaces an old job's output (swapped in
        # once the manifest is written, so a job that fails or is stopped leaves the old output whole)
        work = folder.out
        with abandoned_if_unwritten(out, made=made), _dropped_if_failed(work, out):
            schema = folder.settled(with_settings(rows_of.empty(), settings).schema, settings)
            own_ray = start_ray(ray, address)
            ray.data.DataContext.get_current().enable_progress_bars = progress
            start = time.perf_counter()
            rows = batch_size or default_batch(gpus_per_worker(ray, device))
            # The reader refuses a text the tokenizer gives no pieces, naming its line, as the local job's.
            tokenizer = m.tokenizer if isinstance(m, Encoder) else None
            corpus = corpus_dataset(
                sources, text_field, id_field, rows, tokenizer=tokenizer, numbered=(folder.done, out),
                located=True, empties=work / RESUME,
            )  # fmt: skip
            embedded = embed_dataset(
                corpus, model=model, workers=workers, device=device, dtype=dtype, backend=backend,
                quantize=quantize, cpus_per_worker=cpus_per_worker, batch_size=rows, options=asked,
                located=True,
            )  # fmt: skip
            try:
                # the job prints no Ray output (docs/ray.md): its lines stay in the session's logs
                with raising_bertscope_errors(embedded, quiet=True, own_ray=own_ray):
                    embedded.write_datasink(
                        shard_sink(work, schema, folder.run), ray_remote_args={"num_cpus": IO_CPUS}
                    )
            except KeyboardInterrupt:
                raise JobInterrupted(_interrupted(work, out)) from None
            seconds = time.perf_counter() - start
            # counted by the read tasks (every record passes through one); gone with _resume/ below
            empty = empty_texts(work / RESUME)
            write_manifest(work, source, _totals(work, rows_of, schema), schema)
            if work != out:
                swap_in(work, out)
            summary = _summary(out, rows_of, schema, folder, max_tokens=m.max_tokens)
            summary.seconds = seconds
            summary.empty = empty
    return summary


def _interrupted(work: Path, out: Path) -> str:
    """What a Ctrl-C left: the earlier output (a replacement is dropped), the shards saved for --resume,
    or nothing where no shard was written yet (the folder is removed: `abandoned_if_unwritten`)."""
    if work != out:
        return (
            f"interrupted; {out} keeps the earlier job's output (this replacement of it is dropped). Run it "
            "again with overwrite=True (--overwrite) to replace it"
        )
    if not any(out.glob("part-*.parquet")):
        return f"interrupted before any shard was written to {out}; nothing was saved: run the command again"
    return (
        f"interrupted; the texts of every shard written to {out} are saved. Run it again with resume=True "
        "(--resume) to continue"
    )


@contextmanager
def _dropped_if_failed(work: Path, out: Path) -> Iterator[None]:
    """A replacement that fails or is stopped is dropped whole: the old output stays as it was."""
    try:
        yield
    except BaseException:
        if work != out:
            shutil.rmtree(work, ignore_errors=True)
        raise


def _tally(shards: list[Path], rows_of: Any, schema: Any) -> tuple[int, int, int, int]:
    """(texts, tokens, truncated, rows) of shards, read from their light columns."""
    import pyarrow.parquet as pq

    vectors = set(vector_columns(schema))
    texts = tokens = truncated = rows = 0
    for shard in shards:
        table = pq.read_table(shard, columns=[n for n in schema.names if n not in vectors])
        counts = rows_of.tally(table)
        texts, tokens, truncated = texts + counts[0], tokens + counts[1], truncated + counts[2]
        rows += table.num_rows
    return texts, tokens, truncated, rows


@dataclass
class RayJobSummary(JobSummary):
    """A Ray job's `JobSummary`, with the model's limit its truncated texts were cut at (the driver's
    model: the command line says the cut in the local job's words without loading one)."""

    max_tokens: int = 0


def _summary(out: Path, rows_of: Any, schema: Any, folder: ShardFolder, *, max_tokens: int) -> RayJobSummary:
    """This run's counts (the shards it wrote), and the texts it found saved."""
    files = sorted(out.glob("part-*.parquet"))
    summary = RayJobSummary(
        output=out, files=files, resumed_from=folder.records, level=rows_of.name, max_tokens=max_tokens
    )
    new = [f for f in files if f not in folder.kept]
    summary.embedded, summary.tokens, summary.n_truncated, summary.rows = _tally(new, rows_of, schema)
    return summary


def _totals(out: Path, rows_of: Any, schema: Any) -> dict[str, int]:
    """The whole job's counts, for its manifest."""
    texts, tokens, truncated, rows = _tally(sorted(out.glob("part-*.parquet")), rows_of, schema)
    return {"texts": texts, "tokens": tokens, "truncated": truncated, "rows": rows}
