"""Audit 12 of the Ray runner and bench: refusals that name rows and settings, a resumed job with nothing
left, --overwrite that keeps the old folder until the new one is whole, fast mode's max_abs, modes once."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.errors import CorpusError, InvalidInput, JobInterrupted
from bertscope.io.level_table import CorpusOptions, make_level
from bertscope.io.sink_settings import settings_diff

# The runner's checks, not the actors' runtime: ONNX Runtime's light actor (tests/test_distributed.py).
LIGHT: dict[str, Any] = {"backend": "onnxruntime"}
ZERO_WIDTH = "\u200b"


# conftest's `cluster` starts Ray with this many CPUs for this module (one start)
RAY_CPUS = 1


@pytest.mark.parametrize("level", ["sentence", "tokens"])
def test_a_ray_batch_names_a_text_without_pieces_by_its_row_id(
    tiny_models: dict[str, bertscope.Model], level: str
) -> None:
    rows_of = make_level(tiny_models["bert"], CorpusOptions.of(level=level))
    batch = pa.table({"id": ["r3", "r4", "r5"], "text": ["hello", "", ZERO_WIDTH]})
    with pytest.raises(InvalidInput, match=r"^the row with id 'r5' \('\\u200b'\) gives no word pieces"):
        rows_of.embed_arrow(batch, "text")
    if level == "sentence":  # a dataset without ids (sentence rows need none): not "text 0" of a batch
        with pytest.raises(InvalidInput, match=r"^a row \('\\u200b'\) gives no word pieces"):
            rows_of.embed_arrow(batch.drop_columns(["id"]), "text")


def _sentence_settings() -> dict[str, Any]:
    # a sentence job's settings as stored: no level, no precision (the defaults)
    return {"layers": [6], "combine": "mean", "pooling": "mean", "mask_special": False, "normalize": True}


def test_settings_diff_fills_the_defaults_and_names_only_what_differs() -> None:
    tokens = {"level": "tokens", "layers": [6], "combine": "mean", "precision": "float32"}
    assert settings_diff(_sentence_settings(), tokens) == "level: 'sentence' then, 'tokens' now"
    half = {**_sentence_settings(), "precision": "float16"}
    assert settings_diff(_sentence_settings(), half) == "precision: 'float32' then, 'float16' now"
    words = {**tokens, "level": "words", "subword": "mean"}
    assert settings_diff(tokens, words) == "level: 'tokens' then, 'words' now"


def test_the_local_job_names_the_level_it_was_started_with(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.io.parquet_sink import ParquetSink

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"text number {i}\n" for i in range(6)))
    out, model = tmp_path / "o.parquet", tiny_models["bert"]
    original = ParquetSink.write

    def write(self: Any, records: list[Any], rows: Any) -> None:
        if self.files:  # stopped once a part is saved
            raise KeyboardInterrupt
        original(self, records, rows)

    with monkeypatch.context() as patched:
        patched.setattr(ParquetSink, "write", write)
        with pytest.raises((KeyboardInterrupt, JobInterrupted)):
            bertscope.embed_corpus(str(corpus), out, model=model, progress=False, batch_size=2)
    with pytest.raises(CorpusError, match=r"other settings \(level: 'sentence' then, 'tokens' now\);"):
        bertscope.embed_corpus(str(corpus), out, model=model, progress=False, resume=True, level="tokens")


def _corpus(path: Path, n: int, *, bad: bool = False) -> Path:
    lines = [json.dumps({"text": f"sentence number {i} of the corpus"}) for i in range(n)]
    if bad:
        lines[-1] = json.dumps({"text": 7})
    path.write_text("\n".join(lines) + "\n")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _rows(folder: Path) -> int:
    return sum(pq.read_metadata(p).num_rows for p in folder.glob("part-*.parquet"))


def test_resume_with_nothing_left_prints_no_ray_warning(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bertscope.distributed as distributed

    model, out = str(tiny_dirs["bert"]), tmp_path / "out"
    good = _corpus(tmp_path / "good.jsonl", 6)

    def run(source: Path, **kwargs: Any) -> Any:
        return distributed.run_ray_job(
            str(source), out, model=model, workers=1, batch_size=3, progress=False, **LIGHT, **kwargs
        )

    def stopped(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:  # every shard written, stopped before the manifest
        patched.setattr(distributed, "write_manifest", stopped)
        with pytest.raises(KeyboardInterrupt):
            run(good)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        summary = run(good, resume=True)
    assert (summary.resumed_from, summary.embedded) == (6, 0)
    assert not [w for w in said if "concurrent actors" in str(w.message)]


def test_overwrite_keeps_the_old_folder_until_the_new_job_is_whole(
    cluster: Any, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    from bertscope.distributed import run_ray_job

    model, out = str(tiny_dirs["bert"]), tmp_path / "out"

    def run(source: Path, **kwargs: Any) -> Any:
        return run_ray_job(
            str(source), out, model=model, workers=1, batch_size=3, progress=False, **LIGHT, **kwargs
        )

    run(_corpus(tmp_path / "good.jsonl", 6))
    (out / "notes.md").write_text("mine")
    before = _files(out)
    with pytest.raises(CorpusError):
        run(_corpus(tmp_path / "bad.jsonl", 6, bad=True), overwrite=True)
    assert _files(out) == before  # the old job's shards, manifest and the user's file, unchanged
    assert _rows(out) == 6
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []

    summary = run(_corpus(tmp_path / "more.jsonl", 4), overwrite=True)
    assert summary.rows == 4 and all(p.parent == out for p in summary.files)
    assert _rows(out) == 4 and (out / "notes.md").read_text() == "mine"
    assert json.loads((out / "_bertscope.json").read_text())["texts"] == 4
    assert not (out / "_resume").exists() and not any(p.name.startswith(".") for p in tmp_path.iterdir())


def test_files_sharing_a_stem_are_named_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bertscope.distributed.reading import input_sources

    for folder in ("g1", "g2"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.txt").write_text("a text\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError, match=r"g1/a\.txt and g2/a\.txt share the name stem 'a'.*id_field="):
        input_sources("g*/a.txt")


def test_fast_measurements_record_each_modes_max_abs(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from bertscope.backends import fast

    reference = np.ones((4, 3), np.float32)
    drifted = reference.copy()
    drifted[2, 1] += 0.25

    def measure(ways: dict[str, Any], texts: Any, rounds: int) -> dict[str, Any]:
        return {label: (10.0, reference if label == fast._FLOAT32 else drifted) for label in ways}

    monkeypatch.setattr(fast, "measure", measure)
    monkeypatch.setattr(fast, "apply_way", lambda base, options, **kw: base)
    monkeypatch.setattr(fast, "runtime_embedder", lambda model, runner: None)
    base = SimpleNamespace(use_torch=lambda: None, engine=SimpleNamespace(runner=None))
    wanted = {fast._FLOAT32: SimpleNamespace(options={}), "onnx int8": SimpleNamespace(options={})}
    measured = {m.mode: m for m in fast._measure_all(base, wanted, ["a"], lambda d: base, None)}  # type: ignore[arg-type]
    assert measured["onnx int8"].max_abs == pytest.approx(0.25)
    assert measured[fast._FLOAT32].max_abs == 0.0


def test_bench_compares_a_mode_named_twice_once(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.backends import modes
    from console import run_main

    asked: list[list[str]] = []

    def compare(texts: Any, names: list[str], **kwargs: Any) -> list[Any]:
        asked.append(list(names))
        return []

    monkeypatch.setattr(modes, "compare_modes", compare)
    run_main("bench", "-m", str(tiny_dirs["bert"]), "--drift", "--modes", "int8,int8_fused,int8-fused")
    assert asked == [["int8", "int8_fused"]]


def test_compare_modes_reports_a_mode_named_twice_once(tiny_dirs: dict[str, Path]) -> None:
    from bertscope.backends import modes

    reports = modes.compare_modes(
        ["a text", "another"], ["bfloat16", "bfloat16"], model=tiny_dirs["bert"], device="cpu", time_it=False
    )
    assert [r.mode for r in reports] == ["bfloat16"]


@pytest.mark.parametrize(
    ("asked", "said"),
    [({"model": "/nowhere/model"}, "no model folder at /nowhere/model"), ({"layers": "99"}, "layer 99")],
)
def test_an_actor_that_cannot_load_is_the_local_job_s_one_line(
    cluster: Any, tiny_dirs: dict[str, Path], asked: dict[str, Any], said: str
) -> None:
    """Audit 17f: an actor whose model or options failed in its __init__ was Ray's 44-line ActorDiedError
    (retried without limit) inside raising_bertscope_errors; it is the bertscope error, as a batch's is."""
    from bertscope.distributed import embed_dataset, raising_bertscope_errors
    from bertscope.errors import BertscopeError

    rows = cluster.data.from_items([{"id": "1", "text": "a cat"}, {"id": "2", "text": "a dog"}])
    options = {"model": str(tiny_dirs["bert"]), **LIGHT, **asked}
    dataset = embed_dataset(rows, workers=1, **options)
    with pytest.raises(BertscopeError) as refused, raising_bertscope_errors(dataset, quiet=True):
        dataset.take_all()
    assert said in str(refused.value) and "\n" not in str(refused.value)
