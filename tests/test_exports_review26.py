"""Review 26 (r3) of the static exports: an export that fails or is interrupted leaves no file that looks
complete (each file is written beside its target and renamed in once every block is in; an .npy's space
is reserved first, so a full disk is one ENOSPC line, never a bus error), and the word2vec counts file
escapes names as the .vec does, so gensim reads the two together."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import bertscope
from bertscope.core.exports import EXPORTS, Block, ExportFormat, RowKind, Rows, write_rows, write_vectors
from console import run_main

_PIECES = RowKind(columns=(("token", str),), side=("token",))


def _interrupted_blocks() -> Iterator[Block]:
    """Two blocks, then a Ctrl-C while the third is made."""
    for k in range(2):
        yield {"token": [f"w{k}a", f"w{k}b"]}, np.full((2, 3), k, dtype=np.float32)
    raise KeyboardInterrupt


def _name(fmt: ExportFormat) -> str:
    return "o" + (EXPORTS[fmt].suffixes[0] if EXPORTS[fmt].suffixes else "")


@pytest.mark.parametrize("fmt", list(EXPORTS))
def test_an_interrupted_export_leaves_no_file(tmp_path: Path, fmt: ExportFormat) -> None:
    """The .npy was left at its full size with zero rows past the blocks written, and a rerun refused it."""
    with pytest.raises(KeyboardInterrupt):
        write_rows(tmp_path / _name(fmt), fmt, Rows(_PIECES, 6, 3, _interrupted_blocks()))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupted_static_export_keeps_the_file_it_would_replace_and_reruns(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope import static

    model, path = tiny_models["bert"], tmp_path / "v.npy"
    model.export_static(path, items=["the"])
    before = path.read_bytes(), (tmp_path / "v.vocab.txt").read_text(encoding="utf-8")
    real, calls = static._blocks, []

    def blocks(model: static.StaticSource, ids: list[int], chunk: int = 0) -> Iterator[Block]:
        for k, block in enumerate(real(model, ids, chunk=5)):  # small blocks: a Ctrl-C in the second
            calls.append(k)
            if k == 1:
                raise KeyboardInterrupt
            yield block

    monkeypatch.setattr(static, "_blocks", blocks)
    with pytest.raises(KeyboardInterrupt):
        model.export_static(path, overwrite=True)
    assert calls == [0, 1]
    assert (path.read_bytes(), (tmp_path / "v.vocab.txt").read_text(encoding="utf-8")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.npy", "v.vocab.txt"]
    monkeypatch.setattr(static, "_blocks", real)
    model.export_static(path, overwrite=True)
    assert np.load(path).shape == model.static_shape


def test_a_full_disk_is_one_line_and_no_file(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a full disk the map over a sparse file died of SIGBUS (exit 135), leaving v.npy at full size."""
    if not hasattr(os, "posix_fallocate"):
        pytest.skip("no posix_fallocate here: nothing is reserved")

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    out = tmp_path / "small" / "v.npy"
    out.parent.mkdir()
    ran = run_main("static", "-m", str(tiny_dirs["bert"]), "-o", str(out))
    assert ran.code == 1
    lines = ran.stderr.strip().splitlines()
    assert lines == [f"error: {os.strerror(errno.ENOSPC)} ({out}); nothing already saved is lost"]
    assert list(out.parent.iterdir()) == []


def test_the_counts_file_escapes_names_as_the_vec_does(tmp_path: Path) -> None:
    """`two words` and a raw NBSP in o.counts.tsv made gensim's fvocab read fail (too many values)."""
    from gensim.models import KeyedVectors

    words = ["plain", "two words", "a\u00a0b", "tab\there"]
    vec, counts = write_vectors(tmp_path / "o.vec", None, words, np.array([4, 3, 2, 1]), np.eye(4))
    loaded = KeyedVectors.load_word2vec_format(str(vec), fvocab=str(counts), binary=False)
    assert [(k, loaded.get_vecattr(k, "count")) for k in loaded.index_to_key] == [
        ("plain", 4), ("two\\u0020words", 3), ("a\\u00a0b", 2), ("tab\\there", 1),
    ]  # fmt: skip
