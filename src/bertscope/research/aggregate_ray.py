"""Aggregated static vectors on Ray: the Ray runner's actors make the word rows, the driver sums them.

The corpus is read and embedded exactly as `bertscope embed --level words --engine ray` does (the same
datasource, the same word level in an actor pool); only the word rows' vectors and words come back to
the driver, batch by batch, into the same running sums as the local job (`research.aggregate`). Memory
on the driver grows with the corpus's vocabulary. A Ray run is not resumable: Ray retries failed
actors itself, and the local job (`static_from_corpus(checkpoint=...)`) is the resumable one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._enums import Level, SubwordPooling
from ..io.level_table import CorpusOptions
from ..io.levels import LevelOptions
from .aggregate import AggregatedStatic, aggregated, reduce_tables, word_level

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.spec import TokenKeywords

__all__ = ["aggregate_on_ray"]


def aggregate_on_ray(
    source: str | list[str],
    *,
    model: Any = None,
    min_count: int = 1,
    subword: SubwordPooling | str = "mean",
    workers: int = 2,
    device: str = "cpu",
    cpus_per_worker: float = 1.0,
    address: str | None = None,
    text_field: str = "text",
    batch_size: int | None = None,
    progress: bool = True,
    **options: Unpack[TokenKeywords],
) -> AggregatedStatic:
    """Each corpus word's mean vector at `layers` (as `static_from_corpus`), the forwards on Ray actors.

    `source` is a file, a glob or a list of texts; `model` a loaded Model (the actors load its
    source again), a folder or hub id (None: bundled). `device`: the actors' (auto: a GPU each where the
    cluster has GPUs); `cpus_per_worker`: each actor's CPUs and torch threads, as `run_ray_job`'s.
    `options`: `layers` (default 1), `long`, `stride`.
    """
    from ..core.loaders import load_model
    from ..distributed import (
        corpus_dataset,
        default_batch,
        embed_dataset,
        gpus_per_worker,
        import_ray,
        input_sources,
        raising_bertscope_errors,
    )
    from ..distributed.cluster import start_ray
    from ..distributed.reading import refuse_empty_corpus

    ray = import_ray()
    sources = input_sources(source)
    # An empty corpus is refused in the local job's words before a model loads or Ray starts (an
    # aggregation in memory: no output to name)
    refuse_empty_corpus(source, sources, Path("memory"), text_field=text_field, id_field=None)
    # The driver's model checks the options and gives the word level and settings the actors match.
    driver = load_model(model, device="cpu") if model is None or isinstance(model, (str, Path)) else model
    recipe = aggregated(**options)
    level, settings = word_level(driver, recipe, subword)
    # as `run_ray_job` starts it: Ray's log lines held to errors, a cluster not there refused in one line
    own_ray = start_ray(ray, address)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    rows = batch_size or default_batch(gpus_per_worker(ray, device))
    # blocks of about `rows` rows, so that every actor gets some; a text of no word pieces named by its line
    corpus = corpus_dataset(sources, text_field, None, rows, tokenizer=driver.tokenizer, located=True)
    asked = LevelOptions(level=Level.WORDS, keep_text=False, subword=subword)
    # The driver itself, not its name: the actors then load its dtype, backend and quantize, which the
    # settings written beside the vectors record (by name they loaded the defaults whatever was asked).
    words = embed_dataset(
        corpus, model=driver, workers=workers, device=device, cpus_per_worker=cpus_per_worker,
        batch_size=rows, options=CorpusOptions(recipe, asked), located=True,
    )  # fmt: skip
    wanted = ["position", "word", "pieces", "truncated", *level.vector_names()]  # tally counts the cut texts
    shown = source if isinstance(source, str) else Path("texts")
    # an actor's bad record is the local job's one line, and Ray's own lines stay in its logs (docs/ray.md)
    with raising_bertscope_errors(words, quiet=True, own_ray=own_ray):
        batches = words.iter_batches(batch_format="pyarrow", batch_size=None)
        tables = (batch.select(wanted) for batch in batches)
        return reduce_tables(driver, level, settings, tables, min_count=min_count, corpus=shown)
