"""The `chunks` corpus level: one row per chunk of each document, late-chunked or each chunk alone.

    chunks  id (the document's), position (chunk number), start, end (character span in the document),
            text (the chunk's own text), n_tokens (the chunk's own word pieces kept, not the specials or
            the prompt's, late or not), truncated (pieces a chunk embedded alone lost to the
            window; 0 for late chunks), then the vector

It runs through the same resumable job, sinks and Ray runner as the other levels (`bertscope.io.levels`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..chunk_embed import iter_chunk_embeddings, late_spec
from ..core._enums import Level, Precision
from ..core.chunking import ChunkBy, check_late, chunk_spans
from ..core.engine import EmbedSpec, OnBatch
from ..core.post import PostProcessor
from ..core.spec import EmbedOptions, resolve
from ..core.texts_given import text_named
from .levels import CorpusLevel, LevelOptions, Rows, storage, vector_array
from .readers import Record

__all__ = ["ChunkLevel"]


class ChunkLevel(CorpusLevel):
    """One row per chunk: the document's id, the chunk's number, span, text and vector."""

    name = Level.CHUNKS
    pooled = True
    searchable = True
    spans = True
    options = ("chunks", "late", "chunk_size", "chunk_overlap")

    @classmethod
    def build(cls, model: Any, recipe: EmbedOptions, asked: LevelOptions) -> ChunkLevel:
        """Documents cut by `chunks` (`chunk_size`, `chunk_overlap`), late or not, as `Model.embed_chunks`."""
        cut = ChunkBy.parse(asked.chunks, what="chunking")
        late = check_late(asked.late)  # options built directly (not by CorpusOptions.of) checked too
        # Late chunks see every token: their options say long="window" where none was given
        # (CorpusOptions.of, the command line), and truncate asked of them is refused (late_spec), as
        # Model.embed_chunks refuses it, not turned into windows in silence.
        resolved = resolve(model, recipe)
        spec = late_spec(resolved.spec) if late else resolved.spec
        return cls(
            model, spec, **storage(asked), processor=resolved.post, chunks=cut, late=late,
            size=asked.chunk_size, overlap=asked.chunk_overlap,
        )  # fmt: skip

    def __init__(
        self,
        model: Any,
        spec: EmbedSpec,
        *,
        keep_text: bool,
        precision: Precision,
        processor: PostProcessor | None,
        chunks: ChunkBy,
        late: bool,
        size: int,
        overlap: int,
    ) -> None:
        super().__init__(model, spec, keep_text=keep_text, precision=precision)
        self.processor = processor
        self.chunks = chunks
        self.late = late
        self.size = size
        self.overlap = overlap

    def recorded(self) -> dict[str, Any]:
        """The spec, how documents are chunked, late or not, precision and post-processing."""
        settings = {"level": self.name.value, **self.spec.as_dict(), **self._chunking()}
        settings["precision"] = self.precision.value
        if self.processor is not None:
            settings["post"] = self.processor.describe()
        return settings

    def _chunking(self) -> dict[str, Any]:
        how: dict[str, Any] = {"chunks": self.chunks.value, "late": self.late}
        if self.chunks is ChunkBy.TOKENS:
            how.update(chunk_size=self.size, chunk_overlap=self.overlap)
        return how

    def embed(self, records: Sequence[Record], *, on_batch: OnBatch | None = None) -> Rows:
        """id, position, start, end, text, n_tokens, truncated, embedding per chunk, documents in order."""
        cut = {"tokenizer": self.model.tokenizer, "chunk_size": self.size, "chunk_overlap": self.overlap}
        docs = ((r.text, chunk_spans(r.text, self.chunks, **cut)) for r in records)
        ids, positions, starts, ends, texts, n_tokens, truncated, vectors = [], [], [], [], [], [], [], []
        results = iter_chunk_embeddings(
            self.model.engine, docs, self.spec, late=self.late, settings={}, on_batch=on_batch,
            # as the job names its texts (a file and line; a Ray row's id), as the other levels say it
            named=lambda number: text_named("text", number),
        )  # fmt: skip
        for record, result in zip(records, results, strict=True):
            ids += [record.id] * len(result)
            positions += list(range(len(result)))
            starts += [s for s, _ in result.spans]
            ends += [e for _, e in result.spans]
            texts += result.chunks
            n_tokens.append(result.n_tokens)
            truncated.append(result.n_dropped)
            vectors.append(result.vectors)
        matrix = np.concatenate(vectors)
        if self.processor is not None:
            matrix = self.processor.apply(matrix, check_finite=False)  # the store names a bad row
        columns: dict[str, Any] = {
            "id": pa.array(ids, pa.string()),
            "position": pa.array(positions, pa.int32()),
            "start": pa.array(starts, pa.int32()),
            "end": pa.array(ends, pa.int32()),
        }
        if self.keep_text:
            columns["text"] = pa.array(texts, pa.string())
        counts, dropped = np.concatenate(n_tokens), np.concatenate(truncated)
        columns["n_tokens"] = pa.array(counts.astype(np.int32))
        columns["truncated"] = pa.array(dropped.astype(np.int32))
        columns["embedding"] = vector_array(matrix, self.precision)
        return Rows(pa.table(columns), len(records), int(counts.sum()), int(np.count_nonzero(dropped)))

    def tally(self, table: pa.Table) -> tuple[int, int, int]:
        """(documents, pieces pooled, chunks truncated): documents are first chunks."""
        first = table.column("position").to_numpy() == 0
        cut = table.column("truncated").to_numpy()
        return int(first.sum()), int(table.column("n_tokens").to_numpy().sum()), int(np.count_nonzero(cut))
