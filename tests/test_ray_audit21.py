"""Audit 21 of the Ray runner: static --corpus on Ray starts Ray as embed does (its lines held, a cluster
not there refused at once, an empty corpus refused before Ray), Ray's false no-CPU warning held, the
summary's truncation warning and empty count, --long error naming FILE:LINE, a Ctrl-C before the first
shard, and a half-written shard not counted as one."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

import bertscope
from bertscope.cli.explore import free_port
from bertscope.errors import CorpusError, InvalidInput, JobInterrupted
from bertscope.io.level_table import CorpusOptions, make_level
from console import run_main

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(240)

# conftest's `cluster` starts Ray with this many CPUs for this module (one start)
RAY_CPUS = 2
LIGHT = ("--backend", "onnxruntime")  # the runner's lines, not the actors' runtime (as test_ray_audit12)
NO_FREE_CPUS = (
    "Warning: The Ray cluster currently does not have any available CPUs. The Dataset job will hang unless "
    "more CPUs are freed up."
)
NO_PROGRESS = (
    "Progress bars disabled. To enable, set `ray.data.DataContext.get_current().enable_progress_bars = True`."
)
FEW_INPUTS = "The minimum number of concurrent actors for the pool (2) is more than its inputs (1)"


class _Ray:
    """Ray as the driver sees it before it starts: `init` records what it was asked and starts it."""

    def __init__(self) -> None:
        self.inits: list[dict[str, Any]] = []
        context = SimpleNamespace(enable_progress_bars=True)
        self.data = SimpleNamespace(
            DataContext=SimpleNamespace(get_current=lambda: context), ActorPoolStrategy=lambda *, size: size
        )

    def is_initialized(self) -> bool:
        return bool(self.inits)

    def init(self, **kwargs: Any) -> None:
        self.inits.append(kwargs)
        # as Ray's worker.py: a head node started here where no address is given, else one joined
        self._private = _worker(head=kwargs.get("address") is None)


def _worker(*, head: bool) -> SimpleNamespace:
    """Ray's `_private` as ray.init leaves it: its node started here (head) or joined (connect-only)."""
    node = SimpleNamespace(head=head, is_head=lambda: head)
    return SimpleNamespace(worker=SimpleNamespace(_global_node=node))


class _Words:
    """Stands for the word rows of the actor pool: running it logs and warns as Ray does, then fails."""

    def __init__(self) -> None:
        self.context = SimpleNamespace()

    def schema(self, fetch_if_missing: bool = True) -> None:
        return None

    def map_batches(self, fn: Any, **kwargs: Any) -> _Words:
        return self

    def iter_batches(self, **kwargs: Any) -> Any:
        yield from ()  # Ray's runs the dataset when it is iterated
        logger = logging.getLogger("ray.data")
        logger.info("Starting execution of Dataset ...")
        logger.warning(NO_FREE_CPUS)
        warnings.warn(FEW_INPUTS, UserWarning, stacklevel=1)
        raise CorpusError("stop here")


def _console() -> tuple[io.StringIO, logging.Handler]:
    console = io.StringIO()
    handler = logging.StreamHandler(console)
    logging.getLogger("ray.data").addHandler(handler)
    return console, handler


def test_static_on_ray_starts_ray_as_embed_does_and_keeps_its_lines_off_the_console(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aggregate_on_ray called ray.init itself (Ray's INFO lines on the console, no logging_level) and ran
    the dataset without quiet=True: 26 lines of Ray on stderr, 8 with -q."""
    import bertscope.distributed as distributed
    from bertscope.research.aggregate_ray import aggregate_on_ray

    fake = _Ray()
    monkeypatch.setattr(distributed, "import_ray", lambda: fake)
    monkeypatch.setattr(distributed, "corpus_dataset", lambda *args, **kwargs: _Words())
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    console, handler = _console()
    try:
        with warnings.catch_warnings(record=True) as said, pytest.raises(CorpusError, match="stop here"):
            warnings.simplefilter("always")
            aggregate_on_ray(str(corpus), model=str(tiny_dirs["bert"]), device="cpu", progress=False)
    finally:
        logging.getLogger("ray.data").removeHandler(handler)
    assert [(kw["log_to_driver"], kw["logging_level"]) for kw in fake.inits] == [(False, logging.ERROR)]
    assert console.getvalue() == ""  # Ray's plan and its false warnings stay in the session's logs
    assert not [w for w in said if FEW_INPUTS in str(w.message)]


def test_static_on_ray_refuses_a_cluster_that_is_not_there_at_once(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aggregate_on_ray(address=...) handed an address nothing answers at to Ray: minutes of retries."""
    import bertscope.distributed as distributed
    from bertscope.research.aggregate_ray import aggregate_on_ray

    fake = SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: pytest.fail("Ray was asked"))
    monkeypatch.setattr(distributed, "import_ray", lambda: fake)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    port = free_port()
    with pytest.raises(InvalidInput) as refused:
        aggregate_on_ray(str(corpus), model=str(tiny_dirs["bert"]), address=f"127.0.0.1:{port}")
    assert str(refused.value).startswith(f"no Ray cluster answers at 127.0.0.1:{port} (Connection refused): ")


def test_static_on_ray_refuses_an_empty_corpus_before_a_model_or_ray(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty corpus started Ray and ran ~30 s before 'no texts to embed (all empty)'."""
    import bertscope.core.loaders as loaders
    import bertscope.distributed as distributed
    from bertscope.research.aggregate_ray import aggregate_on_ray

    fake = SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: pytest.fail("Ray was asked"))
    monkeypatch.setattr(distributed, "import_ray", lambda: fake)
    monkeypatch.setattr(loaders, "load_model", lambda *a, **kw: pytest.fail("a model was loaded"))
    corpus = tmp_path / "empty.txt"
    corpus.write_text("\n  \n")
    said = f"{corpus}: every line is empty (no text in it): give a file with one text or more"
    with pytest.raises(CorpusError) as refused:
        aggregate_on_ray(str(corpus), model=str(tiny_dirs["bert"]))
    assert str(refused.value) == said


def test_the_false_no_cpu_warning_is_held_and_other_warnings_shown() -> None:
    """Ray Data's 'does not have any available CPUs ... will hang' reached the console of a quiet job on
    the Ray it started (the readers and writers ask for no CPU: it does not hang), and 'Progress bars
    disabled' that of -q, which turned them off; real warnings still show, and so does the no-CPU one on
    a cluster the job joined (--address), where other work may hold every CPU and the job does hang."""
    from bertscope.distributed import raising_bertscope_errors

    console, handler = _console()
    logger = logging.getLogger("ray.data")
    try:
        with raising_bertscope_errors(SimpleNamespace(context=SimpleNamespace()), quiet=True, own_ray=True):
            logger.warning(NO_FREE_CPUS)
            logger.warning(NO_PROGRESS)  # what -q asked
            logger.warning("a warning is shown")
        with raising_bertscope_errors(SimpleNamespace(context=SimpleNamespace()), quiet=True):
            logger.warning(NO_FREE_CPUS)  # a cluster joined: it may really hang
            logger.warning(NO_PROGRESS)
        with raising_bertscope_errors(SimpleNamespace(context=SimpleNamespace())):
            logger.warning(NO_FREE_CPUS)  # not quiet: as Ray has it
    finally:
        logger.removeHandler(handler)
    assert console.getvalue().splitlines() == ["a warning is shown", NO_FREE_CPUS, NO_FREE_CPUS]


def test_start_ray_says_whether_it_started_the_local_ray() -> None:
    """The no-CPU warning was held for every job, a cluster it joined too: start_ray tells the job
    whether the Ray is its own (a local one it started), where the warning is false."""
    from bertscope.distributed.cluster import start_ray

    assert start_ray(_Ray(), None) is True
    assert start_ray(_Ray(), "auto") is False  # a cluster joined
    running = SimpleNamespace(is_initialized=lambda: True)
    assert start_ray(running, None) is False  # the caller's own Ray, whatever holds its CPUs


def test_start_ray_reads_from_ray_whether_it_joined_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """start_ray said the Ray was the job's own whenever no address was given, where ray.init had joined
    the cluster RAY_ADDRESS names or the last `ray start` on the machine (whose no-CPU warning is true):
    it now asks Ray whether this process started the node, and takes a set RAY_ADDRESS as a join."""
    from bertscope.distributed.cluster import start_ray

    class _Joins(_Ray):  # ray.init finding a `ray start` on this machine: a connect-only node
        def init(self, **kwargs: Any) -> None:
            super().init(**kwargs)
            self._private = _worker(head=False)

    class _Silent(_Ray):  # a Ray that keeps no node here (Ray Client): not known to be the job's own
        def init(self, **kwargs: Any) -> None:
            self.inits.append(kwargs)

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert start_ray(_Joins(), None) is False
    assert start_ray(_Silent(), None) is False
    assert start_ray(_Ray(), None) is True  # a head node started by this process
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    assert start_ray(_Ray(), None) is False  # ray.init joins the cluster RAY_ADDRESS names


def _long(words: int) -> str:
    return " ".join(["river"] * words)


@pytest.mark.parametrize("level", ["sentence", "tokens", "words"])
def test_an_actor_names_a_text_too_long_by_its_file_and_line(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path, level: str
) -> None:
    """--long error on Ray said "the row with id '21' has 302 tokens", the local job "c.txt:21: the text
    has 302 tokens": the read tasks now give each record's FILE:LINE, which the actors name."""
    from bertscope.distributed.reading import _reader
    from bertscope.distributed.units import embed_located, embed_units

    model = tiny_models["bert"]
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a cat\n\nthe dog\n{_long(model.max_tokens * 2)}\n")
    rows_of = make_level(model, CorpusOptions.of(level=level, long="error"))
    plain = pa.concat_tables(_reader(str(corpus), "text", None, "", 10, None, None, located=True)())
    assert plain.column("_where").to_pylist() == [f"{corpus}:1", f"{corpus}:3", f"{corpus}:4"]
    said = rf"^{corpus}:4: the text has \d+ tokens"
    with pytest.raises(InvalidInput, match=said):
        embed_located(rows_of, plain, "text", located=True)
    at = (0, [], tmp_path / "o")
    numbered = pa.concat_tables(_reader(str(corpus), "text", None, "", 10, None, at, located=True)())
    with pytest.raises(InvalidInput, match=said):
        embed_units(rows_of, numbered, "text")
    done = embed_located(rows_of, plain.slice(0, 2), "text", located=True)
    assert "_where" not in done.column_names  # read, and dropped


def test_long_error_on_ray_names_file_and_line(
    cluster: Any, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    """The job's one line names the text as the local job does, FILE:LINE, not the row's id."""
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a cat\n\nthe dog\n{_long(tiny_models['bert'].max_tokens * 2)}\n")
    out = tmp_path / "out"
    ran = run_main("embed", "-i", str(corpus), "-o", str(out), "--engine", "ray", "--workers", "1",
                   "--model", str(tiny_dirs["bert"]), "--long", "error", "-q", *LIGHT)  # fmt: skip
    assert ran.code == 1
    assert ran.stderr.startswith(f"error: {corpus}:4: the text has ") and ran.stderr.count("\n") == 1


class _Interrupted:
    """Stands for the corpus dataset: Ctrl-C lands in its write, after `shards` shards are in place."""

    def __init__(self, out: Path, shards: int) -> None:
        self.context = SimpleNamespace()
        self.out, self.shards = out, shards

    def schema(self, fetch_if_missing: bool = True) -> None:
        return None

    def map_batches(self, fn: Any, **kwargs: Any) -> _Interrupted:
        return self

    def write_datasink(self, *args: Any, **kwargs: Any) -> None:
        for task in range(self.shards):
            (self.out / f"part-000-{task:06d}.parquet").write_text("rows")
        raise KeyboardInterrupt


@pytest.mark.parametrize("shards", [0, 1])
def test_ctrl_c_says_what_was_saved(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: int
) -> None:
    """Ctrl-C before the first shard said 'the texts of every shard written to OUT are saved. Run it again
    with --resume', but nothing was saved and OUT was removed."""
    import bertscope.distributed as distributed

    out = tmp_path / "out"
    fake = SimpleNamespace(**{**vars(_Ray()), "is_initialized": lambda: True})
    monkeypatch.setattr(distributed, "import_ray", lambda: fake)
    monkeypatch.setattr(distributed, "corpus_dataset", lambda *args, **kwargs: _Interrupted(out, shards))
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    with pytest.raises(JobInterrupted) as stopped:
        distributed.run_ray_job(str(corpus), out, model=str(tiny_dirs["bert"]), progress=False)
    if shards:
        assert str(stopped.value).endswith("are saved. Run it again with resume=True (--resume) to continue")
        assert out.is_dir()
    else:
        said = f"interrupted before any shard was written to {out}; nothing was saved: run the command again"
        assert str(stopped.value) == said
        assert not out.exists()


def test_a_ray_job_says_its_cut_texts_and_empty_lines_as_the_local_job(
    cluster: Any, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    """The Ray summary left out the truncation warning and the count of skipped empty texts; -q prints
    nothing (one real Ray run each: the runner's counts and the command line's lines)."""
    limit = tiny_models["bert"].max_tokens
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"a cat\n\nthe dog\n{_long(limit * 2)}\n\n")
    model = str(tiny_dirs["bert"])
    ran = run_main("embed", "-i", str(corpus), "-o", str(tmp_path / "out"), "--engine", "ray", "--workers",
                   "1", "--model", model, "--long", "truncate", *LIGHT)  # fmt: skip
    assert ran.code == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert lines[0] == (
        f"warning: 1 of 3 text(s) ran past the model's {limit} tokens and were truncated; their ends are not "
        "in the vectors; --long window keeps every token"
    )
    assert lines[1].startswith("3 texts embedded, ") and ", 1 truncated, 2 empty skipped in " in lines[1]
    assert len(lines) == 2
    quiet = run_main("embed", "-i", str(corpus), "-o", str(tmp_path / "q"), "--engine", "ray", "--workers",
                     "1", "--model", model, "--long", "truncate", "-q", *LIGHT)  # fmt: skip
    assert (quiet.code, quiet.stderr) == (0, "")


def test_a_half_written_shard_is_not_counted_as_one(tmp_path: Path) -> None:
    """shard_folder_note counted part-*.parquet.tmp (a shard being written) among the shards."""
    from bertscope.distributed.shards import RESUME, shard_folder_note

    out = tmp_path / "out"
    (out / RESUME).mkdir(parents=True)
    (out / "part-000-000001.parquet.tmp").write_text("half")
    assert shard_folder_note(out) == (
        f"{out} holds a Ray job that wrote no shard (no part-*.parquet: it was stopped or failed before its "
        "first; 1 half-written, not read)"
    )
    (out / "part-000-000000.parquet").write_text("rows")
    assert shard_folder_note(out) == (
        f"{out} holds 1 shard(s) of a Ray job that did not finish (no _bertscope.json: it was stopped or "
        "failed; 1 half-written, not read), so some rows are missing"
    )


def test_starting_ray_keeps_the_sigterm_handler_the_command_line_set() -> None:
    """ray.init installs Ray's own SIGTERM handler on the driver (sys.exit(signum)), replacing the one
    the command line's main() sets: a terminated Ray job ended in Ray's crash dump (exit 134), not
    'terminated' (143)."""
    import signal

    from bertscope.distributed.cluster import start_ray

    def rays(signum: int, frame: Any) -> None:  # pragma: no cover - never called
        raise SystemExit(signum)

    def ours(signum: int, frame: Any) -> None:  # pragma: no cover - never called
        raise KeyboardInterrupt

    class _Installs(_Ray):
        def init(self, **kwargs: Any) -> None:
            super().init(**kwargs)
            signal.signal(signal.SIGTERM, rays)

    before = signal.signal(signal.SIGTERM, ours)
    try:
        start_ray(_Installs(), None)
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_ray_job_refuses_stdout_as_its_output_before_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_ray_job(..., "-") passed every check to start Ray and would write shards into a folder '-';
    the local job refuses it ('-: stdout is not an output: ...')."""
    import bertscope.distributed as distributed

    fake = SimpleNamespace(is_initialized=lambda: pytest.fail("Ray was reached"))
    monkeypatch.setattr(distributed, "import_ray", lambda: fake)
    monkeypatch.chdir(tmp_path)
    Path("c.txt").write_text("the bank of the river\n")
    with pytest.raises(CorpusError, match=r"^-: stdout is not an output: a Ray corpus job writes"):
        distributed.run_ray_job("c.txt", "-", model="unused")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_a_users_where_column_is_kept_and_a_plain_read_adds_none(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    """The reserved `_where` column (each record's FILE:LINE) was dropped from a user's own dataset by the
    actors (id,text,_where gave back no _where), and corpus_dataset (public) added it to every read: the
    located read is a job's own, asked for (`located=True`), and a user's columns are all kept."""
    from bertscope.distributed import _Embedder
    from bertscope.distributed.reading import _reader

    corpus = tmp_path / "c.txt"
    corpus.write_text("a cat\nthe dog\n")
    plain = pa.concat_tables(_reader(str(corpus), "text", None, "", 10, None, None)())
    assert plain.column_names == ["id", "text"]
    embedder = _Embedder.__new__(_Embedder)
    embedder.refused, embedder.text_field, embedder.located = None, "text", False
    embedder.level = make_level(tiny_models["bert"], CorpusOptions.of())
    users = pa.table({"id": ["a", "b"], "text": ["a cat", "the dog"], "_where": ["Paris", "Lyon"]})
    done = embedder(users)
    assert done.column("_where").to_pylist() == ["Paris", "Lyon"]
    assert {"id", "text", "embedding"} <= set(done.column_names)


def test_the_read_tasks_count_the_empty_texts_for_the_summary(tmp_path: Path) -> None:
    """The driver read the whole corpus a second time, serially, after the job to count its empty texts
    (e1219fc): the read tasks, which read every record, now count them, each writing its input's count
    once it has read it whole, and the driver sums the counts."""
    from bertscope.distributed.reading import _reader, empty_texts

    counts = tmp_path / "_resume"
    counts.mkdir()
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("a cat\n\nthe dog\n\n")
    second.write_text("\nrain\n")
    for number, source in enumerate((first, second)):
        count = counts / f"empty-{number:05d}.json"
        read = _reader(str(source), "text", None, "", 1, None, None, count=count)()
        next(read)  # one table of one text
        assert not count.exists()  # a task not read to its end has not counted its input
        list(read)
        assert count.exists()
    assert empty_texts(counts) == 3
    at = (0, [], tmp_path / "o")  # a numbered read (a corpus job's) counts alike
    numbered = _reader(str(first), "text", None, "", 10, None, at, count=counts / "n.json")
    assert sum(t.num_rows for t in numbered()) == 2
    assert (counts / "n.json").read_text() == '{"empty": 2}'
