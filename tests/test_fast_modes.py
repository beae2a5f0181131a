"""Every fast mode against float32 torch (onnxruntime float32, int8, bfloat16), bundled and tiny models.

Also the export cache (reused, keyed by family, weights and calibration), the settings that corpus outputs
record and that search reloads the model with, the errors, and the CLI flags.

Bounds come from measurements on this sample (2-core x86 CPU, onnxruntime 1.31, torch 2.13):
  bundled onnxruntime float32: sentence vectors 3e-7, all-layer concat 1.4e-6, hidden states 6.7e-6
  (values up to 10.5; the worst is the 256-token truncated paragraph), layers=2 1.2e-7.
  bundled int8: min cosine 0.9981 on the news sample, 0.9984 on the extra texts, mean 0.9985.
  bundled bfloat16: min 0.99994, mean 0.99996 on 12 texts.
  tiny int8 (min cosine): bert 0.99995, distilbert 0.9998, albert 0.9955, electra 0.9887, deberta-v2 0.9999.
  tiny bfloat16 (min cosine): bert 0.99999, deberta-v2 0.99998.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

import bertscope
from bertscope.backends.onnx import calibration_texts, content_digest, resolve_backend
from bertscope.cli import app
from bertscope.errors import BackendUnavailable
from tiny_models import FAMILIES

REPO = Path(__file__).resolve().parents[1]
NEWS = [line for line in (REPO / "examples" / "news.txt").read_text().splitlines() if line.strip()]
# Unlike the calibration sentences (which are the news lines): questions, a paragraph far over the
# 256-token limit, code, numbers and non-ASCII text.
LONG = " ".join(
    ["The committee met for hours to discuss the budget, the roads, the schools and the parks."] * 30
)
EXTRA = [
    "What time does the last train to the airport leave on Sundays?",
    "Is it safe to swim at the beach after a storm?",
    "How do I reset my password?",
    LONG,
    "def embed(texts): return [hash(t) % 1024 for t in texts]  # 42 items, v3.14.1",
    "Order #12345 shipped on 2024-03-07: 3 x $19.99, total $59.97 (incl. 7.5% tax).",
    "Bonjour, ça va ? Ünïcödé and an emoji 🙂 mixed in.",
]
SAMPLE = NEWS + EXTRA
TINY_SAMPLE = NEWS[:20] + EXTRA
# int8 minimum cosine per tiny family: measured minus a margin (see the module docstring).
TINY_INT8_MIN = {
    "bert": 0.999,
    "distilbert": 0.999,
    "albert": 0.99,
    "electra": 0.98,
    "deberta-v2": 0.999,
    "modernbert": 0.999,
}

runner = CliRunner()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (n, d) matrices."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def max_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """BERTSCOPE_CACHE at a fresh folder for this module, so every export here is made here."""
    root = tmp_path_factory.mktemp("bertscope-cache")
    before = os.environ.get("BERTSCOPE_CACHE")
    os.environ["BERTSCOPE_CACHE"] = str(root)
    yield root / "onnx"
    if before is None:
        os.environ.pop("BERTSCOPE_CACHE", None)
    else:
        os.environ["BERTSCOPE_CACHE"] = before


@pytest.fixture(scope="module")
def torch32() -> bertscope.Model:
    """The bundled model on float32 torch (the session's `bundled` runs whatever the exact default picks)."""
    model = bertscope.load(device="cpu", backend="torch")
    info = model.info()
    assert (info.backend, info.quantize, info.dtype) == ("torch", None, "float32")
    return model


@pytest.fixture(scope="module")
def ort32(cache: Path) -> bertscope.Model:
    return bertscope.load(device="cpu", backend="onnxruntime")


@pytest.fixture(scope="module")
def int8(cache: Path) -> bertscope.Model:
    return bertscope.load(device="cpu", quantize="int8")


@pytest.fixture(scope="module")
def reference(torch32: bertscope.Model) -> np.ndarray:
    """float32 torch sentence vectors of SAMPLE."""
    return torch32.embed(SAMPLE).vectors


# The bundled model in each mode ----------------------------------------------------------------------


def test_onnxruntime_float32_equals_torch(
    torch32: bertscope.Model, ort32: bertscope.Model, reference: np.ndarray
) -> None:
    info = ort32.info()
    assert (info.backend, info.quantize, info.dtype) == ("onnxruntime", None, "float32")
    assert max_diff(ort32.embed(SAMPLE).vectors, reference) <= 1e-5
    options: dict[str, Any] = dict(layers="all", combine="concat", pooling="mean")
    concat = ort32.embed(SAMPLE, **options).vectors
    assert concat.shape == (len(SAMPLE), 7 * 384)
    assert max_diff(concat, torch32.embed(SAMPLE, **options).vectors) <= 1e-5


@pytest.mark.parametrize("text", [EXTRA[0], LONG, NEWS[7]], ids=["question", "truncated", "news"])
def test_onnxruntime_hidden_states_equal_torch(
    torch32: bertscope.Model, ort32: bertscope.Model, text: str
) -> None:
    expected = torch32.hidden_states(text)
    got = ort32.hidden_states(text)
    assert got.shape == expected.shape and expected.shape[0] == 7
    # Hidden states reach ~10.5 here; the measured worst difference is 6.7e-6 (on the long paragraph).
    assert max_diff(got, expected) <= 1e-5


def test_onnxruntime_early_stop_runs_only_the_layers_asked(
    torch32: bertscope.Model, ort32: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[str]] = []
    graphs: list[list[str]] = []  # the outputs of each session run: a graph cut at the deepest layer asked
    runner = ort32.engine.runner
    session_for = runner.session_for

    class Spy:
        def __init__(self, session: Any) -> None:
            self.session = session

        def run(self, names: list[str], feed: dict[str, np.ndarray]) -> Any:
            asked.append(list(names))
            graphs.append([o.name for o in self.session.get_outputs()])
            return self.session.run(names, feed)

    monkeypatch.setattr(runner, "session_for", lambda deepest: Spy(session_for(deepest)))
    # a few news lines and every EXTRA (the long one too): the cut is the same at any count of texts
    texts = [*NEWS[:4], *EXTRA]
    got = ort32.embed(texts, layers=2).vectors
    assert max_diff(got, torch32.embed(texts, layers=2).vectors) <= 1e-5
    # the graph is cut at layer 2, and only the state read is fetched from it
    assert asked and all(names == ["hidden_2"] for names in asked)
    assert all(names == ["hidden_0", "hidden_1", "hidden_2"] for names in graphs)
    assert 2 in runner.cut_depths
    asked.clear()
    got = ort32.embed(texts, layers="0,2", combine="mean").vectors
    assert max_diff(got, torch32.embed(texts, layers="0,2", combine="mean").vectors) <= 1e-5
    assert asked and all(names == ["hidden_0", "hidden_2"] for names in asked)


def test_a_runner_returns_only_the_states_asked_and_refuses_none(ort32: bertscope.Model) -> None:
    ids = np.array([[101, 7592, 2088, 102]])
    mask = np.ones_like(ids)
    every = ort32.engine.forward(ids, np.zeros_like(ids), mask, 4)
    some = ort32.engine.forward(ids, np.zeros_like(ids), mask, 4, {1, 4})
    assert [i for i, state in enumerate(some) if state is not None] == [1, 4]
    assert all(np.array_equal(some[i], every[i]) for i in (1, 4))
    for bad in ([], [-1], [5]):
        with pytest.raises(bertscope.InvalidSpec, match=r"name no hidden state in 0\.\.4"):
            ort32.engine.forward(ids, np.zeros_like(ids), mask, 4, bad)


def test_int8_stays_close_to_float32(int8: bertscope.Model, reference: np.ndarray) -> None:
    info = int8.info()
    assert (info.backend, info.quantize, info.dtype) == ("onnxruntime", "int8", "float32")
    cos = cosines(int8.embed(SAMPLE).vectors, reference)
    assert cos.min() >= 0.99, (cos.min(), SAMPLE[int(cos.argmin())])
    assert cos.mean() >= 0.998
    # Not the same numbers as float32: int8 really ran.
    assert cos.max() < 0.99999
    # Texts unlike the calibration sentences are as close as the news lines they were calibrated on.
    assert cos[len(NEWS) :].min() >= 0.99


def test_int8_very_short_texts_drift_more(int8: bertscope.Model, torch32: bertscope.Model) -> None:
    """One- to three-token texts are the weakest case (measured 0.985-0.998), so a looser bound."""
    short = ["ok", "yes", "no", "?", "thanks!", "Why?", "What is this?", "hello world"]
    cos = cosines(int8.embed(short).vectors, torch32.embed(short).vectors)
    assert cos.min() >= 0.97, dict(zip(short, cos.round(4).tolist(), strict=True))


@pytest.mark.filterwarnings("ignore:this CPU has no native bfloat16")
def test_bfloat16_stays_close_to_float32(torch32: bertscope.Model, reference: np.ndarray) -> None:
    bf16 = bertscope.load(device="cpu", dtype="bfloat16")
    info = bf16.info()
    assert (info.backend, info.quantize, info.dtype) == ("torch", None, "bfloat16")
    texts = NEWS[:6] + EXTRA[:3] + EXTRA[4:]  # 12 texts, no long paragraph: bfloat16 is slow on most CPUs
    vectors = bf16.embed(texts).vectors
    assert vectors.dtype == np.float32
    cos = cosines(vectors, torch32.embed(texts).vectors)
    assert cos.min() >= 0.9999 and cos.max() < 1 - 1e-7


# Tiny random models of every family ------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_onnxruntime_float32_equals_torch(
    family: str, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model], cache: Path
) -> None:
    m = bertscope.load(tiny_dirs[family], device="cpu", backend="onnxruntime")
    ref = tiny_models[family]
    assert m.info().backend == "onnxruntime" and ref.info().backend == "torch"
    assert max_diff(m.embed(TINY_SAMPLE).vectors, ref.embed(TINY_SAMPLE).vectors) <= 1e-5
    options: dict[str, Any] = dict(layers="all", combine="concat", pooling="mean")
    assert (
        max_diff(m.embed(TINY_SAMPLE, **options).vectors, ref.embed(TINY_SAMPLE, **options).vectors) <= 1e-5
    )
    assert max_diff(m.hidden_states(EXTRA[0]), ref.hidden_states(EXTRA[0])) <= 1e-5
    path = m.engine.runner.path
    assert path.parent == cache and path.name.startswith(f"{m.family.name}-")
    if family == "deberta-v2":
        # Without segment embeddings the exporter drops token_type_ids; the runner must not feed them.
        assert not m.engine.runner.uses_token_types
        assert "token_type_ids" not in [i.name for i in m.engine.runner.session.get_inputs()]


@pytest.mark.parametrize("family", sorted(TINY_INT8_MIN))
def test_tiny_int8_stays_close(
    family: str, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    m = bertscope.load(tiny_dirs[family], device="cpu", quantize="int8")
    assert (m.info().backend, m.info().quantize) == ("onnxruntime", "int8")
    cos = cosines(m.embed(TINY_SAMPLE).vectors, tiny_models[family].embed(TINY_SAMPLE).vectors)
    assert cos.min() >= TINY_INT8_MIN[family], (cos.min(), TINY_SAMPLE[int(cos.argmin())])


@pytest.mark.filterwarnings("ignore:this CPU has no native bfloat16")
@pytest.mark.parametrize("family", ["bert", "deberta-v2"])
def test_tiny_bfloat16_stays_close(
    family: str, tiny_dirs: dict[str, Path], tiny_models: dict[str, bertscope.Model]
) -> None:
    m = bertscope.load(tiny_dirs[family], device="cpu", dtype="bfloat16")
    assert m.info().dtype == "bfloat16" and m.info().backend == "torch"
    cos = cosines(m.embed(TINY_SAMPLE).vectors, tiny_models[family].embed(TINY_SAMPLE).vectors)
    assert cos.min() >= 0.9999


# The export cache ------------------------------------------------------------------------------------


def test_a_second_load_reuses_the_export(
    ort32: bertscope.Model, int8: bertscope.Model, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = content_digest(ort32.loaded.path)  # the export is named for the folder's content
    for first, kwargs in ((ort32, {"backend": "onnxruntime"}), (int8, {"quantize": "int8"})):
        path = first.engine.runner.path
        assert path.name.startswith(f"bert-{digest}-") and path.suffix == ".onnx"
        before = path.stat()
        capsys.readouterr()
        again = bertscope.load(device="cpu", **kwargs)
        assert "exporting" not in capsys.readouterr().err
        assert again.engine.runner.path == path
        after = path.stat()
        assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
            before.st_mtime_ns,
            before.st_size,
            before.st_ino,
        )
        np.testing.assert_array_equal(again.embed(EXTRA[:2]).vectors, first.embed(EXTRA[:2]).vectors)
    assert "float32" in ort32.engine.runner.path.name and "int8" in int8.engine.runner.path.name
    assert ort32.engine.runner.path != int8.engine.runner.path


def test_int8_sidecar_lists_outlier_channels(ort32: bertscope.Model, int8: bertscope.Model) -> None:
    about = json.loads(int8.engine.runner.path.with_suffix(".json").read_text())
    channels = about["outlier_channels"]
    assert about["outlier_factor"] == 3.0 and about["format"] == 2
    # Six layers of query, key, value, attention output, intermediate and output; the pooler runs in torch.
    assert len(channels) == 6 * 6 and not any(name.startswith("pooler") for name in channels)
    assert all(isinstance(n, int) and 0 <= n < 384 for n in channels.values())
    assert sum(channels.values()) > 0
    assert "outlier_channels" not in json.loads(ort32.engine.runner.path.with_suffix(".json").read_text())


def test_changed_weights_get_a_new_export(
    tiny_dirs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from transformers import AutoModel

    source = tiny_dirs["bert"]
    original = bertscope.load(source, device="cpu", backend="onnxruntime")
    digest = content_digest(source)
    assert original.engine.runner.path.name.startswith(f"bert-{digest}-float32")
    # A copy with one matrix changed (as a fine-tune would): a new export, of the new weights.
    changed = shutil.copytree(source, tmp_path / "changed")
    hf = AutoModel.from_pretrained(source)
    with torch.no_grad():
        hf.encoder.layer[0].output.dense.weight.mul_(1.5)
    hf.save_pretrained(changed, safe_serialization=True)
    capsys.readouterr()
    tuned = bertscope.load(changed, device="cpu", backend="onnxruntime")
    assert "exporting" in capsys.readouterr().err
    tuned_digest = content_digest(changed)
    assert tuned_digest != digest and original.engine.runner.path.exists()
    assert tuned.engine.runner.path.name.startswith(f"bert-{tuned_digest}-float32")
    tuned_torch = bertscope.load(changed, device="cpu", backend="torch")
    got = tuned.embed(TINY_SAMPLE).vectors
    assert max_diff(got, tuned_torch.embed(TINY_SAMPLE).vectors) <= 1e-5
    assert max_diff(got, original.embed(TINY_SAMPLE).vectors) > 1e-3


def test_the_same_weights_in_another_folder_reuse_the_export(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    source = tiny_dirs["electra"]
    first = bertscope.load(source, device="cpu", backend="onnxruntime").engine.runner.path
    moved = shutil.copytree(source, tmp_path / "moved")
    assert bertscope.load(moved, device="cpu", backend="onnxruntime").engine.runner.path == first


def test_calibration_texts_name_the_int8_export(tiny_dirs: dict[str, Path]) -> None:
    folder = tiny_dirs["distilbert"]
    default = bertscope.load(folder, device="cpu", quantize="int8").engine.runner.path
    assert default.name.startswith("distilbert-") and "-int8-" in default.name
    same = bertscope.load(folder, device="cpu", quantize="int8", calibration=calibration_texts())
    assert same.engine.runner.path == default
    mine = ["a cat sat on the mat", "what is the time?", "the car was horrible", "i like eating bread"]
    custom = bertscope.load(folder, device="cpu", quantize="int8", calibration=mine)
    path = custom.engine.runner.path
    assert path != default and path.exists() and "-int8-" in path.name
    assert path.name.split("-int8-")[0] == default.name.split("-int8-")[0]  # same family and weights
    assert "outlier_channels" in json.loads(path.with_suffix(".json").read_text())
    again = bertscope.load(folder, device="cpu", quantize="int8", calibration=list(mine))
    assert again.engine.runner.path == path


# Settings recorded with corpus outputs, and search reloading the model from them -------------------------


def stored_settings(path: Path) -> dict[str, Any]:
    """The settings a corpus output keeps: Parquet metadata, the .npy sidecar, or the SQLite collection."""
    if path.suffix == ".parquet":
        return json.loads(pq.read_table(path).schema.metadata[b"bertscope"])
    if path.suffix == ".npy":
        return json.loads(path.with_suffix(".settings.json").read_text())
    with sqlite3.connect(path) as db:
        (settings,) = db.execute("SELECT settings FROM collections WHERE name = 'default'").fetchone()
    db.close()
    return json.loads(settings)


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".db"])
def test_outputs_record_the_mode(
    suffix: str, tmp_path: Path, torch32: bertscope.Model, int8: bertscope.Model
) -> None:
    texts = NEWS[:8] + EXTRA[:2]
    for name, m, expected in (
        ("int8", int8, ("float32", "onnxruntime", "int8")),
        ("torch", torch32, ("float32", "torch", None)),
    ):
        out = tmp_path / f"{name}{suffix}"
        assert bertscope.embed_corpus(texts, out, model=m, progress=False).embedded == len(texts)
        settings = stored_settings(out)
        assert (settings["dtype"], settings["backend"], settings["quantize"]) == expected
        assert settings["model_arg"] is None  # the bundled model: reloaded by default


def test_search_reloads_the_int8_model_from_the_store(
    tmp_path: Path, int8: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bertscope.model

    texts = NEWS[:12] + EXTRA[:3]
    store = tmp_path / "int8.parquet"
    bertscope.embed_corpus(texts, store, model=int8, progress=False)
    loads: list[dict[str, Any]] = []
    real_load = bertscope.model.load

    def spy(*args: Any, **kwargs: Any) -> bertscope.Model:
        loads.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(bertscope.model, "load", spy)
    query = EXTRA[1]
    hits = bertscope.search(query, store, k=3)
    assert [(k["backend"], k["quantize"], k["dtype"]) for k in loads] == [("onnxruntime", "int8", "float32")]
    assert hits[0].id == str(texts.index(query) + 1) and hits[0].text == query
    # Not 1.0: int8 quantizes activations per tensor, so a text embedded alone (the query) and in a batch
    # (the store) differ (measured 0.997).
    assert hits[0].score > 0.99 and hits[1].score < hits[0].score
    stored = np.array(pq.read_table(store).column("embedding").to_pylist(), dtype=np.float32)
    expected = cosines(stored[texts.index(query)][None], int8.embed([query]).vectors)[0]
    assert hits[0].score == pytest.approx(expected, abs=1e-5)


def test_int8_vectors_depend_on_the_batch_within_bounds(
    int8: bertscope.Model, ort32: bertscope.Model, torch32: bertscope.Model
) -> None:
    """int8's activation scale is per batch tensor, so a text's vector moves with its batch-mates."""
    texts = NEWS[:12] + EXTRA[:2]
    alone = np.concatenate([int8.embed([t]).vectors for t in texts])
    batched = int8.embed(texts).vectors
    cos = cosines(alone, batched)
    assert cos.min() >= 0.99  # measured 0.9976
    assert cosines(alone, torch32.embed(texts).vectors).min() >= 0.99  # measured 0.9971
    # float32 onnxruntime has no such effect.
    ort_alone = np.concatenate([ort32.embed([t]).vectors for t in texts])
    assert max_diff(ort_alone, ort32.embed(texts).vectors) <= 1e-6


# Errors ---------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:this CPU has no native bfloat16")
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"backend": "tensorrt"}, "unknown backend 'tensorrt'; choose one of: auto, torch, onnxruntime"),
        ({"quantize": "int4"}, "unknown quantize 'int4'; choose one of: none, int8"),
        ({"quantize": "int8", "backend": "torch"}, "use backend='onnxruntime' (or 'auto')"),
        ({"dtype": "bfloat16", "backend": "onnxruntime"}, "'bfloat16' needs backend='torch' or 'openvino'"),
        ({"dtype": "bfloat16", "quantize": "int8"}, "leave dtype out"),
    ],
)
def test_impossible_modes_are_refused_with_the_fix(kwargs: dict[str, str], needle: str) -> None:
    with pytest.raises(bertscope.InvalidSpec) as caught:
        bertscope.load(device="cpu", **kwargs)
    assert needle in str(caught.value)


def test_onnxruntime_on_cuda_is_refused() -> None:
    with pytest.raises(bertscope.InvalidSpec, match="runs on the CPU; on cuda use backend='torch'"):
        resolve_backend("onnxruntime", None, torch.float32, torch.device("cuda"))
    with pytest.raises(bertscope.InvalidSpec, match="runs on the CPU"):
        resolve_backend("auto", "int8", torch.float32, torch.device("cuda", 0))
    assert resolve_backend("auto", None, torch.float16, torch.device("cuda")) == "torch"


def test_empty_calibration_is_refused(tiny_dirs: dict[str, Path]) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="calibration texts are empty"):
        bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=[])


@pytest.mark.parametrize("missing", ["onnxruntime", "onnx"])
def test_missing_onnxruntime_names_the_extra(
    missing: str, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An empty cache: the export has to be made (opening a cached export needs no onnx).
    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path))
    monkeypatch.setitem(sys.modules, missing, None)  # `import onnxruntime` now raises ImportError
    for kwargs in ({"backend": "onnxruntime"}, {"quantize": "int8"}):
        with pytest.raises(BackendUnavailable, match=r"pip install 'bertscope\[onnx\]'"):
            bertscope.load(tiny_dirs["bert"], device="cpu", **kwargs)
    assert bertscope.load(tiny_dirs["bert"], device="cpu").info().backend == "torch"


# The command line -----------------------------------------------------------------------------------


def test_cli_embed_int8_json(int8: bertscope.Model) -> None:
    result = runner.invoke(app, ["embed", "a sentence about the weather", "--quantize", "int8", "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    vectors = np.array(json.loads(result.stdout)["vectors"], dtype=np.float32)
    assert vectors.shape == (1, 384)
    np.testing.assert_allclose(vectors, int8.embed(["a sentence about the weather"]).vectors, atol=1e-6)


def test_cli_corpus_records_the_backend(tmp_path: Path, ort32: bertscope.Model) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in NEWS[:5]))
    out = tmp_path / "out.parquet"
    result = runner.invoke(
        app, ["embed", "-i", str(corpus), "-o", str(out), "--backend", "onnxruntime", "-q"]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    settings = stored_settings(out)
    assert (settings["backend"], settings["quantize"], settings["dtype"]) == ("onnxruntime", None, "float32")
    vectors = np.array(pq.read_table(out).column("embedding").to_pylist(), dtype=np.float32)
    assert max_diff(vectors, ort32.embed(NEWS[:5]).vectors) <= 1e-6


def test_cli_unknown_quantize_is_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bertscope.cli import main

    monkeypatch.setattr(sys, "argv", ["bertscope", "embed", "a sentence", "--quantize", "int4"])
    with pytest.raises(SystemExit) as caught:
        main()
    assert caught.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "unknown quantize 'int4'; choose one of: none, int8" in err
    assert "Traceback" not in err


def test_the_service_serves_int8_and_says_so(int8: bertscope.Model, bundled: bertscope.Model) -> None:
    """`serve --quantize int8`: /info reports the mode and /embed answers with int8's vectors."""
    from test_server import serving

    texts = ["a storm hit the coast overnight", "the bank raised its rates"]
    expected = int8.embed(texts).vectors
    with serving(int8) as base, httpx.Client(base_url=base, timeout=60) as client:
        info = client.get("/v2/info").json()
        answer = client.post("/v2/embed", json={"inputs": texts})
    assert (info["backend"], info["quantize"], info["dtype"]) == ("onnxruntime", "int8", "float32")
    assert answer.status_code == 200, answer.text
    got = np.asarray(answer.json()["vectors"], dtype=np.float32)
    assert np.abs(got - expected).max() <= 1e-5
    assert cosines(got, bundled.embed(texts).vectors).min() >= 0.99


def test_an_unwritable_cache_is_a_clear_error(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BERTSCOPE_CACHE", str(blocker))
    with pytest.raises(bertscope.BertscopeError, match="points at a file, not a folder"):
        bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
