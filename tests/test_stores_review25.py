"""Review of audit 25e's store fixes: -m bundled is the bundled model whatever folder the working folder
holds, ~ expanded as the load expands it; a .npy matrix of the user's own is not told to be rebuilt over;
a job that made an SQLite file and failed on its first batch leaves no file behind, even where SQLite
could not checkpoint, and one writing a store this user may not write says so, not that the disk is full; a
token store's wrong-model refusal reads the same with --device; the job module
imports where errno has no EDQUOT."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.errors import CorpusError
from bertscope.io import sqlite_store
from bertscope.io.query import refuse_other_folder
from bertscope.io.search import search
from bertscope.io.stores import open_store
from bertscope.model import Model
from console import run_main
from store_checks import refused_line

TEXTS = ["the cat sat on the mat", "dogs bark loudly", "money in the bank", "the river bank", "stocks fell"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, bundled: Model) -> Path:
    """A Parquet store of TEXTS made with the bundled model (an SQLite one, s.db, beside it)."""
    store = tmp_path_factory.mktemp("review25") / "bund.parquet"
    bertscope.embed_corpus(TEXTS, store, model=bundled, progress=False)
    bertscope.embed_corpus(TEXTS, store.with_name("s.db"), model=bundled, progress=False)
    return store


def _other_folder(folder: Path) -> Path:
    """A folder whose files are not the bundled model's (a config.json of its own)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    return folder


# --- 2. -m bundled beside a folder named bundled -----------------------------------------------------------


def test_bundled_is_the_bundled_model_beside_a_folder_of_that_name(
    made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the loader takes "bundled" for the bundled model before any folder: so does the check before it
    _other_folder(tmp_path / "bundled")
    monkeypatch.chdir(tmp_path)
    settings = open_store(made).settings
    refuse_other_folder(settings, "bundled", path=made)
    assert [hit.id for hit in search("the cat", made, model="bundled", top_k=1)] == ["1"]


def test_a_model_folder_under_home_is_checked_before_it_loads(
    made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _other_folder(tmp_path / "other")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CorpusError) as refused:
        refuse_other_folder(open_store(made).settings, "~/other", path=made)
    assert "the files of the model ~/other are not those it was made with" in str(refused.value)


# --- 3. a plain .npy matrix given as a store ---------------------------------------------------------------


def test_a_plain_npy_matrix_is_said_not_to_be_a_store(tmp_path: Path) -> None:
    mine = tmp_path / "mine.npy"
    np.save(mine, np.random.default_rng(0).random((5, 8), dtype=np.float32))
    line = refused_line(lambda: open_store(mine))
    assert line == (
        f"{mine} is a NumPy matrix, not a bertscope store: a .npy store keeps its settings and ids in files "
        "beside it (mine.settings.json, mine.ids.txt); make one with `bertscope embed -i CORPUS -o STORE.npy`"
    )
    assert "--overwrite" not in run_main("similar", "--id", "1", "--store", str(mine)).stderr


# --- 4. a full disk on the first batch of a job that made the SQLite file ----------------------------------


class _FullDisk:
    """An SQLite connection on a full disk: its first batch fails, and its close cannot checkpoint, so the
    -wal and -shm files stay beside the file (as SQLite leaves them there)."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self.db, self.path = db, Path(path)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        if sql.startswith("INSERT INTO embeddings"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.executemany(sql, rows)

    def close(self) -> None:
        self.db.close()
        for end in ("-wal", "-shm"):
            self.path.with_name(self.path.name + end).write_bytes(b"\0" * 64)

    def __enter__(self) -> sqlite3.Connection:
        return self.db.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.db.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def test_a_full_disk_on_the_first_batch_leaves_no_file_the_job_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bundled: Model
) -> None:
    out = tmp_path / "a.db"
    opened = sqlite3.connect
    monkeypatch.setattr(sqlite_store.sqlite3, "connect", lambda path: _FullDisk(opened(path), path))
    line = refused_line(lambda: bertscope.embed_corpus(TEXTS, out, model=bundled, progress=False))
    assert "nothing was written to it" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --- 5. a token store's wrong-model refusal, with and without --device -------------------------------------


def test_a_token_stores_wrong_model_refusal_reads_the_same_with_device(
    tmp_path: Path, tiny_dirs: dict[str, Path], tiny_models: dict[str, Model]
) -> None:
    store = tmp_path / "tok.parquet"
    bertscope.embed_corpus(TEXTS, store, model=tiny_models["bert"], level="tokens", progress=False)
    other = str(tiny_dirs["roberta"])
    asked = ("similar", "--store", str(store), "--word", "bank", "--context", "the bank", "-m", other)
    plain, on_cpu = run_main(*asked), run_main(*asked, "--device", "cpu")
    assert plain.code == on_cpu.code == 1
    assert on_cpu.stderr == plain.stderr
    assert ", layers [" in plain.stderr and ", combine " in plain.stderr


# --- 1. a job writing to a store this user may read but not write ------------------------------------------

# A job adding a collection to a store, printing the one line refusing it.
_ADDER = """
import sys
import bertscope
from bertscope.errors import BertscopeError
try:
    bertscope.embed_corpus(["a cat"], sys.argv[1], model=sys.argv[2], progress=False, collection="x")
except BertscopeError as exc:
    print(exc)
"""


def test_a_job_writing_a_store_it_may_not_write_says_so(
    made: Path, tmp_path: Path, tiny_dirs: dict[str, Path]
) -> None:
    # a chmod 0444 store in a folder the user writes: SQLite opens it read-only and the first batch says
    # SQLITE_READONLY, which is no full disk. Root writes it anyway: its job runs as nobody.
    drop: list[str] = []
    base = tmp_path
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root needs setpriv to write as another user")
        drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        base = Path(tempfile.mkdtemp(prefix="bertscope-ro-"))
    try:
        base.chmod(0o777)
        model = shutil.copytree(tiny_dirs["bert"], base / "tiny")
        for path in [model, *model.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        store = base / "s.db"
        shutil.copyfile(made.with_name("s.db"), store)
        store.chmod(0o444)
        env = {**os.environ, "HOME": str(base), "BERTSCOPE_CACHE": str(base / "cache"), "HF_HUB_OFFLINE": "1"}
        command = [*drop, sys.executable, "-c", _ADDER, str(store), str(model)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == (
            f"{store}: collection 'x' could not take this batch (attempt to write a readonly database); "
            "nothing was written to it: this user cannot write the file, or its folder, where SQLite makes "
            "its -wal and -shm files: make them writable (chmod u+w), or name another file, then run the "
            "same job again"
        )
    finally:
        if base != tmp_path:
            shutil.rmtree(base)


# --- 7. a platform without errno.EDQUOT (Windows) ----------------------------------------------------------


def test_the_job_module_imports_where_errno_has_no_edquot() -> None:
    # in a process of its own: the module read again in this one would leave two of its classes about
    code = "import errno; del errno.EDQUOT; from bertscope.io import job; print(sorted(job._FULL))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted({errno.ENOSPC, errno.EFBIG}))
