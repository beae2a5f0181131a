"""Audit 25e: stores over time. An SQLite store on read-only media is read (immutable, where no writer can
change it), or refused naming the cause; a full disk on a job's first SQLite batch says nothing was written,
not that batches were kept; a chunk store without its corpus says so in plain words; a .npy store missing a
file beside it names the fix; verify notes a store a newer bertscope wrote."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.errors import InvalidInput
from bertscope.io import sqlite_store
from bertscope.io.checksums import ROW_CHECKS, ROW_CHECKS_KEY, sealed, unsealed
from bertscope.io.stores import open_store
from bertscope.model import Model
from bertscope.verify.rows import texts_by_id
from bertscope.verify.store import verify_store
from store_checks import refused_line

TEXTS = ["the cat sat on the mat", "dogs bark loudly", "a bird sings", "rain falls in spring", "stocks fell"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> dict[str, Path]:
    """A WAL SQLite store and a .npy store of TEXTS, and the corpus file they were made from."""
    folder = tmp_path_factory.mktemp("audit25")
    corpus = folder / "c.txt"
    corpus.write_text("".join(f"{text}\n" for text in TEXTS))
    stores = {"corpus": corpus}
    for name in ("s.db", "s.npy"):
        bertscope.embed_corpus(corpus, folder / name, model=bundled, progress=False, batch_size=2)
        stores[name] = folder / name
    return stores


def _ids(path: Path) -> list[str]:
    return [i for ids, _, _ in open_store(path).chunks(2) for i in ids]


# --- 1. an SQLite store in a folder that cannot be written -------------------------------------------------


# A process that reads a store and prints its ids, or the one line refusing it.
_READER = """
import sys
from pathlib import Path
from bertscope.errors import BertscopeError
from bertscope.io.stores import open_store
try:
    print(" ".join(i for ids, _, _ in open_store(Path(sys.argv[1])).chunks(2) for i in ids))
except BertscopeError as exc:
    print(exc)
"""
_NOBODY = 65534


def _read_elsewhere(store: Path) -> str:
    """What a process that cannot write the store's folder reads of it: as root (which writes anywhere a
    mount allows), one dropped to nobody by `setpriv`; otherwise this user's own, the folder being chmod
    0555."""
    drop: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root needs setpriv to read as another user")
        drop = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
    env = {**os.environ, "HOME": str(store.parent.parent), "HF_HUB_OFFLINE": "1"}
    command = [*drop, sys.executable, "-c", _READER, str(store)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def read_only(made: dict[str, Path], tmp_path: Path) -> Iterator[Path]:
    """A copy of the SQLite store in a folder the reader cannot write (`_read_elsewhere`): chmod 0555, and
    as root a folder nobody can reach (pytest's own are root's alone) whose copy nobody may read."""
    base = tmp_path
    if os.geteuid() == 0:
        base = Path(tempfile.mkdtemp(prefix="bertscope-ro-"))
        base.chmod(0o755)
    folder = base / "rom"
    folder.mkdir()
    store = folder / "s.db"
    shutil.copyfile(made["s.db"], store)
    store.chmod(0o644)
    folder.chmod(0o555)
    try:
        yield store
    finally:
        folder.chmod(0o755)
        if base != tmp_path:
            shutil.rmtree(base)


@contextmanager
def _writable(folder: Path) -> Iterator[None]:
    """The read-only folder made writable a moment, to put a file in it."""
    folder.chmod(0o755)
    yield
    folder.chmod(0o555)


def test_an_sqlite_store_in_a_read_only_folder_is_read(read_only: Path) -> None:
    assert _read_elsewhere(read_only) == " ".join(str(n) for n in range(1, len(TEXTS) + 1))
    assert sorted(p.name for p in read_only.parent.iterdir()) == ["s.db"]  # no -wal or -shm made


def test_a_store_its_reader_owns_in_a_folder_it_cannot_write_is_read(read_only: Path) -> None:
    # SQLite opens the file for writing, then cannot make the -shm beside it (SQLITE_READONLY_DIRECTORY)
    if os.geteuid() == 0:
        os.chown(read_only, _NOBODY, _NOBODY)
    assert _read_elsewhere(read_only) == " ".join(str(n) for n in range(1, len(TEXTS) + 1))
    assert sorted(p.name for p in read_only.parent.iterdir()) == ["s.db"]


def test_an_empty_wal_file_beside_a_read_only_store_holds_nothing_to_refuse(read_only: Path) -> None:
    with _writable(read_only.parent):
        read_only.with_name("s.db-wal").write_bytes(b"")
    assert _read_elsewhere(read_only) == " ".join(str(n) for n in range(1, len(TEXTS) + 1))


def test_a_read_only_store_with_a_wal_file_beside_it_says_why_it_cannot_be_read(read_only: Path) -> None:
    # writes a writer left in the -wal file: an immutable connection would not read them
    with _writable(read_only.parent):
        read_only.with_name("s.db-wal").write_bytes(b"frames")
    assert _read_elsewhere(read_only) == (
        f"{read_only}: could not read the store: its folder cannot be written here, and its -wal file holds "
        "writes not yet in the store, which a reader reads through a -shm file made beside it: copy the "
        "store with its -wal file to a folder you can write, then run again"
    )


# --- 2. a full disk on a job's first SQLite batch ----------------------------------------------------------


class _FullAt:
    """An SQLite connection whose `failing`th batch of rows fails as SQLite does on a full disk."""

    def __init__(self, db: sqlite3.Connection, failing: int) -> None:
        self.db, self.failing, self.batches = db, failing, 0

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        if sql.startswith("INSERT INTO embeddings"):
            self.batches += 1
            if self.batches == self.failing:
                raise sqlite3.OperationalError("disk I/O error")
        return self.db.executemany(sql, rows)

    def __enter__(self) -> sqlite3.Connection:
        return self.db.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.db.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


@pytest.mark.parametrize("failing", [1, 2])
def test_a_full_disk_on_a_batch_says_what_was_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bundled: Model, failing: int
) -> None:
    out = tmp_path / "x.db"
    opened = sqlite3.connect
    monkeypatch.setattr(sqlite_store.sqlite3, "connect", lambda path: _FullAt(opened(path), failing))
    line = refused_line(
        lambda: bertscope.embed_corpus(TEXTS, out, model=bundled, progress=False, batch_size=2)
    )
    said = f"{out}: collection 'default' could not take this batch (disk I/O error); "
    if failing == 1:  # the job's first batch: the file it made is gone again
        fix = "nothing was written to it: free the disk or lift the limit, then run the same job again"
        assert line == said + fix
        assert not out.exists()
    else:
        fix = "the batches written before it are kept; free the disk or lift the limit, then resume=True"
        fix += " (--resume)"
        assert line == said + fix
        with closing(opened(out)) as db:
            assert db.execute("SELECT id FROM embeddings ORDER BY rowid").fetchall() == [("1",), ("2",)]


# --- 4. a chunk store without its corpus ------------------------------------------------------------------


def test_a_store_without_its_corpus_says_what_it_keeps(tmp_path: Path) -> None:
    path = tmp_path / "ch.parquet"
    with pytest.raises(InvalidInput) as chunks:
        texts_by_id(["1"], {"corpus": None}, path, chunks=True)
    assert str(chunks.value) == (
        f"{path} keeps its chunks' texts, not the whole documents to re-embed them from: pass the corpus it "
        "was made from (corpus=, --corpus FILE)"
    )
    with pytest.raises(InvalidInput) as none:
        texts_by_id(["1"], {"corpus": None}, path)
    assert str(none.value).startswith(f"{path} keeps no texts to re-embed: pass the corpus")


# --- 5. a .npy store missing a file beside it --------------------------------------------------------------


@pytest.mark.parametrize("missing", ["s.ids.txt", "s.settings.json"])
def test_a_npy_store_missing_a_file_beside_it_names_the_fix(
    made: dict[str, Path], tmp_path: Path, missing: str
) -> None:
    for path in made["s.npy"].parent.glob("s.*"):
        if path.suffix != ".db" and path.name != missing:
            shutil.copyfile(path, tmp_path / path.name)
    store = tmp_path / "s.npy"
    line = refused_line(lambda: open_store(store))
    assert line == (
        f"{store} has no {missing} beside it, one of the store's files: restore {missing} from where the "
        f"store was copied, or make the store again with `bertscope embed -i CORPUS -o {store} --overwrite` "
        "and the options it was made with"
    )


# --- 6. a store a newer bertscope wrote -------------------------------------------------------------------


def test_verify_notes_a_store_a_newer_bertscope_wrote(
    made: dict[str, Path], tmp_path: Path, bundled: Model
) -> None:
    for path in made["s.npy"].parent.glob("s.*"):
        if path.suffix != ".db":
            shutil.copyfile(path, tmp_path / path.name)
    store = tmp_path / "s.npy"
    assert not [n for n in verify_store(store, corpus=made["corpus"], model=bundled).notes if "newer" in n]
    written = store.with_suffix(".settings.json")
    stored = json.loads(written.read_text())
    checksums = stored.pop("checksums")  # the rows' checksums: the settings' digest leaves them out
    settings = unsealed(stored)[0]
    settings[ROW_CHECKS_KEY] = ROW_CHECKS + 1
    written.write_text(json.dumps({**sealed(settings), "checksums": checksums}))
    check = verify_store(store, corpus=made["corpus"], model=bundled)
    assert check.ok
    assert (
        f"the store was written by a newer bertscope (row checks {ROW_CHECKS + 1}; this one knows up to "
        f"{ROW_CHECKS}): the checks it added were not made; upgrade bertscope to make them"
    ) in check.notes
