"""The Ray Data runner against the local engine, on a local 2-CPU Ray cluster with the tiny BERT."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput, InvalidSpec
from bertscope.io.job import JobSummary, embed_corpus
from console import run_main

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(240)

# The runtime of the jobs whose checks are the runner's (shards, levels, resume, retries), not the
# actors' runtime: ONNX Runtime, its graph exported once by the first driver that loads it and opened
# light (no torch) by each actor. The tiny BERT's exact default is torch, and an actor that imports torch
# and transformers spent ~4 s of a ~5-s job starting on two cores (two at once, ~10 s). The default's
# torch actor is run by test_ray_chunk_job_writes_the_local_chunk_rows (one actor), OpenVINO's by
# test_ray_job_runs_openvino_like_the_local_engine.
LIGHT: dict[str, Any] = {"backend": "onnxruntime"}


def _corpus(path: Path, n: int) -> Path:
    """A JSONL corpus with blank lines and empty texts, as the local reader meets them."""
    lines = []
    for i in range(n):
        lines.append(
            "" if i % 50 == 7 else json.dumps({"text": "" if i % 13 == 5 else f"row {i} of cats {i % 9}"})
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def _by_id(table: pa.Table) -> dict[str, np.ndarray]:
    vectors = np.asarray(table.column("embedding").combine_chunks().flatten()).reshape(table.num_rows, -1)
    return dict(zip(table.column("id").to_pylist(), vectors, strict=True))


def _assert_same(ray_rows: dict[str, np.ndarray], local_rows: dict[str, np.ndarray]) -> None:
    assert sorted(ray_rows) == sorted(local_rows)
    for key, vector in local_rows.items():
        np.testing.assert_allclose(ray_rows[key], vector, atol=1e-5)


def test_ray_job_writes_the_local_sink_schema_and_rows(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bertscope.distributed as distributed
    from bertscope.distributed import run_ray_job

    seen = tmp_path / "actors"
    seen.mkdir()

    class Counted(distributed._Embedder):
        """The embedder, leaving a file named by its process (its actor) once it has embedded a batch."""

        def __call__(self, batch: Any) -> Any:
            (seen / str(os.getpid())).touch()
            return super().__call__(batch)

    monkeypatch.setattr(distributed, "_Embedder", Counted)
    # Both actors up before the first batch, so neither can take every batch while the other starts; two
    # torch actors took over 60 s to start on a 2-core machine under a heavy load: waited on, not timed.
    monkeypatch.setattr(ray.data.DataContext.get_current(), "wait_for_min_actors_s", 300)
    corpus = _corpus(tmp_path / "c.jsonl", 300)
    model = str(tiny_dirs["bert"])
    local_model = bertscope.load(model, device="cpu", **LIGHT)
    embed_corpus(str(corpus), tmp_path / "local.parquet", model=local_model, progress=False, layers="-2")
    summary = run_ray_job(
        str(corpus), tmp_path / "out", model=model, workers=2, batch_size=40, progress=False, layers="-2",
        **LIGHT,
    )  # fmt: skip
    # One input file, read in blocks of a batch: both actors embed (one block would reach one actor).
    assert len(list(seen.iterdir())) == 2
    local = pq.read_table(tmp_path / "local.parquet")
    shards = sorted((tmp_path / "out").glob("part-*.parquet"))
    assert shards and summary.files == shards
    for shard in shards:
        assert pq.read_schema(shard).equals(local.schema, check_metadata=True)
    rows = pa.concat_tables(pq.read_table(s) for s in shards)
    assert rows.num_rows == local.num_rows == summary.embedded
    assert rows.column("id").to_pylist().count("1") == 1
    _assert_same(_by_id(rows), _by_id(local))
    # Written last, it says the job finished: what it read and wrote, and which settings its shards hold.
    manifest = json.loads((tmp_path / "out" / "_bertscope.json").read_text())
    assert manifest["inputs"] == str(corpus) and manifest["shards"] == [s.name for s in shards]
    assert manifest["texts"] == manifest["rows"] == local.num_rows
    assert manifest["settings_digest"] == hashlib.sha256(local.schema.metadata[b"bertscope"]).hexdigest()
    with pytest.raises(CorpusError, match="holds a finished Ray job.*--overwrite"):
        run_ray_job(str(corpus), tmp_path / "out", model=model, progress=False)
    (tmp_path / "out" / "_bertscope.json").unlink()  # the folder a job stopped before its end leaves
    with pytest.raises(CorpusError, match="did not finish.*--overwrite"):
        run_ray_job(str(corpus), tmp_path / "out", model=model, progress=False)
    searched = run_main("similar", "a cat", "--in", str(tmp_path / "out"))
    assert searched.code == 1 and "did not finish" in searched.stderr
    assert f"give a shard (--in {shards[0]})" in searched.stderr
    # verify says what a shard of a job that did not finish is: some of its rows, not all
    checked = run_main("verify", "--store", str(shards[0]), "--rows", "2")
    assert "did not finish" in checked.stderr and "some rows are missing" in checked.stderr


def test_ray_job_runs_openvino_like_the_local_engine(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from bertscope.distributed import run_ray_job

    corpus = _corpus(tmp_path / "c.jsonl", 60)
    model = str(tiny_dirs["bert"])
    local_model = bertscope.load(model, device="cpu", backend="openvino")
    embed_corpus(str(corpus), tmp_path / "local.parquet", model=local_model, progress=False)
    run_ray_job(
        str(corpus),
        tmp_path / "out",
        model=model,
        backend="openvino",
        workers=1,
        batch_size=20,
        progress=False,
    )
    shards = sorted((tmp_path / "out").glob("part-*.parquet"))
    settings = json.loads(pq.read_schema(shards[0]).metadata[b"bertscope"])
    assert (settings["backend"], settings["dtype"], settings["mode"]) == ("openvino", "float32", "exact")
    rows = pa.concat_tables(pq.read_table(s) for s in shards)
    _assert_same(_by_id(rows), _by_id(pq.read_table(tmp_path / "local.parquet")))


@pytest.mark.parametrize("level", ["tokens", "words"])
def test_ray_token_and_word_rows_equal_the_local_job(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path, level: str
) -> None:
    from bertscope.distributed import run_ray_job

    corpus = _corpus(tmp_path / "c.jsonl", 200)
    model = str(tiny_dirs["bert"])
    options: dict[str, Any] = {"layers": "1,-1", "combine": "stack", "precision": "float16", "level": level}
    local_model = bertscope.load(model, device="cpu", **LIGHT)
    local = embed_corpus(
        str(corpus), tmp_path / "local.parquet", model=local_model, progress=False, **options
    )
    summary = run_ray_job(
        str(corpus), tmp_path / "out", model=model, workers=1, batch_size=40, progress=False, **LIGHT,
        **options,
    )  # fmt: skip
    expected = pq.read_table(tmp_path / "local.parquet")
    shards = sorted((tmp_path / "out").glob("part-*.parquet"))
    for shard in shards:
        assert pq.read_schema(shard).equals(expected.schema, check_metadata=True)
    rows = pa.concat_tables(pq.read_table(s) for s in shards)
    assert (summary.embedded, summary.tokens) == (local.embedded, local.tokens)
    # Shards come in any order: compare row by (text id, position).
    order = sorted(
        range(rows.num_rows), key=lambda i: (int(rows["id"][i].as_py()), rows["position"][i].as_py())
    )
    rows = rows.take(order)
    vectors = ["layer_1", "layer_2"]
    assert rows.drop_columns(vectors).equals(expected.drop_columns(vectors))
    for name in vectors:  # other batches, other float noise: equal within float16's step
        got, want = (np.array(t.column(name).to_pylist(), dtype=np.float32) for t in (rows, expected))
        np.testing.assert_allclose(got, want, atol=2e-3, rtol=1e-3)


def _descendants(pid: int) -> list[int]:
    """Process ids under `pid` (Linux /proc), so the test only ever touches its own Ray workers."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _embedder_pids() -> list[int]:
    pids = []
    for pid in _descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"_Embedder" in cmdline:
            pids.append(pid)
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the actor's process in /proc")
def test_a_killed_actor_is_retried_and_nothing_is_lost_or_doubled(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from bertscope.distributed import embed_dataset

    texts = [f"sentence {i} about dogs and {i % 17} cats" for i in range(1, 601)]
    model = bertscope.load(tiny_dirs["bert"], device="cpu", **LIGHT)
    local = dict(zip(map(str, range(1, 601)), model.embed(texts, layers="-2").vectors, strict=True))

    flag = tmp_path / "killed"

    def slowly(batch: dict[str, Any]) -> dict[str, Any]:
        # The second half of the rows waits until an actor has been killed, so the kill always lands in
        # the middle of the run, however fast the machine (the deadline only bounds a broken run).
        if int(batch["id"][0]) > 300:
            deadline = time.monotonic() + 60
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return batch

    items = [{"id": str(i), "text": t} for i, t in enumerate(texts, 1)]
    # One task at a time: a task that asks for no CPU is otherwise started once per block, each in a new
    # worker process, and on two cores those starts cost more than the whole run.
    source = ray.data.from_items(items, override_num_blocks=60).map_batches(
        slowly, batch_size=10, num_cpus=0, compute=ray.data.TaskPoolStrategy(size=1)
    )
    dataset = embed_dataset(
        source, model=str(tiny_dirs["bert"]), workers=2, batch_size=10, max_restarts=3, max_task_retries=3,
        layers="-2", **LIGHT,
    )  # fmt: skip
    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            pids = _embedder_pids()
            if len(pids) == 2:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                flag.touch()
            time.sleep(0.2)

    rows: list[pa.Table] = []
    killer = threading.Thread(target=kill_one, daemon=True)
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
        if not killer.is_alive() and not killed:
            killer.start()
        rows.append(batch)
    killer.join(timeout=60)
    assert killed, "no actor was killed: the run ended before both actors were seen"
    result = pa.concat_tables(rows)
    assert result.num_rows == 600
    _assert_same(_by_id(result), local)


def test_several_files_get_stem_prefixed_ids_and_clashing_stems_are_refused(tmp_path: Path) -> None:
    from bertscope.distributed import input_sources, source_prefix

    (tmp_path / "a").mkdir()
    for name in ("a/x.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text("one\ntwo\n")
    assert input_sources(str(tmp_path / "*.txt")) == [str(tmp_path / "b.txt"), str(tmp_path / "c.txt")]
    assert source_prefix(str(tmp_path / "b.txt"), True, None) == "b:"
    assert source_prefix(str(tmp_path / "b.txt"), False, None) == ""
    assert source_prefix(str(tmp_path / "b.txt"), True, "id") == ""
    (tmp_path / "b.jsonl").write_text('{"text": "three"}\n')
    with pytest.raises(CorpusError, match="stem"):
        input_sources(str(tmp_path / "b.*"))
    with pytest.raises(CorpusError, match="no file"):
        input_sources(str(tmp_path / "*.csv"))


def test_without_ray_the_engine_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from bertscope.cli import app
    from bertscope.distributed import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(InvalidInput, match=r"pip install 'bertscope\[ray\]'"):
        import_ray()
    result = CliRunner().invoke(app, ["embed", "a text", "-o", "out_dir", "--engine", "ray"])
    assert isinstance(result.exception, InvalidInput)  # the CLI's main() turns it into one line
    assert "bertscope[ray]" in str(result.exception)


def test_text_column_is_the_deprecated_name_of_text_field() -> None:
    from bertscope.distributed import embed_dataset

    class Recorder:
        context = SimpleNamespace()

        def schema(self, fetch_if_missing: bool = True) -> None:
            return None  # known only by running it, as a mapped dataset's

        def map_batches(self, fn: Any, **kwargs: Any) -> Recorder:
            self.kwargs = kwargs
            return self

    with pytest.warns(DeprecationWarning, match="use text_field"):
        old = embed_dataset(Recorder(), text_column="body", device="cpu")
    new = embed_dataset(Recorder(), text_field="body", device="cpu")
    assert old.kwargs["fn_constructor_kwargs"]["text_field"] == "body"
    assert new.kwargs["fn_constructor_kwargs"] == old.kwargs["fn_constructor_kwargs"]


def test_ray_chunk_job_writes_the_local_chunk_rows(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from bertscope.distributed import run_ray_job

    corpus = tmp_path / "docs.jsonl"
    docs = [f"The cat {i} likes bread. A dog ate it. The house is {'big ' * (i % 40)}." for i in range(120)]
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    model = str(tiny_dirs["bert"])
    options: dict[str, Any] = {"level": "chunks", "chunks": "sentence", "late": True, "id_field": "id"}
    # The default runtime, the tiny BERT's torch, here and in the actor: the file's one torch actor (LIGHT)
    embed_corpus(str(corpus), tmp_path / "local.parquet", model=model, progress=False, **options)
    summary = run_ray_job(
        str(corpus), tmp_path / "out", model=model, workers=1, batch_size=25, progress=False, **options
    )
    local = pq.read_table(tmp_path / "local.parquet")
    shards = sorted((tmp_path / "out").glob("part-*.parquet"))
    for shard in shards:
        assert pq.read_schema(shard).equals(local.schema, check_metadata=True)
    rows = pa.concat_tables(pq.read_table(s) for s in shards)
    assert summary.embedded == 120 and rows.num_rows == local.num_rows == 3 * 120

    def by_chunk(table: pa.Table) -> dict[str, np.ndarray]:
        keys = [
            f"{d}/{p}/{s}"
            for d, p, s in zip(
                *(table.column(c).to_pylist() for c in ("id", "position", "start")), strict=True
            )
        ]
        vectors = np.asarray(table.column("embedding").combine_chunks().flatten()).reshape(table.num_rows, -1)
        return dict(zip(keys, vectors, strict=True))

    _assert_same(by_chunk(rows), by_chunk(local))


def test_ray_aggregation_equals_the_local_one(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from bertscope.research.aggregate_ray import aggregate_on_ray

    corpus = _corpus(tmp_path / "c.jsonl", 120)
    model = bertscope.load(tiny_dirs["bert"], device="cpu", **LIGHT)  # its runtime is the actors'
    local = model.static_from_corpus(str(corpus), layers="0,-1", min_count=2)
    # One actor (a second one's start was a quarter of the test): the driver sums the words of every
    # batch's table, four tables here, wherever they were embedded.
    remote = aggregate_on_ray(
        str(corpus), model=model, layers="0,-1", min_count=2, batch_size=30, workers=1, progress=False
    )
    assert (
        sorted(remote.words) == sorted(local.words)
        and remote.settings["n_texts"] == local.settings["n_texts"]
    )
    for word in local.words:
        assert remote.counts[remote.index[word]] == local.counts[local.index[word]]
        np.testing.assert_allclose(
            remote.vectors[remote.index[word]], local.vectors[local.index[word]], atol=1e-5
        )
    marks = tmp_path / "marks.txt"
    marks.write_text("a cat\n\u0301\u0301\nanother dog\n")
    with pytest.raises(bertscope.CorpusError, match=r"marks.txt:2: the text gives no word pieces"):
        aggregate_on_ray(str(marks), model=model, min_count=1, progress=False)  # the local job's one line


def test_a_model_with_its_own_int8_calibration_is_not_sent_to_ray_workers(tiny_dirs: dict[str, Path]) -> None:
    from bertscope.distributed import embed_dataset

    texts = ["rain fell on the hills", "the court heard the case", "prices rose again"]
    own = bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=texts)
    assert own.calibration_digest
    # the workers would load the folder and fit int8 on the shipped texts: refused before any work
    with pytest.raises(bertscope.InvalidSpec, match="Ray workers.*not yours"):
        embed_dataset(object(), model=own)  # refused before the dataset is read: no Ray started


def test_a_bad_record_fails_a_ray_job_in_one_line_naming_its_line(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    corpus = tmp_path / "marks.txt"
    corpus.write_text("a cat\n\n\u0301\u0301\nanother dog\n")  # line 3: combining marks, no word piece
    ran = run_main(
        "embed", "-i", str(corpus), "-o", str(tmp_path / "out"), "--engine", "ray", "--workers", "1",
        "--model", str(tiny_dirs["bert"]), "--device", "cpu", "-q",
    )  # fmt: skip
    assert ran.code == 1
    # the local job's one line (the reader finds it, with the model's tokenizer); no Ray traceback or log
    said = [line for line in ran.stderr.splitlines() if "rror" in line or "Traceback" in line]
    assert said == [f"error: {corpus}:3: the text gives no word pieces with this model's tokenizer "
                    "(only combining marks, or characters it drops); give it some text"]  # fmt: skip
    # no shard saved: nothing left behind to refuse the next run as "an unfinished job"
    assert not (tmp_path / "out").exists()


def test_an_error_in_a_map_function_is_raised_as_itself(cluster: Any) -> None:
    from bertscope.distributed import raising_bertscope_errors

    def refuse(batch: dict[str, Any]) -> dict[str, Any]:
        raise InvalidInput("text 1 gives no word pieces")  # as the engine refuses a text in an actor

    # A task, not an actor pool (no model to load): Ray wraps a map function's error the same way for both.
    dataset = ray.data.from_items([{"text": "a"}]).map_batches(refuse, num_cpus=0)
    with pytest.raises(InvalidInput) as raised, raising_bertscope_errors(dataset):
        dataset.materialize()
    # not Ray's RayTaskError(InvalidInput) (or a UserCodeException that lost it), nor its retry advice
    assert type(raised.value) is InvalidInput and str(raised.value) == "text 1 gives no word pieces"
    assert not ray.data.DataContext.get_current().raise_original_map_exception  # the dataset's alone


def test_the_ray_engine_takes_batch_size_and_threads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import bertscope.distributed as distributed

    asked: list[dict[str, Any]] = []

    def recorded(source: Any, output: Any, **kwargs: Any) -> JobSummary:
        asked.append(kwargs)
        return JobSummary(output=Path(output))

    monkeypatch.setattr(distributed, "run_ray_job", recorded)
    common = ["embed", "a text", "-o", str(tmp_path / "out"), "--engine", "ray", "-q"]
    assert run_main(*common, "--batch-size", "7", "--threads", "3").code == 0
    assert run_main(*common, "--resume").code == 0  # refused before Ray jobs could resume
    assert [(a["batch_size"], a["cpus_per_worker"], a["resume"]) for a in asked] == [
        (7, 3, False),
        (None, 1, True),
    ]


class _Pool:
    """Stands for the corpus dataset: records what its actor pool is given, then stops the job."""

    def __init__(self) -> None:
        self.context = SimpleNamespace()
        self.kwargs: dict[str, Any] = {}

    def schema(self, fetch_if_missing: bool = True) -> None:
        return None  # known only by running it

    def map_batches(self, fn: Any, **kwargs: Any) -> _Pool:
        self.kwargs = kwargs
        return self

    def iter_batches(self, **kwargs: Any) -> Any:
        raise CorpusError("stop here")  # what the actors were given is all a test of it asks


def _fake_ray() -> Any:
    """Ray as the driver sees it, initialised, on a cluster with 2 GPUs; an actor pool is its size."""
    context = SimpleNamespace(enable_progress_bars=True)
    data = SimpleNamespace(
        DataContext=SimpleNamespace(get_current=lambda: context), ActorPoolStrategy=lambda *, size: size
    )
    return SimpleNamespace(
        is_initialized=lambda: True, cluster_resources=lambda: {"CPU": 8.0, "GPU": 2.0}, data=data
    )


@pytest.mark.parametrize(
    ("asked", "device", "threads", "gpus"),
    [({}, "auto", 1, 1.0), ({"device": "cpu", "threads": 3}, "cpu", 3, 0.0)],
)
def test_static_on_ray_hands_device_and_threads_to_its_actors(
    tiny_dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    asked: dict[str, Any],
    device: str,
    threads: int,
    gpus: float,
) -> None:
    """static --from-corpus --engine ray handed the actors --batch-size but not --device or --threads:
    they ran on the CPU with one thread whatever was asked. No Ray cluster: the pool's arguments are read."""
    import bertscope.distributed as distributed
    from bertscope.cli.static_kinds import aggregate_to_file

    pool, ray_ = _Pool(), _fake_ray()
    monkeypatch.setattr(distributed, "import_ray", lambda: ray_)
    monkeypatch.setattr(distributed, "corpus_dataset", lambda *args, **kwargs: pool)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    model = bertscope.load(tiny_dirs["bert"], device="cpu")  # the driver's: the command line loads it
    with pytest.raises(CorpusError, match="stop here"):
        aggregate_to_file(
            model, str(corpus), tmp_path / "v.npy", layers=None, fmt=None, min_count=1,
            subword="mean", long="window", resume=False, overwrite=False, batch_size=7, quiet=True,
            as_json=False, engine="ray", workers=3, **asked,
        )  # fmt: skip
    actor = pool.kwargs["fn_constructor_kwargs"]
    assert (actor["device"], actor["threads"]) == (device, threads)  # what each actor loads the model with
    # what each actor asks Ray for: its CPUs (its threads) and, on a GPU device or auto on GPUs, a GPU
    assert (pool.kwargs["num_cpus"], pool.kwargs["num_gpus"]) == (threads, gpus)
    assert (pool.kwargs["batch_size"], pool.kwargs["compute"]) == (7, 3)


def test_static_from_corpus_on_ray_takes_device_and_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line handed aggregate_to_file neither --device nor --threads."""
    from bertscope.research import aggregate_ray

    asked: dict[str, Any] = {}

    def record(corpus: str, **options: Any) -> None:
        asked.update(options)
        raise CorpusError("stop here")  # no Ray needed to see what it was given

    monkeypatch.setattr(aggregate_ray, "aggregate_on_ray", record)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    done = run_main(
        "static", "--from-corpus", str(corpus), "-o", str(tmp_path / "v.npy"), "--engine", "ray",
        "--device", "cpu", "--threads", "3", "--backend", "torch",
    )  # fmt: skip
    assert done.code == 1 and "stop here" in done.stderr
    assert (asked["device"], asked["cpus_per_worker"]) == ("cpu", 3)


@pytest.mark.parametrize(
    ("load_options", "runtime", "dtype"),
    [
        ({"dtype": "bfloat16"}, {"backend": "torch", "quantize": None}, "bfloat16"),
        (
            {"backend": "onnxruntime", "quantize": "int8"},
            {"backend": "onnxruntime", "quantize": "int8"},
            "float32",
        ),
    ],
)
def test_static_on_ray_actors_run_what_the_driver_runs(
    tiny_dirs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    load_options: dict[str, Any],
    runtime: dict[str, Any],
    dtype: str,
) -> None:
    """The actors were handed the model's name alone and loaded float32 torch, while the settings written
    beside the vectors (the driver's) said bfloat16 or int8: a silently mislabelled file."""
    import bertscope.distributed as distributed
    from bertscope.research.aggregate_ray import aggregate_on_ray

    pool, ray_ = _Pool(), _fake_ray()
    monkeypatch.setattr(distributed, "import_ray", lambda: ray_)
    monkeypatch.setattr(distributed, "corpus_dataset", lambda *args, **kwargs: pool)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    driver = bertscope.load(tiny_dirs["bert"], device="cpu", **load_options)
    with pytest.raises(CorpusError, match="stop here"):
        aggregate_on_ray(str(corpus), model=driver, device="cpu", progress=False)
    actor = pool.kwargs["fn_constructor_kwargs"]
    assert (actor["model"], actor["dtype"], actor["runtime"]) == (str(tiny_dirs["bert"]), dtype, runtime)


def test_static_on_ray_loads_its_driver_on_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--device cuda is the actors': the driver (options, vocabulary) loaded on it too, so a head node
    without a GPU could not drive GPU actors; `embed --engine ray` loads its driver on the CPU."""
    import bertscope.cli.basics as basics
    from bertscope.research import aggregate_ray

    loaded: list[str] = []
    real_load = basics.load_model

    def load(*args: Any, **kwargs: Any) -> Any:
        loaded.append(kwargs["device"])
        return real_load(*args, **{**kwargs, "device": "cpu"})

    asked: dict[str, Any] = {}

    def record(corpus: str, **options: Any) -> None:
        asked.update(options)
        raise CorpusError("stop here")

    monkeypatch.setattr(basics, "load_model", load)
    monkeypatch.setattr(aggregate_ray, "aggregate_on_ray", record)
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank of the river\n")
    done = run_main(
        "static", "--from-corpus", str(corpus), "-o", str(tmp_path / "v.npy"), "--engine", "ray",
        "--device", "cuda", "--backend", "torch",
    )  # fmt: skip
    assert done.code == 1 and "stop here" in done.stderr
    assert (loaded, asked["device"]) == (["cpu"], "cuda")


class _Stopped(Exception):
    """Stands for a kill after the last shard was written, before the job's manifest."""


def _stopped_job(monkeypatch: pytest.MonkeyPatch, corpus: Path, out: Path, job: dict[str, Any]) -> list[Path]:
    """The folder a job killed just before its end leaves: every shard and its record, no manifest."""
    import bertscope.distributed as distributed
    from bertscope.distributed import run_ray_job

    def stop(*args: Any, **kwargs: Any) -> None:
        raise _Stopped

    with monkeypatch.context() as patched:
        patched.setattr(distributed, "write_manifest", stop)
        with pytest.raises(_Stopped):
            run_ray_job(str(corpus), out, **job)
    return sorted(out.glob("part-*.parquet"))


def _counted_embedder(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    """Actors that leave, per call, a file holding how many texts they were given to embed."""
    import bertscope.distributed as distributed

    folder.mkdir()

    class Counted(distributed._Embedder):
        def __call__(self, batch: Any) -> Any:
            (folder / f"{os.getpid()}-{time.monotonic_ns()}").write_text(str(batch.num_rows))
            return super().__call__(batch)

    monkeypatch.setattr(distributed, "_Embedder", Counted)
    return folder


def _sorted_rows(folder: Path, keys: tuple[str, ...] = ("id",)) -> pa.Table:
    """Every shard's rows, each shard's vectors checked against its checksums, in key order."""
    from bertscope.io.parquet_checked import checked_tables

    tables = [
        t for shard in sorted(folder.glob("part-*.parquet")) for t in checked_tables(shard, None, 1 << 20)
    ]
    rows = pa.concat_tables(tables)
    rows = rows.replace_schema_metadata({b"bertscope": rows.schema.metadata[b"bertscope"]})  # not the sums
    order = sorted(range(rows.num_rows), key=lambda i: tuple(int(rows[k][i].as_py()) for k in keys))
    return rows.take(order)


def _assert_equal_rows(got: pa.Table, want: pa.Table) -> None:
    """Equal rows: every column but the vectors exactly, the vectors within 1e-6."""
    vectors = [f.name for f in want.schema if pa.types.is_fixed_size_list(f.type)]
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.drop_columns(vectors).equals(want.drop_columns(vectors))
    for name in vectors:
        np.testing.assert_allclose(
            np.array(got.column(name).to_pylist(), np.float32),
            np.array(want.column(name).to_pylist(), np.float32),
            atol=1e-6,
        )


def test_an_interrupted_ray_job_resumes_to_the_uninterrupted_output(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unfinished Ray job was refused (--overwrite started it again); --resume continues it as the
    local job's does: the texts saved are not embedded again, and the output is the uninterrupted one."""
    from bertscope.distributed import run_ray_job, shards

    monkeypatch.setattr(shards, "_SHARD_BYTES", 1)  # a shard per batch, so a stop leaves some of them
    corpus = _corpus(tmp_path / "c.jsonl", 300)
    job: dict[str, Any] = {
        "model": str(tiny_dirs["bert"]), "workers": 1, "batch_size": 40, "progress": False, "layers": "-2",
        **LIGHT,
    }  # fmt: skip
    out = tmp_path / "out"
    written = _stopped_job(monkeypatch, corpus, out, job)
    assert len(written) >= 4
    # Stopped at its manifest, after its last shard: its shards are the uninterrupted job's (one Ray job
    # less than running it to compare), copied before the cut below; its manifest is their totals.
    (tmp_path / "full").mkdir()
    for shard in written:
        shutil.copy(shard, tmp_path / "full" / shard.name)
    whole = _sorted_rows(tmp_path / "full")
    full = SimpleNamespace(embedded=whole.num_rows)  # a row per text
    totals = {
        "texts": whole.num_rows, "rows": whole.num_rows, "tokens": sum(whole.column("n_tokens").to_pylist()),
        "settings_digest": hashlib.sha256(pq.read_schema(written[0]).metadata[b"bertscope"]).hexdigest(),
    }  # fmt: skip
    # A kill leaves some shards unwritten: one whose record of units was written (a kill before its
    # rename), one without, and a half-written one. The first text stays saved (see below).
    lost = [s for s in written if "1" not in pq.read_table(s, columns=["id"]).column("id").to_pylist()][:2]
    lost[0].unlink()
    lost[1].unlink()
    (out / "_resume" / f"{lost[1].stem}.json").unlink()
    (out / "part-000-999999.parquet.tmp").write_bytes(b"PAR1")
    saved = sum(pq.read_metadata(s).num_rows for s in written if s not in lost)
    with pytest.raises(CorpusError, match=r"did not finish.*pass resume=True \(--resume\) to continue it or"):
        run_ray_job(str(corpus), out, **job)
    with pytest.raises(CorpusError, match=r"started with other settings \(layers: \[1\] then, \[2\] now\)"):
        run_ray_job(str(corpus), out, resume=True, **{**job, "layers": "-1"})  # before any Ray work
    # both: overwrite emptied the folder and resumed nothing; refused before the folder is touched
    with pytest.raises(InvalidSpec, match=r"^resume=True \(--resume\) goes on from the saved work"):
        run_ray_job(str(corpus), out, resume=True, overwrite=True, **job)
    changed = tmp_path / "changed" / "c.jsonl"
    changed.parent.mkdir()
    changed.write_text(corpus.read_text().replace("row 0 of cats 0", "row 0 of dogs 0", 1))
    with pytest.raises(
        CorpusError, match=r"c.jsonl:1-\d+: these records are not the ones the unfinished job"
    ):
        run_ray_job(str(changed), out, resume=True, **job)
    calls = _counted_embedder(monkeypatch, tmp_path / "calls")
    summary = run_ray_job(str(corpus), out, resume=True, **job)
    embedded = sum(int(f.read_text()) for f in calls.iterdir())
    assert (summary.resumed_from, summary.embedded) == (saved, full.embedded - saved)
    assert embedded == full.embedded - saved  # the saved texts were not embedded again
    assert "already done" in summary.line()
    _assert_equal_rows(_sorted_rows(out), whole)
    manifest = json.loads((out / "_bertscope.json").read_text())
    assert {key: manifest[key] for key in totals} == totals
    assert not (out / "_resume").exists() and not list(out.glob("*.tmp"))
    with pytest.raises(CorpusError, match="already complete: nothing to resume"):
        run_ray_job(str(corpus), out, resume=True, **job)


def test_a_resumed_token_job_embeds_again_a_unit_cut_across_shards(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit's rows cut across two write tasks, one of them lost: the saved part is taken out of its
    shard and the unit embedded again whole (token rows, several rows per text)."""
    from bertscope.distributed import run_ray_job, shards
    from bertscope.distributed.units import Unit
    from bertscope.io.parquet_checked import write_checked

    monkeypatch.setattr(shards, "_SHARD_BYTES", 1)
    corpus = _corpus(tmp_path / "c.jsonl", 120)
    job: dict[str, Any] = {
        "model": str(tiny_dirs["bert"]), "workers": 1, "batch_size": 30, "progress": False,
        "level": "tokens", "layers": "1,-1", "combine": "stack", **LIGHT,
    }  # fmt: skip
    out = tmp_path / "out"
    written = _stopped_job(monkeypatch, corpus, out, job)
    # The job stops at its manifest, written after its last shard: its shards are a finished job's (one
    # Ray job less than running it again to compare), copied before the cut below.
    (tmp_path / "full").mkdir()
    for shard in written:
        shutil.copy(shard, tmp_path / "full" / shard.name)
    whole = _sorted_rows(tmp_path / "full", ("id", "position"))
    full = SimpleNamespace(embedded=len(set(whole.column("id").to_pylist())))  # texts: each has rows
    records = [out / "_resume" / f"{shard.stem}.json" for shard in written]
    assert len(written) >= 2
    # The first shard keeps half the rows of its first unit (the rest was in a shard never written).
    key, rows = json.loads(records[0].read_text())["units"][0]
    schema = pq.read_schema(written[0])
    write_checked(written[0], [pq.read_table(written[0]).slice(0, rows // 2)], schema)
    records[0].write_text(json.dumps({"units": [[key, rows // 2]]}))
    saved = sum(Unit.parse(k).records for r in records[1:] for k, _ in json.loads(r.read_text())["units"])
    summary = run_ray_job(str(corpus), out, resume=True, **job)
    assert (summary.resumed_from, summary.embedded) == (saved, full.embedded - saved)
    _assert_equal_rows(_sorted_rows(out, ("id", "position")), whole)


def test_ctrl_c_stops_a_ray_job_with_the_local_jobs_interruption(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the driver ends as the local job's does: JobInterrupted (exit 130); before its first
    shard it says nothing was saved. No Ray cluster: the dataset's write is where the signal lands."""
    import bertscope.distributed as distributed
    from bertscope.errors import JobInterrupted

    class Interrupted(_Pool):
        def write_datasink(self, *args: Any, **kwargs: Any) -> None:
            raise KeyboardInterrupt

    monkeypatch.setattr(distributed, "import_ray", _fake_ray)
    monkeypatch.setattr(distributed, "corpus_dataset", lambda *args, **kwargs: Interrupted())
    corpus = _corpus(tmp_path / "c.jsonl", 10)
    with pytest.raises(JobInterrupted, match=r"before any shard was written to .*; nothing was saved"):
        distributed.run_ray_job(str(corpus), tmp_path / "out", model=str(tiny_dirs["bert"]), progress=False)
    # stopped before its first shard: nothing saved, nothing left (as the local job) to refuse the next run
    assert not (tmp_path / "out").exists()


class _DatasetOfALaterRay:
    """A Dataset whose map_batches names its keywords, as Ray 2.64's does (no **ray_remote_args)."""

    def schema(self, fetch_if_missing: bool = True) -> None:
        return None

    def map_batches(self, fn: Any, *, batch_size: int | None = None, num_cpus: float | None = None) -> None:
        raise AssertionError("called with keywords it does not take")


def test_retry_limits_a_later_ray_no_longer_takes_are_refused_in_one_line(tiny_dirs: dict[str, Path]) -> None:
    """Ray 2.60-2.63 warn on max_restarts/max_task_retries in map_batches and 2.64 drops them: a TypeError
    deep in Ray would be the answer there; the refusal names them and why leaving them out loses nothing."""
    from bertscope.distributed import embed_dataset
    from bertscope.errors import InvalidSpec

    for limits in ({"max_restarts": 0}, {"max_restarts": 3, "max_task_retries": 3}):
        with pytest.raises(InvalidSpec) as refused:
            embed_dataset(_DatasetOfALaterRay(), model=str(tiny_dirs["bert"]), device="cpu", **limits)
        said = str(refused.value)
        assert f"takes no {' or '.join(limits)} in map_batches" in said and "\n" not in said
        assert "leave them out: Ray restarts a failed actor" in said


def test_an_actor_given_more_ray_cpus_than_its_node_has_loads_with_the_nodes_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray may hand an actor more logical CPUs than its machine has, and load() refuses more threads than
    CPUs: the actor loads with at most its machine's."""
    import bertscope.distributed as distributed

    asked: dict[str, Any] = {}

    def record(model: Any, **options: Any) -> None:
        asked.update(options)
        raise CorpusError("stop here")

    monkeypatch.setattr(distributed, "load_model", record)
    monkeypatch.setattr(distributed, "usable_cpus", lambda: 2)
    embedder = distributed._Embedder(None, "cpu", "float32", 8, "text", {}, None)  # type: ignore[arg-type]
    assert asked["threads"] == 2
    with pytest.raises(CorpusError, match="stop here"):  # a load's refusal comes with the first batch
        embedder(None)
