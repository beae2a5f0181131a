"""mode="fast": the choice is measured once per model and machine, respects the bound, and is recorded.

Speeds on a shared 2-core machine are noise, so the tests give each mode a fixed speed (the vectors, and
so the cosines, are real) and assert on the choice, the cache file and a call counter, never on time.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bertscope
from bertscope.backends import fast

TEXTS = ["a small test sentence", "another one, a little longer than the first", "rain again", "ok"]
# texts per second by mode; int8 is the fastest, torch float32 the slowest
SPEEDS = {
    "torch float32": 100.0,
    "onnxruntime float32": 150.0,
    "openvino float32": 160.0,
    "onnxruntime int8": 300.0,
    "openvino int8": 400.0,
}


pytestmark = pytest.mark.usefixtures("cache")  # a fresh BERTSCOPE_CACHE per test


def _faked(calls: list[str]) -> Any:
    """`fast.measure` with SPEEDS for the timing (vectors stay real), noting each mode it measures."""

    def fake(ways: dict[str, Any], texts: list[str], *, rounds: int) -> dict[str, tuple[float, np.ndarray]]:
        calls.extend(ways)
        # real vectors on the first 8 distinct rows of each set (as tests/test_light_modes.py): the 400 timed
        # rows repeat 7 (TEXTS, their pairs and fours), and no test here reads how many rows were compared
        rows = list(dict.fromkeys(texts))[:8]
        return {name: (SPEEDS.get(name, 50.0), embed(rows)) for name, embed in ways.items()}

    return fake


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace the timing with SPEEDS (vectors stay real); returns the list of modes measured.

    Only torch float32 and ONNX Runtime's float32 are candidates: what the tests that take this fixture
    check (a measurement reused, named, forgotten or recorded; the fastest within the bound chosen) holds
    for any set of candidates, and opening all ten ways (four OpenVINO compiles) cost ~6 s a measurement.
    test_the_fastest_mode_within_the_bound_is_kept measures every candidate of this machine."""
    _few_ways(monkeypatch)
    return _measured_all(monkeypatch)


def _few_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only torch float32 and ONNX Runtime's float32 (where installed) are candidates."""
    few = {label: way for label, way in fast.candidates("cpu").items() if label in _FEW}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(few))


_FEW = ("torch float32", "onnxruntime float32")


def _measured_all(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(fast, "measure", _faked(calls))
    return calls


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory, tiny_dirs: dict[str, Path]) -> Path:
    """The tiny BERT's exported and quantized graphs (onnx/, openvino/), made once for the module by a fast
    load: what every test's fresh cache starts with. Measurements and records are left out (each test
    measures in its own cache); a graph is named by the model's content and the calibration, so a test
    that asks for another one makes it."""
    folder = tmp_path_factory.mktemp("graphs") / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTSCOPE_CACHE", str(folder))
        patch.setattr(fast, "measure", _faked([]))
        load_fast(tiny_dirs["bert"])
    return folder


@pytest.fixture(autouse=True)
def _graphs_in_cache(cache: Path, graphs: Path) -> None:
    for kind in ("onnx", "openvino"):
        if (graphs / kind).is_dir():  # no openvino/ where the CPU runs no int8 or bfloat16 way (AVX2)
            shutil.copytree(graphs / kind, cache / kind)  # a copy is hashed once, then trusted by its record


def load_fast(path: Path, **kwargs: Any) -> bertscope.Model:
    return bertscope.load(path, device="cpu", mode="fast", calibration=TEXTS, **kwargs)


def test_the_fastest_mode_within_the_bound_is_kept(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    _measured_all(monkeypatch)  # every candidate of this machine, its graphs made by `graphs`
    m = load_fast(tiny_dirs["bert"], fast_min_cosine=0.999)
    rows = json.loads(next((cache / "fast").glob("*.json")).read_text())["measured"]
    assert {row["mode"] for row in rows} == set(fast.candidates(m.device))
    allowed = [r for r in rows if r["mode"] == "torch float32" or r["cos_min"] >= 0.999]
    best = max(allowed, key=lambda r: r["texts_per_s"])
    info = m.info()
    assert info.mode == "fast" and info.fast is not None
    assert info.fast["chosen"] == best["mode"] and info.fast["cos_min"] >= 0.999
    assert (info.backend, info.quantize or "none") == (
        best["options"].get("backend", "torch"),
        best["options"].get("quantize", "none"),
    )
    reference = bertscope.load(tiny_dirs["bert"], device="cpu").embed(TEXTS).vectors
    unit = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    cos = (m.embed(TEXTS, normalize=True).vectors * unit).sum(axis=1)
    assert cos.min() >= 0.999


def test_a_second_load_reuses_the_measurements(tiny_dirs: dict[str, Path], measured: list[Any]) -> None:
    first = load_fast(tiny_dirs["bert"])
    count = len(measured)
    # each candidate twice: timed on the calibration texts, then drift only on the held-out ones
    assert count == 2 * len(fast.candidates(first.device))
    second = load_fast(tiny_dirs["bert"])
    assert len(measured) == count  # nothing measured again
    assert second.info().fast == first.info().fast
    # Another bound is answered from the same measurements: the tightest leaves only exact float32 modes.
    strict = load_fast(tiny_dirs["bert"], fast_min_cosine=1.0)
    assert len(measured) == count
    chosen = strict.info().fast
    assert chosen is not None and (chosen["chosen"] == "torch float32" or chosen["cos_min"] >= 1.0)


def test_another_machine_measures_again(
    tiny_dirs: dict[str, Path], measured: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    load_fast(tiny_dirs["bert"])
    count = len(measured)
    monkeypatch.setattr(fast, "machine_key", lambda: "another-cpu")
    load_fast(tiny_dirs["bert"])
    assert len(measured) == 2 * count


def test_nothing_faster_says_so_and_runs_float32(
    tiny_dirs: dict[str, Path],
    measured: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(SPEEDS, "torch float32", 1000.0)
    m = load_fast(tiny_dirs["bert"])
    assert "nothing on this machine beats torch float32" in capsys.readouterr().err
    info = m.info()
    assert (info.backend, info.dtype, info.quantize, info.mode) == ("torch", "float32", None, "fast")
    assert info.fast is not None and info.fast["chosen"] == "torch float32"
    # what cos_min is measured on, and where it is known not to hold
    assert "sentence vectors" in info.fast["covers"] and "token vectors" in info.fast["covers"]


def test_the_choice_is_recorded_in_corpus_settings(
    tiny_dirs: dict[str, Path], measured: list[Any], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    m = load_fast(tiny_dirs["bert"])
    out = tmp_path / "out.parquet"
    bertscope.embed_corpus(TEXTS, out, model=m, progress=False)
    settings = json.loads(pq.read_schema(out).metadata[b"bertscope"])
    assert settings["mode"] == "fast" and settings["fast"]["chosen"] == m.info().fast["chosen"]  # type: ignore[index]
    assert (settings["backend"], settings["quantize"]) == (m.info().backend, m.info().quantize)


def test_choose_takes_the_fastest_within_the_bound() -> None:
    rows = [row("torch float32", 100, 1.0), row("a", 150, 0.99999), row("b", 400, 0.995)]
    assert fast.choose(rows, 0.999).mode == "a"
    assert fast.choose(rows, 0.99).mode == "b"
    assert fast.choose(rows, 1.0).mode == "torch float32"


def row(mode: str, speed: float, cos: float) -> fast.Measured:
    return fast.Measured(mode, {}, speed, speed / 100, cos, cos)


def test_int8_must_earn_its_drift() -> None:
    # 1.4x the fastest float mode in the bound: int8 is not chosen; 1.6x: it is.
    floats = [row("torch float32", 100, 1.0), row("openvino float32", 200, 0.99999)]
    assert fast.choose([*floats, row("onnxruntime int8", 280, 0.995)], 0.99).mode == "openvino float32"
    assert fast.choose([*floats, row("onnxruntime int8", 320, 0.995)], 0.99).mode == "onnxruntime int8"


def test_int8_is_a_candidate_only_with_vnni(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(fast, "has_vnni", lambda: False)
    assert not any("int8" in mode for mode in fast.candidates(torch.device("cpu")))
    monkeypatch.setattr(fast, "has_vnni", lambda: True)
    assert {"onnxruntime int8", "openvino int8"} <= set(fast.candidates(torch.device("cpu")))


def test_remeasure_stale_and_implausible_figures_measure_again(
    tiny_dirs: dict[str, Path], measured: list[Any], cache: Path
) -> None:
    load_fast(tiny_dirs["bert"])
    count = len(measured)
    load_fast(tiny_dirs["bert"], remeasure=True)  # asked
    assert len(measured) == 2 * count
    path = next((cache / "fast").glob("*.json"))
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "bertscope": "0.0.1"}))  # written by an older bertscope
    load_fast(tiny_dirs["bert"])
    assert len(measured) == 3 * count
    data["measured"][1]["vs_float32"] = 150.0  # measured while something else held the CPU
    path.write_text(json.dumps(data))
    load_fast(tiny_dirs["bert"])
    assert len(measured) == 4 * count
    load_fast(tiny_dirs["bert"])  # the fresh figures are kept
    assert len(measured) == 4 * count


def test_cli_remeasure_measures_again_what_this_load_reads(
    tiny_dirs: dict[str, Path], measured: list[Any], cache: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from bertscope.cli import app

    load_fast(tiny_dirs["bert"])
    kept = next((cache / "fast").glob("*.json"))
    count = len(measured)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in TEXTS))
    args = ["embed", "-i", str(corpus), "-o", str(tmp_path / "o.parquet"), "-m", str(tiny_dirs["bert"])]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--fast", "--remeasure", "-q"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert len(measured) == 2 * count
    assert kept.exists()  # only the figures this load reads are taken again: another calibration's stay


def test_bfloat16_is_a_candidate_only_with_native_support(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(fast, "has_native_bf16", lambda: False)
    assert not any("bfloat16" in mode for mode in fast.candidates(torch.device("cpu")))
    monkeypatch.setattr(fast, "has_native_bf16", lambda: True)
    assert {"torch bfloat16", "openvino bfloat16"} <= set(fast.candidates(torch.device("cpu")))


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"mode": "fast", "backend": "onnxruntime"}, "picks the backend"),
        ({"mode": "fast", "quantize": "int8"}, "picks the backend"),
        ({"mode": "fast", "fast_min_cosine": 1.5}, "fast_min_cosine"),
        ({"mode": "fast", "fast_min_cosine": "0.99"}, "fast_min_cosine='0.99': give a number"),
        ({"mode": "fast", "fast_min_cosine": True}, "fast_min_cosine=True"),
        ({"mode": "quick"}, "unknown mode"),
    ],
)
def test_bad_fast_options_are_refused(
    tiny_dirs: dict[str, Path], kwargs: dict[str, Any], needle: str
) -> None:
    with pytest.raises(bertscope.InvalidSpec, match=needle):
        bertscope.load(tiny_dirs["bert"], device="cpu", **kwargs)


def test_cli_fast_corpus_job_records_the_choice(
    tiny_dirs: dict[str, Path], measured: list[Any], tmp_path: Path
) -> None:
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from bertscope.cli import app

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in TEXTS))
    out = tmp_path / "out.parquet"
    args = ["embed", "-i", str(corpus), "-o", str(out), "-m", str(tiny_dirs["bert"]), "--device", "cpu"]
    result = CliRunner().invoke(app, [*args, "--fast", "--fast-min-cosine", "0.9999", "-q"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert measured  # the CLI went through the fast choice
    settings = json.loads(pq.read_schema(out).metadata[b"bertscope"])
    assert settings["mode"] == "fast" and settings["fast"]["min_cosine"] == 0.9999
    rows = json.loads(next((tmp_path / "cache" / "fast").glob("*.json")).read_text())["measured"]
    chosen = fast.choose([fast.Measured(**row) for row in rows], 0.9999)
    assert settings["fast"]["chosen"] == chosen.mode


def test_compare_modes_loads_each_mode_without_the_facade(tiny_dirs: dict[str, Path]) -> None:
    """`bertscope bench`'s comparison: each mode opened as an Encoder and switched, drift against float32."""
    from bertscope.backends.modes import compare_modes
    from bertscope.core.encoder import open_encoder

    pytest.importorskip("onnxruntime")
    reports = compare_modes(
        TEXTS, ("float32", "onnxruntime"), model=tiny_dirs["bert"], device="cpu", time_it=False
    )
    assert [r.mode for r in reports] == ["float32", "onnxruntime"]
    assert reports[0].max_abs == 0.0 and reports[1].max_abs < 1e-5 and reports[1].cos_min > 0.99999
    half = open_encoder(tiny_dirs["bert"], device="cpu", dtype="bfloat16")
    assert next(half.hf_model.parameters()).dtype is torch.bfloat16


def test_measurements_are_named_by_the_graphs_they_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement made on an earlier int8 graph (or export, or OpenVINO IR) is never read as one of
    today's: the graph formats are part of the file's name."""
    from bertscope.backends import exact

    model = bertscope.load(device="cpu", backend="torch")
    texts = ["one sentence"]
    before = (fast._cache_path(model, texts, {}), exact._measured_path("bert", "digest"))
    assert all(fast.graphs_key() in path.name for path in before)
    monkeypatch.setattr(fast, "GRAPH_FORMAT", fast.GRAPH_FORMAT + 1)
    after = (fast._cache_path(model, texts, {}), exact._measured_path("bert", "digest"))
    assert all(a != b for a, b in zip(before, after, strict=True))


def _int8_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only torch float32 and ONNX Runtime's dynamic int8 are candidates, and int8 is far the faster."""
    from bertscope.backends.modes import MODES

    pytest.importorskip("onnxruntime")
    ways = {way.label: way for way in (MODES["float32"], MODES["int8"])}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(ways))


def test_fast_int8_on_the_shipped_calibration_records_no_digest_of_its_own(
    tiny_dirs: dict[str, Path], measured: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The shipped texts chose it, so the store's settings reload it: no 'calibration' digest (which
    says "your own texts; pass the model"), and a store it wrote verifies from its settings alone."""
    from bertscope.backends.runtimes import calibration_digest

    _int8_wins(monkeypatch)
    shipped = bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast", fast_min_cosine=0.5)
    assert shipped.info().fast["chosen"] == "onnxruntime int8"  # type: ignore[index]
    assert shipped.calibration_digest is None
    own = load_fast(tiny_dirs["bert"], fast_min_cosine=0.5)
    assert own.info().quantize == "int8" and own.calibration_digest == calibration_digest(TEXTS)


def test_the_measurements_are_named_by_the_limits_they_ran_under(
    tiny_dirs: dict[str, Path], measured: list[Any], cache: Path
) -> None:
    """Figures taken with texts cut at 4 tokens (or another token budget) are not read at the default."""
    load_fast(tiny_dirs["bert"], max_tokens=4)
    count = len(measured)
    load_fast(tiny_dirs["bert"])
    assert len(measured) == 2 * count
    load_fast(tiny_dirs["bert"], token_budget=64)
    assert len(measured) == 3 * count
    load_fast(tiny_dirs["bert"], max_tokens=4)  # each kept under its own name
    assert len(measured) == 3 * count and len(list((cache / "fast").glob("*.json"))) == 3


def test_a_runtime_upgrade_measures_again(
    tiny_dirs: dict[str, Path], measured: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exact default's key of the installed libraries is in the name, as in its own file's; NNCF's
    version is added where one of its int8 ways is a candidate."""
    from bertscope.backends import modes
    from bertscope.backends.modes import MODES

    load_fast(tiny_dirs["bert"])
    count = len(measured)
    monkeypatch.setattr(modes, "installed_key", lambda: "upgraded")
    load_fast(tiny_dirs["bert"])
    assert len(measured) == 2 * count
    plain = fast.libraries_key({"int8": MODES["int8"]})
    with_nncf = fast.libraries_key({"openvino int8": MODES["openvino-int8"]})
    assert plain == "upgraded" and with_nncf.startswith("upgradedn") and with_nncf != plain


def test_cli_remeasure_with_quantize_is_refused_before_anything_is_forgotten(
    tiny_dirs: dict[str, Path], measured: list[Any], cache: Path, tmp_path: Path
) -> None:
    """`load(quantize='int8', remeasure=True)` is refused; so is the command line's pair, and the
    measurements of this machine are kept (the --remeasure callback used to delete them first)."""
    from typer.testing import CliRunner

    from bertscope.cli import app

    load_fast(tiny_dirs["bert"])
    kept = next((cache / "fast").glob("*.json"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in TEXTS))
    args = ["embed", "-i", str(corpus), "-o", str(tmp_path / "o.npy"), "-m", str(tiny_dirs["bert"])]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--quantize", "int8", "--remeasure", "-q"])
    assert isinstance(result.exception, bertscope.InvalidSpec), result.output  # main() prints it in one line
    assert "remeasure" in str(result.exception)
    assert kept.exists() and not (tmp_path / "o.npy").exists()
    # a Ray job checks the pair the same way, before Ray starts (it does not load through load_model)
    ray_args = [*args[:4], str(tmp_path / "ray_out"), *args[5:], "--engine", "ray", "--device", "cpu"]
    result = CliRunner().invoke(app, [*ray_args, "--quantize", "int8", "--remeasure", "-q"])
    assert isinstance(result.exception, bertscope.InvalidSpec) and "remeasure" in str(result.exception)
    assert kept.exists() and not (tmp_path / "ray_out").exists()


def test_a_way_that_drifts_only_on_short_texts_is_not_chosen(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drift pass reads SHORT_TEXTS beside the held-out sentences (as `verify` does), so a way whose
    vectors move only on a short text is measured under the bound and passed over."""
    from bertscope.backends.quantize import SHORT_TEXTS

    _few_ways(monkeypatch)  # two candidates, as `measured`: the drifting one and torch float32

    def real_on(rows_of: Any) -> Any:
        def fake(
            ways: dict[str, Any], texts: list[str], *, rounds: int
        ) -> dict[str, tuple[float, np.ndarray]]:
            rows = rows_of(texts)
            return {name: (SPEEDS.get(name, 50.0), embed(rows)) for name, embed in ways.items()}

        return fake

    first_distinct = lambda texts: list(dict.fromkeys(texts))[:8]  # noqa: E731
    monkeypatch.setattr(fast, "measure", real_on(first_distinct))
    drifted = load_fast(tiny_dirs["bert"]).info().fast["chosen"]  # type: ignore[index]
    assert drifted != "torch float32"

    def with_short(texts: list[str]) -> list[str]:
        return first_distinct(texts) + [text for text in SHORT_TEXTS if text in texts]

    base = real_on(with_short)

    def moved_on_short(
        ways: dict[str, Any], texts: list[str], *, rounds: int
    ) -> dict[str, tuple[float, np.ndarray]]:
        out = base(ways, texts, rounds=rounds)
        speed, vectors = out[drifted]
        vectors = np.array(vectors, copy=True)
        rows = with_short(texts)
        for index, text in enumerate(rows):
            if text == "No.":  # one short text's vector turned a little off float32's
                vectors[index] = vectors[index] + 0.2 * np.roll(vectors[index], 1)
        out[drifted] = (speed, vectors)
        return out

    monkeypatch.setattr(fast, "measure", moved_on_short)
    info = load_fast(tiny_dirs["bert"], remeasure=True).info()
    assert info.fast is not None and info.fast["chosen"] != drifted
    assert "short texts" in info.fast["covers"]
