"""The Ray runner's refusals and leftovers (audit 3): values that are not text and a missing field in
`embed_dataset`, an empty corpus, a cluster that is not there, the folder a failed job leaves, Ray's
log lines, and what `similar` says of a Ray folder without a shard."""

from __future__ import annotations

import io
import json
import logging
import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

import bertscope
from bertscope.cli.explore import free_port
from bertscope.errors import InvalidInput
from bertscope.io.levels import arrow_texts
from console import run_main

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize(
    ("value", "kind"),
    [(5, "int64"), (1.5, "double"), (True, "bool"), (b"bytes", "binary"), (["a", "b"], "list<item: string>")],
)
def test_embed_dataset_refuses_a_text_field_of_other_values_at_once(
    cluster: Any, value: Any, kind: str
) -> None:
    from bertscope.distributed import embed_dataset

    dataset = ray.data.from_items([{"text": value}, {"text": value}])
    # Refused on the driver, from the schema Ray knows: no actor starts, nothing is silently dropped.
    with pytest.raises(InvalidInput) as raised:
        embed_dataset(dataset, text_field="text", workers=1)
    assert str(raised.value) == (
        f"field 'text' is a {kind} column, not text: give a column of strings (cast it), or name the text "
        "column with text_field="
    )


def test_embed_dataset_names_a_missing_field_and_the_columns_there_are(cluster: Any) -> None:
    from bertscope.distributed import embed_dataset

    dataset = ray.data.from_items([{"body": "x", "n": 1}])
    with pytest.raises(InvalidInput) as raised:
        embed_dataset(dataset, text_field="text")
    assert str(raised.value) == (
        "the dataset has no field 'text' (its columns: 'body', 'n'): name the text column with text_field="
    )
    # token rows name their text by id: a dataset without one is refused as plainly
    with pytest.raises(InvalidInput, match=r"no field 'id' \(its columns: 'body', 'n'\)"):
        embed_dataset(dataset, text_field="body", level="tokens")


def test_an_actor_refuses_a_value_that_is_not_text_in_one_line(
    cluster: Any, tiny_dirs: dict[str, Path]
) -> None:
    from bertscope.distributed import embed_dataset, raising_bertscope_errors

    # A map's schema is known only by running it: the actors check each batch.
    dataset = ray.data.range(3).map(lambda r: {"id": str(r["id"]), "text": "a cat" if r["id"] else 7})
    # Loaded here, the model is exported once in this process (torch is loaded already) and the actor opens
    # the export light; handed its name alone, the actor of a fresh cache imported torch to export it.
    model = bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    embedded = embed_dataset(dataset, text_field="text", workers=1, model=model)
    with pytest.raises(InvalidInput) as raised, raising_bertscope_errors(embedded):
        embedded.take_all()
    assert str(raised.value) == (
        "field 'text' of the row with id '0' is an int, not a string: give text only (cast the column to "
        "string, or filter such rows out first)"
    )


def test_arrow_texts_keeps_nulls_and_refuses_other_values() -> None:
    assert arrow_texts(pa.table({"text": ["a", None, ""]}), "text") == ["a", None, ""]
    mixed = pa.table({"text": pa.array([["a"], None], pa.list_(pa.string()))})
    with pytest.raises(InvalidInput, match=r"^field 'text' of a row \(\['a'\]\) is a list, not a string"):
        arrow_texts(mixed, "text")
    with pytest.raises(InvalidInput, match=r"^the dataset has no field 'body' \(its columns: 'text'\)"):
        arrow_texts(mixed, "body")


def test_an_empty_corpus_on_ray_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.jsonl").write_text('{"text": ""}\n\n{"text": "  "}\n')
    empty = "the corpus is empty (no text in it): give a file with one text or more"
    fields = "every record's 'text' field is empty (no text in it): give a file with one text or more"
    for name, what in (("empty.txt", empty), ("blank.jsonl", fields)):
        corpus, out = tmp_path / name, tmp_path / f"{name}.out"
        ran = run_main("embed", "-i", str(corpus), "-o", str(out), "--engine", "ray", "-q")
        assert ran.code == 1
        assert ran.stderr.splitlines() == [f"error: {corpus}: {what}; nothing was written to {out}"]
        assert not out.exists()


def test_a_cluster_that_is_not_there_is_one_line_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.distributed.cluster import CONNECT_SECONDS, start_ray

    inits: list[Any] = []
    fake = SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: inits.append(kw))
    port = free_port()
    with pytest.raises(InvalidInput) as raised:
        start_ray(fake, f"127.0.0.1:{port}")
    assert str(raised.value).startswith(f"no Ray cluster answers at 127.0.0.1:{port} (Connection refused): ")
    assert "ray start --head" in str(raised.value) and "--address HOST:PORT" in str(raised.value)
    assert inits == []  # Ray never asked to wait on it

    def silent(address: Any, timeout: float) -> Any:
        assert timeout == CONNECT_SECONDS  # the wait is bounded
        raise TimeoutError

    monkeypatch.setattr(socket, "create_connection", silent)
    said = rf"^no Ray cluster answers at ray://10\.0\.0\.9:10001 \(no answer in {CONNECT_SECONDS:g} s\)"
    with pytest.raises(InvalidInput, match=said):
        start_ray(fake, "ray://10.0.0.9:10001")


def test_joining_tries_once_and_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.distributed.cluster import start_ray

    seen: list[str | None] = []

    def refused(**kw: Any) -> None:
        seen.append(os.environ.get("RAY_gcs_server_port_wait_time_s"))
        assert kw["log_to_driver"] is False and kw["logging_level"] == logging.ERROR
        raise ConnectionError("Could not find any running Ray instance.\nmore of Ray's advice")

    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    with pytest.raises(InvalidInput) as raised:
        start_ray(SimpleNamespace(is_initialized=lambda: False, init=refused), "auto")
    assert str(raised.value).startswith(
        "no Ray cluster answers on this machine (address auto) (Could not find any running Ray instance): "
    )
    assert seen == ["1"] and "RAY_gcs_server_port_wait_time_s" not in os.environ  # one try, then as it was


def test_a_job_that_never_reached_ray_leaves_no_folder(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bertscope.distributed as distributed

    # Not Ray's own is_initialized: this module's cluster may be running, and joining is what is tested.
    fake = SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: pytest.fail("Ray was asked"))
    monkeypatch.setattr(distributed, "import_ray", lambda: fake)
    corpus = tmp_path / "c.txt"
    corpus.write_text("a cat\nthe dog\n")
    out = tmp_path / "out"
    with pytest.raises(InvalidInput, match="no Ray cluster answers"):
        distributed.run_ray_job(
            str(corpus),
            out,
            model=str(tiny_dirs["bert"]),
            address=f"127.0.0.1:{free_port()}",
            progress=False,
        )
    assert not out.exists()  # the next run is not refused as an "unfinished job"


def test_a_failed_job_takes_back_only_what_it_wrote(tmp_path: Path) -> None:
    from bertscope.distributed.shards import RESUME, abandoned_if_unwritten

    def fail(out: Path, *, made: bool, shard: bool = False) -> None:
        with pytest.raises(RuntimeError), abandoned_if_unwritten(out, made=made):
            (out / RESUME).mkdir(parents=True, exist_ok=True)
            (out / "part-000-000000.parquet.tmp").write_text("half")
            if shard:
                (out / "part-000-000001.parquet").write_text("rows")
            raise RuntimeError("stopped")

    fail(tmp_path / "new", made=True)
    assert not (tmp_path / "new").exists()
    mine = tmp_path / "mine"
    (mine / "notes.txt").parent.mkdir()
    (mine / "notes.txt").write_text("the user's")
    fail(mine, made=True)  # a file not the job's: the folder stays, with it alone
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    fail(tmp_path / "kept", made=True, shard=True)  # a shard saved: all kept for --resume
    assert (tmp_path / "kept" / RESUME).is_dir() and (tmp_path / "kept" / "part-000-000001.parquet").exists()


def test_ray_data_info_lines_stay_off_the_console_in_a_job() -> None:
    from bertscope.distributed import raising_bertscope_errors

    console = io.StringIO()
    handler = logging.StreamHandler(console)
    logger = logging.getLogger("ray.data")
    logger.addHandler(handler)
    try:
        with raising_bertscope_errors(SimpleNamespace(context=SimpleNamespace()), quiet=True):
            logger.info("Starting execution of Dataset ...")
            logger.warning("a warning is shown")
        logger.info("outside a job, as Ray has it")
    finally:
        logger.removeHandler(handler)
    assert console.getvalue().splitlines() == ["a warning is shown", "outside a job, as Ray has it"]


def test_similar_names_what_a_ray_folder_without_a_shard_lacks(tmp_path: Path) -> None:
    finished, stopped = tmp_path / "finished", tmp_path / "stopped"
    finished.mkdir()
    (finished / "_bertscope.json").write_text(json.dumps({"texts": 0, "rows": 0, "shards": []}))
    (stopped / "_resume").mkdir(parents=True)
    done = "a finished Ray job that wrote no rows (no part-*.parquet shard)"
    for folder, what in (
        (finished, done),
        (stopped, "a Ray job that wrote no shard (no part-*.parquet: it was"),
    ):
        ran = run_main("similar", "a cat", "--store", str(folder))
        assert ran.code == 1
        assert ran.stderr.startswith(f"error: --store {folder}: {folder} holds {what}")
        assert "nothing to read" in ran.stderr and "a folder, not a file" not in ran.stderr
