"""Audit 17: the runtimes' measurements and caches (backends/fast.py, exact.py, onnx.py, cut_cache.py; the
command line's --remeasure, `cache` and `bench`). Tiny models only, each test in its own BERTSCOPE_CACHE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.backends import fast
from bertscope.cli import app
from bertscope.cli.wording import as_flags
from bertscope.core.cpu import machine_key
from tiny_models import measure_like_a_real_model


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh BERTSCOPE_CACHE for one test."""
    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _kept_figures(cache: Path) -> Path:
    """Another model's measurement of this machine, as a load writes it: what --remeasure must not lose."""
    folder = cache / "fast"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"bert-0123456789abcdef-{machine_key()}-exact-f3.json"
    path.write_text('{"measured": []}', encoding="utf-8")
    return path


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


# 1. --remeasure forgets nothing before the command's options are accepted, and only this model's ------


def test_a_refused_remeasure_forgets_nothing(tiny_dirs: dict[str, Path], cache: Path, tmp_path: Path) -> None:
    kept = _kept_figures(cache)
    tiny = str(tiny_dirs["bert"])
    for args in (
        ["-m", str(tmp_path / "no-such-folder")],  # a folder that is not there
        ["-m", tiny, "--fast", "--dtype", "bfloat16"],  # --fast picks the dtype itself
        ["-m", tiny, "--quantize", "int8"],  # names the runtime: nothing is measured
    ):
        result = _invoke("embed", "a cat", "--device", "cpu", "--remeasure", "-q", *args)
        assert result.exit_code != 0 and isinstance(result.exception, bertscope.BertscopeError), args
        assert kept.exists(), args


def test_remeasure_where_nothing_is_measured_is_refused_in_one_line(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    """Another dtype runs torch, unmeasured: remeasure=True was ignored in silence (exit 0, every figure
    deleted); library and command line refuse it, naming why."""
    kept = _kept_figures(cache)
    for options in ({"dtype": "bfloat16"}, {}):  # the tiny model: under MIN_PARAMETERS, torch runs
        with pytest.raises(bertscope.InvalidSpec, match="remeasure=True") as caught:
            bertscope.load(tiny_dirs["bert"], device="cpu", remeasure=True, **options)
        assert "\n" not in str(caught.value) and "leave remeasure out" in str(caught.value)
    result = _invoke("embed", "a cat", "-m", str(tiny_dirs["bert"]), "--remeasure", "--dtype", "bfloat16")
    assert isinstance(result.exception, bertscope.InvalidSpec)  # main() says it in one line, as flags:
    said = as_flags(str(result.exception))
    assert "--remeasure times" in said and "only float32" in said and "leave --remeasure out" in said
    assert kept.exists()


def test_remeasure_measures_this_model_again_and_keeps_the_others(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch_only = {"torch float32": fast.candidates("cpu")["torch float32"]}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(torch_only))
    timed: list[int] = []
    real = fast.measure
    monkeypatch.setattr(fast, "measure", lambda ways, texts, **kw: timed.append(1) or real(ways, texts, **kw))
    bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast")
    assert len(timed) == 2  # the timed rows and the held-out ones
    kept = _kept_figures(cache)
    tiny = str(tiny_dirs["bert"])
    result = _invoke("embed", "a cat", "-m", tiny, "--device", "cpu", "--fast", "--remeasure")
    assert result.exit_code == 0, (result.output, result.exception)
    assert len(timed) == 4 and kept.exists()


# 2. A cache cleared under a running process: the export is made again, as a new process makes it -------


def test_a_cleared_cache_under_a_loaded_model_is_exported_again(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    """`bertscope cache --clear` under a server: early stop raised FileNotFoundError (a 500) on every retry,
    the whole graph ONNX Runtime's raw NoSuchFile."""
    import shutil

    import numpy as np

    m = bertscope.load(tiny_dirs["bert"], device="cpu", backend="onnxruntime")
    first = m.embed(["a cat"], layers="1").vectors  # opens the graph cut at layer 1 alone
    shutil.rmtree(cache, ignore_errors=True)
    reference = bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch").embed(["a cat"]).vectors
    np.testing.assert_allclose(m.embed(["a cat"]).vectors, reference, atol=1e-5)  # the whole graph
    shutil.rmtree(cache, ignore_errors=True)
    np.testing.assert_allclose(m.embed(["a cat"], layers="1").vectors, first, atol=1e-6)  # cached cut, in use
    shutil.rmtree(cache, ignore_errors=True)
    assert m.embed(["a cat"], layers="-2").vectors.shape == first.shape  # a cut not open yet


def test_a_cleared_int8_graph_is_refused_in_one_line(tiny_dirs: dict[str, Path], cache: Path) -> None:
    import shutil

    m = bertscope.load(tiny_dirs["bert"], device="cpu", quantize="int8")
    m.embed(["a cat"], layers="1")
    shutil.rmtree(cache, ignore_errors=True)
    with pytest.raises(bertscope.ModelLoadError, match="removed from the cache.*load the model again") as e:
        m.embed(["a cat"])
    assert "\n" not in str(e.value)


# 3. --fast's first measurement says nothing of its own timing texts' cut -------------------------------


def test_measuring_fast_modes_says_no_cut_of_its_own_texts(
    tiny_dirs: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a 64-token model the timing texts (calibration sentences joined in fours) run past the limit: a
    first --fast load warned '162 of 400 text(s) ran past the model's 64 tokens', as if the user's."""
    import warnings

    torch_only = {"torch float32": fast.candidates("cpu")["torch float32"]}
    monkeypatch.setattr(fast, "candidates", lambda device: dict(torch_only))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = bertscope.load(tiny_dirs["bert"], device="cpu", mode="fast")
    assert m.fast_choice is not None and m.max_tokens == 64
    assert not [w for w in caught if issubclass(w.category, bertscope.TruncatedTextsWarning)]
    with pytest.warns(bertscope.TruncatedTextsWarning):  # the user's own cut is still said
        m.embed(["word " * 200])


# 5. A read-only cache that holds the exact default's measurement and export is read, not refused --------


def test_a_read_only_cache_that_holds_everything_is_read(
    tiny_dirs: dict[str, Path],
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The exact default said 'cannot write the cache folder .../fast (Read-only file system); running
    torch' (and imported torch) though its measurement and export were there."""
    from bertscope.backends import exact
    from bertscope.errors import ModelLoadError

    measure_like_a_real_model(monkeypatch)
    first = bertscope.load(tiny_dirs["bert"], device="cpu").exact_choice
    assert first is not None and "measured" in first

    def read_only(*args: Any, **kwargs: Any) -> Any:
        raise ModelLoadError(f"cannot write the cache folder {cache} (Read-only file system)")

    monkeypatch.setattr(exact, "writable_folder", read_only)
    monkeypatch.setattr(exact, "FileLock", read_only)  # a lock file cannot be made there either
    capsys.readouterr()
    again = bertscope.load(tiny_dirs["bert"], device="cpu")
    assert again.exact_choice == first and "cannot write" not in capsys.readouterr().err
    (cache / "fast" / Path(first["measured"]).name).unlink()  # a measurement to take: only then refused
    assert bertscope.load(tiny_dirs["bert"], device="cpu").exact_choice == {
        "chosen": exact._TORCH,
        "why": "the cache folder cannot be written",
    }
    assert "cannot write the cache folder" in capsys.readouterr().err


# 4. Low: the exact default's damaged file is its own; `cache` counts an OpenVINO model once; one spelling --


def test_a_damaged_exact_measurement_is_said_as_the_exact_defaults(
    tiny_dirs: dict[str, Path],
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was said as 'fast mode: the measurements in ...-exact-...json cannot be used', no --fast asked."""

    measure_like_a_real_model(monkeypatch)
    path = Path(bertscope.load(tiny_dirs["bert"], device="cpu").exact_choice["measured"])  # type: ignore[index]
    path.write_text("not json", encoding="utf-8")
    capsys.readouterr()
    bertscope.load(tiny_dirs["bert"], device="cpu")
    said = capsys.readouterr().err
    assert f"exact default: the measurements in {path} cannot be used (not JSON)" in said
    assert "fast mode" not in said


def test_an_openvino_model_is_one_row_of_the_cache(cache: Path) -> None:
    """Its graph (.xml) and weights (.bin) were two rows, '4 OpenVINO models' for 2."""
    from bertscope.backends.cache import cached_files, clear_cache

    stem = "bert-0123456789abcdef0123-float32-v2-int8-weights-ir3"
    folder = cache / "openvino"
    folder.mkdir(parents=True)
    sizes = {".xml": 10, ".bin": 100, ".json": 1}
    for suffix, size in sizes.items():
        (folder / f"{stem}{suffix}").write_bytes(b"\0" * size)
    (folder / "bert-0123456789abcdef0123-float32-v2-ir3.xml").write_bytes(b"\0" * 5)  # float32's, no weights
    (row,) = [f for f in cached_files() if f.path.name == f"{stem}.xml"]
    assert row.bytes == sum(sizes.values()) and len(cached_files()) == 2
    result = _invoke("cache", "--all")
    assert result.exit_code == 0 and "2 OpenVINO models" in result.output and ".bin" not in result.output
    clear_cache("0123456789abcdef0123")
    assert not list(folder.iterdir())


def test_bench_spells_modes_as_quantize_does(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its help said int8_static (as --quantize spells it); its table, JSON and unknown-mode error said
    int8-static."""
    import json

    from bertscope.backends import modes
    from console import run_main

    def compare(texts: Any, names: list[str], **kwargs: Any) -> list[Any]:
        figures = {"n_texts": 8, "seconds": 1.0, "texts_per_s": 8.0, "vs_float32": 1.0}
        return [modes.ModeReport(n, **figures, cos_min=0.99, cos_mean=0.999, max_abs=0.1) for n in names]

    monkeypatch.setattr(modes, "compare_modes", compare)
    asked = ("bench", "-m", str(tiny_dirs["bert"]), "--drift", "--modes")
    ran = run_main(*asked, "int8_fused,openvino-int8-static", "--json")  # the library's spelling is read too
    assert ran.code == 0, ran
    assert [row["mode"] for row in json.loads(ran.stdout)] == ["int8_fused", "openvino-int8_static"]
    ran = run_main(*asked, "int8-static")
    assert ran.code == 0 and "int8_static" in ran.stdout and "int8-static" not in ran.stdout
    ran = run_main(*asked, "int9")
    assert ran.code != 0 and "unknown mode 'int9'" in ran.stderr and "openvino-int8_static" in ran.stderr
    assert "int8-static" not in ran.stderr and "\n" not in ran.stderr.strip()


def test_remeasure_is_once_per_model_and_mode_and_never_for_a_facts_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review of 07acb62: one boolean let the first load of a command (embed --stride's check of the model's
    limit) use --remeasure up, so the command's own --fast load did not measure again."""
    import importlib

    import bertscope.model

    cli_app = importlib.import_module("bertscope.cli.app")  # the module (bertscope.cli.app is the Typer app)

    asked: list[bool] = []
    monkeypatch.setattr(bertscope.model, "load", lambda *a, **k: asked.append(k["remeasure"]))
    monkeypatch.setitem(cli_app._state, "remeasure", True)
    monkeypatch.setattr(cli_app, "_remeasured", set())
    cli_app.load_model("m", facts_only=True)  # the limit read before a job: measures nothing
    cli_app.load_model("m", fast=True)
    cli_app.load_model("m", fast=True)  # the same model and mode again: its figures are fresh
    cli_app.load_model("m")  # the exact default of the same model: measured once too
    assert asked == [False, True, False, True]


def test_embed_refuses_a_layer_the_model_has_not_before_it_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """`embed --remeasure --layers 99` timed the exact default (~30 s) before the layer was refused."""
    import importlib

    from console import run_main

    embed_module = importlib.import_module("bertscope.cli.embed")

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the layer is checked before any load")

    monkeypatch.setattr(embed_module, "load_model", no_load)
    ran = run_main("embed", "a cat", "--layers", "99", "--remeasure")
    assert ran.code == 1 and "layer 99 does not exist; layers are 0..6" in ran.stderr
