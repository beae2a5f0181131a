"""Review 26 (r3) of the static exports: an export that fails or is interrupted leaves no file that looks
complete (each file is written beside its target and renamed in once every block is in; an .npy is
written in order, so a full disk is one ENOSPC line, never a bus error), and the word2vec counts file
escapes names as the .vec does, so gensim reads the two together. And of the cache fixes beside them:
`cache --clear` counts every unfinished folder it removed before one it could not, and a folder another
clear removed meanwhile is no error; `cache bundled` lists the bundled model where a ./bundled folder is
here too (a note names the folder), and only --clear is refused there; a static model's refusal spells
decontextualized."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends.cache import cached_files
from bertscope.backends.onnx import EXPORT_FORMAT
from bertscope.core.exports import EXPORTS, Block, ExportFormat, RowKind, Rows, write_rows, write_vectors
from bertscope.errors import InvalidSpec
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


class _FullDisk:
    """A staged file on a full disk: its first write raises ENOSPC naming no file (a buffered write's way)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def write(self, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.real.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_full_disk_is_one_line_and_no_file(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a full disk the map over a sparse file died of SIGBUS (exit 135), leaving v.npy at full size."""
    real = Path.open

    def full(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        opened = real(self, mode, *args, **kwargs)
        return _FullDisk(opened) if mode == "wb" and self.name.startswith(".bertscope-") else opened

    monkeypatch.setattr(Path, "open", full)
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


# cache --clear ---------------------------------------------------------------------------------------


def _unfinished(cache: Path, *names: str) -> list[Path]:
    """An export (with its record) and unfinished export folders `names` in the cache's onnx folder."""
    onnx = cache / "onnx"
    onnx.mkdir(parents=True)
    export = onnx / f"bert-0e8e6750365ca43ab91d-float32-v{EXPORT_FORMAT}.onnx"
    export.write_bytes(b"\0" * 1000)
    export.with_suffix(".json").write_text("{}")
    folders = [onnx / name for name in names]
    for folder in folders:
        folder.mkdir()
        (folder / "float32.onnx").write_bytes(b"\0" * 10)
    return folders


def test_clear_counts_the_unfinished_folders_removed_before_one_it_could_not(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "1 cached file removed before it" where .export-a had gone too."""
    first, second = _unfinished(cache, ".export-a", ".export-b")
    real = shutil.rmtree

    def refused(path: Path, *, ignore_errors: bool = False) -> None:
        if Path(path) == second:
            raise PermissionError(errno.EACCES, "Permission denied", str(Path(path) / "float32.onnx"))
        real(path)

    monkeypatch.setattr(shutil, "rmtree", refused)
    cleared = run_main("cache", "--clear")
    assert cleared.code == 1, cleared
    assert cleared.stderr.strip() == (
        f"error: cannot clear the cache: {second} is read-only (Permission denied); 2 cached files removed "
        "before it"
    )
    assert not first.exists() and [f.path for f in cached_files()] == [second]


def test_clear_takes_a_folder_another_clear_removed_as_gone(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clears at once: the other's rmtree got there first, and ENOENT escaped as a bare OSError."""
    (folder,) = _unfinished(cache, ".export-a")
    real = shutil.rmtree

    def raced(path: Path, *, ignore_errors: bool = False) -> None:
        real(path)  # the other clear
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(Path(path) / "float32.onnx"))

    monkeypatch.setattr(shutil, "rmtree", raced)
    cleared = run_main("cache", "--clear")
    assert cleared.code == 0, cleared
    assert cleared.stderr.splitlines() == ["removed 2 cached files (1.0 kB)"]
    assert not folder.exists() and cached_files() == []


@pytest.mark.parametrize("word", ["bundled", "default"])
def test_cache_bundled_lists_the_bundled_model_beside_a_folder_of_that_name(
    word: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-m bundled` acts on the bundled model everywhere; cache refused it even to list."""
    from bertscope.backends.digest import content_digest
    from bertscope.core.folder import bundled_path

    here = tmp_path / "here"
    (here / word).mkdir(parents=True)
    (here / word / "config.json").write_text('{"model_type": "bert"}')
    monkeypatch.chdir(here)
    listed = run_main("cache", word)
    assert listed.code == 0, listed
    assert listed.stderr.strip().splitlines() == [
        f"note: `{word}` names the bundled model, listed here; ./{word} here is a model folder too: give "
        f"`./{word}` for its files",
        f"no cached files of {word} (content {content_digest(bundled_path())}) in {cache}",
    ]
    cleared = run_main("cache", "--clear", word)
    assert cleared.code == 1 and f"./{word} here is a model folder too" in cleared.stderr


def test_a_static_models_refusal_spells_decontextualized(static_m2v: Any) -> None:
    """It said 'decontextualised vectors' where the project spells decontextualized."""
    with pytest.raises(InvalidSpec, match="decontextualized vectors need a transformer") as refused:
        static_m2v.static_decontextualized(["bread"])
    assert "decontextualised" not in str(refused.value)
