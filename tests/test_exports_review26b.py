"""Review 26 (r6) of the staged exports: a rename that fails puts back every file the export would have
replaced (v.npy's new rows sat beside v.vocab.tsv's old names); an aggregation's layers are renamed in
together (a failed second layer left the first's files, and a rerun refused them); an .npy is written in
order, so a killed export leaves only what it wrote (not the whole matrix's size reserved); and the
temporary names are short, so a name of 241-255 bytes exports."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from bertscope.core import exports
from bertscope.core.exports import (
    EXPORTS,
    Block,
    ExportFormat,
    ExportRule,
    RowKind,
    Rows,
    write_rows,
    write_vectors,
)
from bertscope.research.aggregate import AggregatedStatic

_VECTORS = np.arange(6, dtype=np.float32).reshape(3, 2)


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("failing", [1, 2, 3, 4])
def test_a_failed_rename_leaves_every_file_it_would_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    """The second rename failing (a file open elsewhere on Windows) left x, y, z's rows under a, b, c."""
    write_vectors(tmp_path / "v.npy", None, ["a", "b", "c"], np.array([1, 2, 3]), _VECTORS)
    before = _contents(tmp_path)
    real, calls = os.replace, []

    def flaky(source: Path, target: Path) -> None:
        calls.append(target)
        if len(calls) == failing:
            raise PermissionError(errno.EACCES, "Access is denied", str(target))
        real(source, target)

    monkeypatch.setattr(exports.os, "replace", flaky)
    with pytest.raises(PermissionError, match="Access is denied"):
        write_vectors(tmp_path / "v.npy", None, ["x", "y", "z"], np.array([9, 9, 9]), _VECTORS * 10)
    monkeypatch.setattr(exports.os, "replace", real)
    assert _contents(tmp_path) == before
    assert np.load(tmp_path / "v.npy")[:, 0].tolist() == [0, 2, 4]


def test_a_replacing_export_keeps_no_backup(tmp_path: Path) -> None:
    write_vectors(tmp_path / "v.npy", None, ["a", "b", "c"], np.array([1, 2, 3]), _VECTORS)
    write_vectors(tmp_path / "v.npy", None, ["x", "y", "z"], np.array([9, 9, 9]), _VECTORS * 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.npy", "v.vocab.tsv"]
    assert (tmp_path / "v.vocab.tsv").read_text(encoding="utf-8").split() == ["x", "9", "y", "9", "z", "9"]


def _failing_second_layer(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The npy writer fails as a full disk does on its second call (the second layer)."""
    rule, calls = EXPORTS[ExportFormat.NPY], []

    def writer(path: Path, rows: Rows, stage: Callable[[Path], Path]) -> list[Path]:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return rule.write(path, rows, stage)

    monkeypatch.setitem(EXPORTS, ExportFormat.NPY, ExportRule(rule.suffixes, rule.described, writer))
    return calls


def _aggregated(scale: float) -> AggregatedStatic:
    return AggregatedStatic(["a", "b"], np.array([1, 2]), (1, 2), np.full((2, 2, 3), scale, np.float32))


def test_an_aggregation_that_fails_on_a_layer_writes_no_layer_and_reruns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Layer 1's files stayed, and the rerun was refused: 'w.layer1.npy, ... exist; pass overwrite=True'."""
    calls = _failing_second_layer(monkeypatch)
    with pytest.raises(OSError, match="No space left on device"):
        _aggregated(1).export(tmp_path / "w.npy")
    assert calls == [tmp_path / "w.layer1.npy", tmp_path / "w.layer2.npy"]
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()  # the writer as it is
    written = _aggregated(1).export(tmp_path / "w.npy")
    assert sorted(p.name for p in written) == sorted(p.name for p in tmp_path.iterdir()) == [
        "w.layer1.npy", "w.layer1.vocab.tsv", "w.layer2.npy", "w.layer2.vocab.tsv",
    ]  # fmt: skip


def test_an_aggregation_that_fails_on_a_layer_keeps_every_layer_it_would_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _aggregated(1).export(tmp_path / "w.npy")
    before = _contents(tmp_path)
    _failing_second_layer(monkeypatch)
    with pytest.raises(OSError, match="No space left on device"):
        _aggregated(5).export(tmp_path / "w.npy", overwrite=True)
    assert _contents(tmp_path) == before


_PIECES = RowKind(columns=(("token", str),), side=("token",))


def test_an_npy_being_written_holds_only_the_rows_written(tmp_path: Path) -> None:
    """The whole matrix's space was reserved first: a killed export left a hidden file of its full size."""
    seen: list[int] = []

    def blocks() -> Iterator[Block]:
        yield {"token": ["a"]}, np.ones((1, 64), np.float32)
        parts = [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
        assert len(parts) == 2  # the matrix and its vocabulary, staged
        seen.append(sum(p.stat().st_size for p in parts))
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_rows(tmp_path / "big.npy", None, Rows(_PIECES, 200_000, 64, blocks()))
    assert seen and seen[0] <= 128 + 64 * 4, seen  # the header and one row at most, not 51 MB
    assert list(tmp_path.iterdir()) == []


def test_an_npy_loads_as_numpy_saves_it(tmp_path: Path) -> None:
    vectors = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    path, _ = write_vectors(tmp_path / "v.npy", None, list("abcde"), np.ones(5), vectors)
    np.save(tmp_path / "ref.npy", vectors)
    assert path.read_bytes() == (tmp_path / "ref.npy").read_bytes()


@pytest.mark.parametrize("fmt", list(EXPORTS))
def test_a_long_legal_name_exports(tmp_path: Path, fmt: ExportFormat) -> None:
    """A name of 241-255 bytes failed: 'File name too long (.www....vec.00692030.part)'."""
    suffix = EXPORTS[fmt].suffixes[0] if EXPORTS[fmt].suffixes else ""
    # 241-253 bytes, the side files' too (projector's .metadata.tsv adds 13 to a name without suffix)
    name = "w" * (245 - len(suffix) if suffix else 240) + suffix
    files = write_vectors(tmp_path / name, fmt, ["a", "b", "c"], np.array([1, 2, 3]), _VECTORS)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)
    assert 240 < min(len(p.name.encode()) for p in files) <= max(len(p.name.encode()) for p in files) <= 255
