"""The exact default: load() with no options runs the fastest runtime equal to torch within 1e-5.

The bundled model (the session fixture) goes through the real choice once per test session: its
export and measurement are what the suite pays for it (measured: see FILE_WEIGHTS). Tiny models stay
on torch (under MIN_PARAMETERS), except here, where the threshold is lowered to exercise the choice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

import bertscope
from bertscope.backends import exact, modes
from bertscope.backends.quantize import calibration_texts
from tiny_models import measure_like_a_real_model

TEXTS = ["a small test sentence", "another one, a little longer than the first", ("a pair", "of texts")]


def hf_hidden(model: bertscope.Model, text: str) -> np.ndarray:
    """(L+1, tokens, d) from the plain Hugging Face forward of the model's own torch weights."""
    out = model.forward([text])
    return np.stack([np.asarray(h[0]) for h in out.hidden_states])


def test_bundled_default_is_exact_and_recorded(bundled: bertscope.Model) -> None:
    info = bundled.info()
    assert info.exact is not None and info.exact["chosen"] in exact.exact_candidates()
    assert info.backend == info.exact["chosen"].split()[0]
    for text in ["The storm hit the coast at dawn.", "short"]:
        assert np.abs(bundled.hidden_states(text) - hf_hidden(bundled, text)).max() <= 1e-5


def test_tiny_models_stay_on_torch_and_say_why(tiny_dirs: dict[str, Path]) -> None:
    m = bertscope.load(tiny_dirs["bert"], device="cpu")
    assert m.info().backend == "torch"
    assert m.exact_choice is not None and "weights" in m.exact_choice["why"]


def test_the_choice_is_measured_once_exact_and_every_method_agrees(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure_like_a_real_model(monkeypatch)
    calls: list[int] = []
    real = exact._measure
    monkeypatch.setattr(exact, "_measure", lambda *a: calls.append(1) or real(*a))
    m = bertscope.load(tiny_dirs["bert"], device="cpu")
    again = bertscope.load(tiny_dirs["bert"], device="cpu")
    assert len(calls) == 1 and again.exact_choice == m.exact_choice
    ref = bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch")
    assert ref.info().backend == "torch" and ref.exact_choice is None
    assert m.info().backend == m.exact_choice["chosen"].split()[0]  # type: ignore[index]
    assert m.exact_choice["max_abs"] <= 1e-5  # type: ignore[index]
    close = {"atol": 1e-5, "rtol": 0}
    np.testing.assert_allclose(m.embed(TEXTS).vectors, ref.embed(TEXTS).vectors, **close)
    for a, b in zip(m.embed_tokens(TEXTS, layers="all"), ref.embed_tokens(TEXTS, layers="all"), strict=True):
        np.testing.assert_allclose(a.vectors, b.vectors, **close)
    np.testing.assert_allclose(m.hidden_states(TEXTS[1]), hf_hidden(ref, TEXTS[1]), **close)
    np.testing.assert_allclose(m.attentions(TEXTS[2]), ref.attentions(TEXTS[2]), **close)
    np.testing.assert_allclose(m.similarity(TEXTS[:2]), ref.similarity(TEXTS[:2]), **close)
    bertscope.load(tiny_dirs["bert"], device="cpu", remeasure=True)
    assert len(calls) == 2


def test_every_process_takes_the_figures_another_measured_and_info_says_the_ones_a_load_reads(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A measurement is judged by what it holds, alike in every process that shares the cache: one run from a
    newer copy of this version (a clone, an edited __init__.py: its package's files newer than the figures)
    measured again and rewrote them under the processes already running, whose own next load (or `bertscope
    info`) then said other figures than their loaded model (tests/test_results.py saw vs_torch 2.718 for
    2.458). The record `info` reads holds only while the file holds the figures it was read from."""
    from bertscope.backends import recorded

    measure_like_a_real_model(monkeypatch)
    calls: list[int] = []
    real = exact._measure
    monkeypatch.setattr(exact, "_measure", lambda *a: calls.append(1) or real(*a))
    folder = tiny_dirs["bert"]
    m = bertscope.load(folder, device="cpu")
    path = Path(m.exact_choice["measured"])  # type: ignore[index]
    os.utime(path, (1, 1))  # older than any package's files: as a newer copy of bertscope sees it
    again = bertscope.load(folder, device="cpu")
    assert len(calls) == 1 and again.exact_choice == m.exact_choice
    assert recorded.recall(folder, "cpu") == {
        "backend": m.info().backend,
        "dtype": "float32",
        "exact": m.exact_choice,
    }
    # measured again by another process (asked, on a quiet machine): the record no longer holds
    data = json.loads(path.read_text())
    way = next(w for w in data["measured"] if w["mode"] != exact._TORCH and w["max_abs"] <= exact._GATE)
    torch_speed = next(w["texts_per_s"] for w in data["measured"] if w["mode"] == exact._TORCH)
    way.update(texts_per_s=1000 * torch_speed, vs_float32=1000.0)  # no real measurement reads so
    path.write_text(json.dumps(data))
    assert recorded.recall(folder, "cpu") is None  # `info` loads, and reads the figures now there
    fresh = bertscope.load(folder, device="cpu")
    assert len(calls) == 1 and fresh.exact_choice != m.exact_choice
    assert recorded.recall(folder, "cpu") == {
        "backend": fresh.info().backend,
        "dtype": "float32",
        "exact": fresh.exact_choice,
    }


def test_runtimes_are_timed_on_corpus_sized_batches_of_sentences_and_passages(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 8 sentences a call ranked runtimes by a call's fixed cost: OpenVINO measured 0.25-0.39x ONNX
    # Runtime on a Xeon where it embedded news 1.16-1.27x faster (bench/BENCHMARKS.md)
    measure_like_a_real_model(monkeypatch)
    calls: list[tuple[list[str], list[str], dict[str, Any]]] = []
    real = exact.measure

    def spy(ways: dict[str, Any], texts: list[str], **options: Any) -> Any:
        calls.append((list(ways), list(texts), options))
        return real(ways, texts, **options)

    monkeypatch.setattr(exact, "measure", spy)
    bertscope.load(tiny_dirs["bert"], device="cpu", remeasure=True)
    sentences = calibration_texts()[:8]
    ((timed, rows, options),) = calls
    assert len(rows) == exact._TIMED_ROWS_RANGE[1]  # a tiny model: the most rows
    assert set(rows) >= {*sentences, " ".join(sentences[:2]), " ".join(sentences[:4])}
    assert exact._TORCH in timed and options == {"rounds": 3, "drop_if_slower": (exact._TORCH, 1.5)}


def test_bigger_models_are_timed_on_fewer_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    for weights, expected in [(1_000_000, 200), (22_713_216, 200), (109_486_464, 41), (335_000_000, 28)]:
        monkeypatch.setattr(exact, "_parameters", lambda model, weights=weights: weights)
        assert exact._timed_rows(None) == expected


def _clocked(monkeypatch: pytest.MonkeyPatch, seconds: dict[str, float]) -> tuple[dict[str, Any], list[str]]:
    """Ways that each move a fake clock by their seconds a call, and the list of the calls they got."""
    clock, seen = [0.0], []
    monkeypatch.setattr(modes, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def way(name: str) -> Any:
        def embed(texts: list[str]) -> None:
            seen.append(name)
            clock[0] += seconds[name]

        return embed

    return {name: way(name) for name in seconds}, seen


def test_torch_is_timed_no_more_once_its_first_round_is_far_slower(monkeypatch: pytest.MonkeyPatch) -> None:
    ways, seen = _clocked(monkeypatch, {"torch": 2.0, "runtime": 1.0})
    speeds = modes.measure(ways, ["a"], rounds=3, drop_if_slower=("torch", 1.5))
    assert seen.count("torch") == 2 and seen.count("runtime") == 4  # a warm-up and its rounds
    assert speeds["torch"][0] == 0.5 and speeds["runtime"][0] == 1.0
    ways, seen = _clocked(monkeypatch, {"torch": 2.0, "runtime": 1.0})
    modes.measure(ways, ["a"], rounds=3, drop_if_slower=("torch", 2.5))  # within the factor: all rounds
    assert seen.count("torch") == 4
    ways, seen = _clocked(monkeypatch, {"torch": 1.0, "runtime": 3.0})
    modes.measure(ways, ["a"], rounds=3, drop_if_slower=("torch", 1.5))  # the runtime is never dropped
    assert seen.count("torch") == seen.count("runtime") == 4


def test_a_way_that_is_not_exact_is_neither_timed_nor_chosen(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure_like_a_real_model(monkeypatch)
    real_all, real_measure, timed = exact._all_hidden, exact.measure, []

    def off(model: Any, texts: list[str]) -> np.ndarray:  # ONNX Runtime's states read 1e-3 off
        return real_all(model, texts) + (1e-3 if model.backend == "onnxruntime" else 0.0)

    monkeypatch.setattr(exact, "_all_hidden", off)
    monkeypatch.setattr(
        exact, "measure", lambda ways, texts, **kw: timed.extend(ways) or real_measure(ways, texts, **kw)
    )
    m = bertscope.load(tiny_dirs["bert"], device="cpu", remeasure=True)
    assert "onnxruntime float32" not in timed and exact._TORCH in timed
    assert m.info().backend != "onnxruntime"


def test_cuda_and_other_dtypes_stay_on_torch(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exact, "MIN_PARAMETERS", 0)
    m = bertscope.load(tiny_dirs["bert"], device="cpu", dtype="bfloat16")
    assert m.info().backend == "torch" and "float32" in m.exact_choice["why"]  # type: ignore[index]
    assert next(m.hf_model.parameters()).dtype is torch.bfloat16


def test_a_store_made_on_one_exact_runtime_takes_rows_from_another(
    tmp_path: Path, bundled: bertscope.Model
) -> None:
    from typer.testing import CliRunner

    from bertscope.cli import app
    from bertscope.io.sinks import settings_differ
    from bertscope.io.sqlite_store import connect, iter_vectors

    db = tmp_path / "store.db"
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("the first text\n")
    second.write_text("the first text\na second text, added later\n")
    for path, backend in ((first, "torch"), (second, "onnxruntime")):
        args = ["embed", "-i", str(path), "-o", str(db), "--collection", "c", "--backend", backend, "-q"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (result.output, result.exception)
    _, texts, vectors = next(iter_vectors(connect(db), "c", 10))
    assert texts == ["the first text", "a second text, added later"]
    np.testing.assert_allclose(vectors, bundled.embed(texts).vectors, atol=1e-5)
    exact_torch = {"mode": "exact", "dtype": "float32", "quantize": None, "backend": "torch", "layers": [6]}
    assert not settings_differ(exact_torch, {**exact_torch, "backend": "openvino"})
    assert settings_differ(exact_torch, {**exact_torch, "backend": "openvino", "dtype": "bfloat16"})
    assert settings_differ(exact_torch, {**exact_torch, "backend": "onnxruntime", "quantize": "int8"})
    assert settings_differ(exact_torch, {**exact_torch, "layers": [5]})


def test_a_runtime_the_model_cannot_be_exported_to_is_left_out(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.backends import onnx, openvino
    from bertscope.errors import ModelLoadError

    def refuse(*_: object, **__: object) -> None:
        raise ModelLoadError(
            "this modernbert model could not be exported to ONNX (stand-in); use backend='torch'"
        )

    monkeypatch.setattr(exact, "MIN_PARAMETERS", 0)
    monkeypatch.setattr(onnx, "export_onnx", refuse)
    monkeypatch.setattr(openvino, "export_onnx", refuse)
    m = bertscope.load(tiny_dirs["modernbert"], device="cpu")
    assert m.info().backend == "torch" and m.exact_choice["chosen"] == "torch float32"  # type: ignore[index]
    calls: list[int] = []
    monkeypatch.setattr(exact, "_measure", lambda *a: calls.append(1))
    assert bertscope.load(tiny_dirs["modernbert"], device="cpu").info().backend == "torch"
    assert not calls  # what did not apply is remembered, not tried again


def test_an_export_the_disk_could_not_take_is_tried_again_on_the_next_load(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    measure_like_a_real_model(monkeypatch)
    monkeypatch.setattr(exact, "_RUNNERS", {})  # no runtime another test of this process opened
    with monkeypatch.context() as full:
        full.setattr(torch.onnx, "export", disk_full)
        m = bertscope.load(tiny_dirs["electra"], device="cpu")
    assert m.info().backend == "torch", "nothing exported: torch answers"
    calls: list[int] = []
    real = exact._measure
    monkeypatch.setattr(exact, "_measure", lambda *a: calls.append(1) or real(*a))
    again = bertscope.load(tiny_dirs["electra"], device="cpu")
    assert calls == [1], "a full disk says nothing of the model: its runtimes are measured again"
    assert again.exact_choice is not None
    measured = exact.read_measured(Path(again.exact_choice["measured"]), check_plausible=False)
    assert measured is not None and all(np.isfinite(way.max_abs) for way in measured), "each way exported"
