"""Word vectors with their counts written as the static exports are: word2vec text, npy, parquet, projector.

word2vec   `<path>`: "n d" then "word v1 ... vd" per line (spaces in a word become U+2581), and
           `<stem>.counts.tsv` (word, count) beside it, as gensim's vocabulary file
npy        `<path>.npy` (n, d) float32 and `<stem>.vocab.tsv` (word, count)
parquet    columns word, count, vector (fixed-size float32 list)
projector  `<stem>.vectors.tsv` and `<stem>.metadata.tsv` (a word and count header), for
           projector.tensorflow.org
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InvalidInput
from ..static import ExportFormat, export_format

__all__ = ["write_vectors"]


def _counts_tsv(path: Path, words: Sequence[str], counts: np.ndarray, *, header: bool = False) -> None:
    with path.open("w", encoding="utf-8") as out:
        if header:
            out.write("word\tcount\n")
        for word, count in zip(words, counts.tolist(), strict=True):
            out.write(f"{word.replace(chr(9), ' ')}\t{count}\n")


def write_vectors(
    path: str | Path, fmt: ExportFormat | str | None, words: Sequence[str], counts: np.ndarray,
    vectors: np.ndarray,
) -> list[Path]:  # fmt: skip
    """Write (n, d) `vectors` of `words` with their `counts`; returns the files written."""
    path = Path(path)
    chosen = export_format(path, fmt)
    if not path.parent.exists():
        raise InvalidInput(f"cannot write {path}: the folder {path.parent} does not exist")
    vectors = np.asarray(vectors, dtype=np.float32)
    if chosen is ExportFormat.WORD2VEC:
        text = io.StringIO()
        np.savetxt(text, vectors, fmt="%.7g")
        with path.open("w", encoding="utf-8") as out:
            out.write(f"{len(words)} {vectors.shape[1]}\n")
            for word, row in zip(words, text.getvalue().splitlines(), strict=True):
                out.write(word.replace(" ", "\u2581") + " " + row + "\n")
        counts_path = path.with_name(path.stem + ".counts.tsv")
        _counts_tsv(counts_path, words, counts)
        return [path, counts_path]
    if chosen is ExportFormat.NPY:
        path = path if path.suffix == ".npy" else path.with_name(path.name + ".npy")
        vocab = path.with_suffix(".vocab.tsv")
        np.save(path, vectors)
        _counts_tsv(vocab, words, counts)
        return [path, vocab]
    if chosen is ExportFormat.PARQUET:
        import pyarrow as pa
        import pyarrow.parquet as pq

        dim = int(vectors.shape[1])
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim)
        table = pa.table(
            {"word": pa.array(list(words)), "count": pa.array(counts, pa.int64()), "vector": column}
        )
        pq.write_table(table, path)
        return [path]
    vectors_path, meta_path = path.with_suffix(".vectors.tsv"), path.with_suffix(".metadata.tsv")
    np.savetxt(vectors_path, vectors, delimiter="\t", fmt="%.7g")
    _counts_tsv(meta_path, words, counts, header=True)
    return [vectors_path, meta_path]
