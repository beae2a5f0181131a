"""The fast modes' audit (2) fixes: int8 fitted on the caller's own texts must keep within int8's bound,
the fast measurement is named by the folder's pooling settings, and the rough edges of the refusals,
warnings and `bertscope bench`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends import fast, int8_gate
from bertscope.backends.digest import settings_digest
from console import run_main
from tiny_models import st_pooling_folder

pytest.importorskip("onnxruntime")

NEWS = [
    "The council approved the budget on Tuesday.",
    "Heavy rain closed two roads overnight.",
    "Shares fell sharply after the earnings report.",
]


def _no_measuring(*_: Any, **__: Any) -> Any:
    raise AssertionError("measured again although the verdict is recorded beside the graph")


# D2: int8 fitted on your own texts earns its drift ------------------------------------------------------


def test_int8_static_fitted_on_one_word_is_refused_with_its_min_cosine(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(bertscope.InvalidSpec) as refused:
        bertscope.load(device="cpu", quantize="int8_static", calibration=["x"])
    message = str(refused.value)
    assert "\n" not in message
    assert "quantize='int8_static' fitted on your 1 calibration text reads a min cosine of 0." in message
    measured = float(message.split("min cosine of ")[1].split()[0])
    assert measured < int8_gate.INT8_MIN_COSINE
    assert f"under int8's bound {int8_gate.INT8_MIN_COSINE}" in message
    assert "more and longer calibration texts" in message and "leave calibration= out" in message
    # the verdict sits in the graph's record: a second load refuses from it, measuring nothing
    (graph,) = (cache / "onnx").glob("*-int8-static-*.onnx")
    kept = json.loads(graph.with_suffix(".json").read_text())["own_calibration_drift"]
    assert [round(v["cos_min"], 4) for v in kept.values()] == [round(measured, 4)]
    monkeypatch.setattr(int8_gate, "fitted_drift", _no_measuring)
    with pytest.raises(bertscope.InvalidSpec, match=f"min cosine of {measured:.4f}"):
        bertscope.load(device="cpu", quantize="int8_static", calibration=["x"])


def test_the_shipped_calibration_is_not_measured_again(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped texts' graphs are the ones the docs measured: only your own texts are checked."""
    monkeypatch.setattr(int8_gate, "fitted_drift", _no_measuring)
    # the tiny BERT: whether the gate measures depends on the texts, not the model (the bundled model's
    # int8_static export and calibration cost ~8 s)
    m = bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8_static")
    assert m.info().quantize == "int8_static"


def test_int8_on_enough_of_your_texts_loads_and_its_verdict_is_kept(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = int8_gate.fitted_drift

    def counted(*args: Any, **kwargs: Any) -> tuple[float, str]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(int8_gate, "fitted_drift", counted)
    m = bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=NEWS)
    assert m.info().quantize == "int8" and calls == [1]
    record = json.loads(m.engine.runner.path.with_suffix(".json").read_text())
    (verdict,) = record["own_calibration_drift"].values()
    assert verdict["cos_min"] >= int8_gate.INT8_MIN_COSINE
    again = bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=list(NEWS))
    assert calls == [1]  # read from the record
    np.testing.assert_allclose(again.embed(NEWS).vectors, m.embed(NEWS).vectors, atol=1e-6)
    from bertscope.backends import runtimes

    # a cache copied to another machine (its int8 kernels differ: AVX2's saturate) measures it again
    monkeypatch.setattr(runtimes, "machine_key", lambda: "another-machine")
    bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8", calibration=list(NEWS))
    assert calls == [1, 1]


def test_a_drift_under_the_bound_is_refused_on_any_int8_graph(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate reads the measured figure against INT8_MIN_COSINE (here a drift forced under it), and a
    refused load leaves no runtime switched on."""
    monkeypatch.setattr(int8_gate, "fitted_drift", lambda *_a, **_k: (0.95, "ok"))
    for options in ({"quantize": "int8"}, {"quantize": "int8_fused"}):
        with pytest.raises(
            bertscope.InvalidSpec, match=r"min cosine of 0\.9500 to float32 \(lowest on 'ok',"
        ):
            bertscope.load(tiny_dirs["bert"], device="cpu", calibration=NEWS, **options)


def test_openvino_int8_static_on_your_texts_is_gated(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nncf")
    monkeypatch.setattr(int8_gate, "fitted_drift", lambda *_a, **_k: (0.5, "x"))
    with pytest.raises(
        bertscope.InvalidSpec, match="backend='openvino', quantize='int8_static' fitted on your 3"
    ):
        bertscope.load(
            tiny_dirs["bert"], device="cpu", backend="openvino", quantize="int8_static", calibration=NEWS
        )
    (ir,) = (cache / "openvino").glob("*-int8-static-*.xml")
    assert "own_calibration_drift" in json.loads(ir.with_suffix(".json").read_text())


def test_mode_fast_measures_its_own_candidates_ungated(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mode='fast' with your texts reads each way's drift under its own bound: the gate is not its."""
    from bertscope.backends.modes import MODES

    ways = {way.label: way for way in (MODES["float32"], MODES["int8"])}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(ways))
    monkeypatch.setattr(int8_gate, "fitted_drift", _no_measuring)
    m = bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast", fast_min_cosine=0.5, calibration=NEWS)
    assert m.info().mode == "fast"


# D4: the fast measurement is named by the folder's pooling -----------------------------------------------


def _with_pooling(source: Path, target: Path, mode: str) -> Path:
    return st_pooling_folder(source, target, f"pooling_mode_{mode}_tokens")


def test_a_change_of_pooling_names_another_measurement(
    tiny_dirs: dict[str, Path], tmp_path: Path, cache: Path
) -> None:
    folder = _with_pooling(tiny_dirs["bert"], tmp_path / "m", "mean")
    before = settings_digest(folder)
    mean = bertscope.load(folder, device="cpu")
    mean_path = fast._cache_path(mean, NEWS, {})
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_cls_token": True})
    )
    assert settings_digest(folder) != before
    cls_path = fast._cache_path(bertscope.load(folder, device="cpu"), NEWS, {})
    assert cls_path != mean_path
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    assert fast._cache_path(bertscope.load(folder, device="cpu"), NEWS, {}) not in (cls_path, mean_path)
    assert settings_digest(None) == "none"


# Rough edges ----------------------------------------------------------------------------------------------


def test_bfloat16_with_int8_names_the_fix_that_runs(tiny_dirs: dict[str, Path]) -> None:
    """Not "needs backend='torch'": torch refuses int8, so the two messages sent the user back and forth."""
    for quantize_name in ("int8", "int8_static"):
        with pytest.raises(bertscope.InvalidSpec) as refused:
            bertscope.load(tiny_dirs["bert"], device="cpu", dtype="bfloat16", quantize=quantize_name)
        assert "leave dtype out" in str(refused.value)
        assert "backend='torch'" not in str(refused.value)


@pytest.mark.parametrize(("vnni", "advice"), [(False, "dtype='float32'"), (True, "quantize='int8'")])
def test_no_native_bfloat16_advises_int8_only_with_vnni(
    monkeypatch: pytest.MonkeyPatch, vnni: bool, advice: str
) -> None:
    from bertscope.backends import openvino
    from bertscope.core import loading

    monkeypatch.setattr(loading, "cpu_flags", lambda: {"avx2"})
    monkeypatch.setattr(loading, "has_native_bf16", lambda: False)
    monkeypatch.setattr(openvino, "has_native_bf16", lambda: False)
    monkeypatch.setattr(loading, "has_vnni", lambda: vnni)
    with pytest.warns(UserWarning) as torch_warned:
        loading.resolve_dtype("bfloat16", "cpu")
    with pytest.warns(UserWarning) as openvino_warned:
        assert openvino.resolve_precision("bfloat16", None, "cpu") == "float32"
    for said in (str(torch_warned[0].message), str(openvino_warned[0].message)):
        assert advice in said
        assert vnni or "int8" not in said


def test_dtypes_bertscope_does_not_run_are_refused_as_their_names_are() -> None:
    import torch

    from bertscope.core.loading import resolve_dtype

    with pytest.raises(bertscope.InvalidSpec, match="choose one of: float32, bfloat16, float16$"):
        resolve_dtype(torch.float64, "cpu")
    with pytest.raises(bertscope.InvalidSpec, match=r"float16 \(int8 is quantize='int8', not a dtype\)"):
        resolve_dtype(torch.int8, "cpu")
    with pytest.raises(bertscope.InvalidSpec, match="unknown dtype torch.uint8"):
        bertscope.load(device="cpu", dtype=torch.uint8)
    assert resolve_dtype(torch.bfloat16, "cpu") is torch.bfloat16


def test_remeasure_takes_a_bool_only(tiny_dirs: dict[str, Path]) -> None:
    for value in ("yes", 1):
        with pytest.raises(bertscope.InvalidSpec, match=f"remeasure takes True or False, not {value!r}"):
            bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast", remeasure=value)  # type: ignore[arg-type]


def test_bench_names_what_ran_where_it_differs_from_the_mode(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenVINO bfloat16 without native bfloat16 runs float32: the row and --json say so."""
    pytest.importorskip("openvino")
    from typer.testing import CliRunner

    from bertscope.backends import openvino
    from bertscope.cli import app

    monkeypatch.setattr(openvino, "has_native_bf16", lambda: False)
    args = [
        "bench",
        "-m",
        str(tiny_dirs["bert"]),
        "--device",
        "cpu",
        "--modes",
        "openvino-bfloat16,onnxruntime",
    ]
    result = CliRunner().invoke(app, [*args, "--drift", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["mode"]: row for row in json.loads(result.stdout)}
    assert (rows["openvino-bfloat16"]["backend"], rows["openvino-bfloat16"]["dtype"]) == (
        "openvino",
        "float32",
    )
    assert (rows["onnxruntime"]["backend"], rows["onnxruntime"]["quantize"]) == ("onnxruntime", None)
    table = CliRunner().invoke(app, [*args, "--drift"], terminal_width=200)
    assert table.exit_code == 0, table.output
    assert "openvino-bfloat16 (ran openvino float32)" in table.stdout
    assert "onnxruntime (ran" not in table.stdout


def test_bench_says_median_and_its_own_flags() -> None:
    from typer.testing import CliRunner

    from bertscope.cli import app

    helped = CliRunner().invoke(app, ["bench", "--help"], terminal_width=200)
    assert "median" in helped.stdout and "best kept" not in helped.stdout
    refused = run_main("bench", "--modes", "float16", "--device", "cpu")
    assert refused.code != 0 and len(refused.stderr.strip().splitlines()) == 1
    assert "--modes bfloat16" in refused.stderr and "--dtype" not in refused.stderr
