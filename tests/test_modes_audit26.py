"""Audit 26d: fast modes, bench and cache. `cache --clear` unlinks a link named as an unfinished export (never
following it) and counts only what it removed; ... Each cache is the test's own (the `cache` fixture's
BERTSCOPE_CACHE), its files written by hand."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pytest

import bertscope
from bertscope.backends.cache import cached_files
from bertscope.backends.onnx import EXPORT_FORMAT
from console import run_main
from test_cache_audit22 import DIGEST, _export  # the same stand-in export a cache holds


def test_clear_unlinks_a_link_named_as_an_unfinished_export_and_never_follows_it(
    cache: Path, tmp_path: Path
) -> None:
    _export(cache)
    outside = tmp_path / "outside" / "exp"
    outside.mkdir(parents=True)
    (outside / "keep.txt").write_text("x")
    link = cache / "onnx" / ".export-evil"
    link.symlink_to(outside)
    cleared = run_main("cache", "--clear")
    assert cleared.code == 0, cleared
    assert cleared.stderr.splitlines() == ["removed 2 cached files (1.0 kB)"]  # the export and the link
    assert not link.is_symlink() and (outside / "keep.txt").read_text() == "x"


def test_clear_counts_an_unfinished_export_it_could_not_remove_as_left_and_says_why(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _export(cache)
    tmp = cache / "onnx" / ".export-kr_2bh0j"
    tmp.mkdir()
    (tmp / "float32.onnx").write_bytes(b"\0" * 10)

    def refused(path: Path, *, ignore_errors: bool = False) -> None:
        if ignore_errors:
            return  # as rmtree does: the folder stays, said by nothing
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(path) / "float32.onnx"))

    monkeypatch.setattr(shutil, "rmtree", refused)
    cleared = run_main("cache", "--clear")
    assert cleared.code == 1, cleared
    assert cleared.stderr.strip() == (
        f"error: cannot clear the cache: {tmp} is read-only (Permission denied); 1 cached file removed "
        "before it"
    )
    assert [f.path for f in cached_files()] == [tmp]


def test_a_fast_bound_without_fast_reads_right_in_the_library_and_on_the_command_line(
    tiny_dirs: dict[str, Path],
) -> None:
    with pytest.raises(bertscope.InvalidSpec) as caught:
        bertscope.load(tiny_dirs["bert"], device="cpu", fast_min_cosine=0.99)
    assert str(caught.value) == (
        'fast_min_cosine applies to mode="fast" only; fast_min_cosine=0.99 is the bound (the least cosine to '
        'float32) that mode="fast" picks its runtime within: add mode="fast", or leave it out'
    )
    ran = run_main("embed", "hello", "--fast-min-cosine", "0.99")
    assert ran.code != 0 and ran.stdout == "", ran
    assert ran.stderr.strip() == (
        "error: --fast-min-cosine applies to --fast only; --fast-min-cosine 0.99 is the bound (the least "
        "cosine to float32) that --fast picks its runtime within: add --fast, or leave it out"
    )


def test_a_mode_is_spelled_as_quantize_spells_its_scheme_everywhere(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    from bertscope.backends import modes

    assert [name for name in modes.MODES if "int8_" in name] == [
        "int8_fused",
        "int8_static",
        "openvino-int8_static",
    ]
    assert modes.mode_name("Int8-Fused") == modes.mode_name("int8_fused") == "int8_fused"
    assert modes.mode_name("openvino-int8-static") == "openvino-int8_static"
    with pytest.raises(bertscope.InvalidSpec) as caught:
        modes.mode_name("int9")
    assert "int8_fused, int8_static, openvino-int8, openvino-int8_static" in str(caught.value)
    (report,) = modes.compare_modes(
        ["a cat", "a dog"], ["int8-fused"], model=tiny_dirs["bert"], time_it=False
    )
    assert report.mode == "int8_fused" and report.ran_as_asked()
    texts = cache.parent / "texts.txt"
    texts.write_text("a cat\na dog\n")
    ran = run_main(
        "bench", "-m", str(tiny_dirs["bert"]), "-i", str(texts), "--drift", "--modes", "int8-fused", "--json"
    )
    assert ran.code == 0, ran
    assert [row["mode"] for row in json.loads(ran.stdout)] == ["int8_fused"]
    ran = run_main("bench", "-m", str(tiny_dirs["bert"]), "--drift", "--modes", "int9")
    assert ran.code != 0 and ran.stderr.strip() == (
        f"error: --modes: unknown mode 'int9'; choose from: {', '.join(modes.MODES)}"
    )


@pytest.fixture
def no_bf16_nor_vnni(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU with AVX2 alone: no native bfloat16, no int8 dot products."""
    from bertscope.backends import runtimes
    from bertscope.core import cpu, loading

    for module in (cpu, loading, runtimes):
        monkeypatch.setattr(module, "cpu_flags", lambda: frozenset({"avx2", "fma"}))


@pytest.mark.usefixtures("no_bf16_nor_vnni")
def test_bench_names_each_slow_mode_as_typed_and_offers_a_mode(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    texts = cache.parent / "texts.txt"
    texts.write_text("a cat\na dog\n")
    asked = ("bench", "-m", str(tiny_dirs["bert"]), "-i", str(texts), "--drift", "--json")
    ran = run_main(*asked, "--modes", "bfloat16,openvino-bfloat16,int8")
    assert ran.code == 0, ran
    said = [line for line in ran.stderr.splitlines() if line.startswith("warning: this CPU")]
    assert said == [
        "warning: this CPU has no native bfloat16 (AVX-512 BF16 or AMX): --modes bfloat16 runs several times "
        "slower than float32 here; for speed on this CPU use --modes float32",
        "warning: this CPU has no native bfloat16 (AVX-512 BF16 or AMX), so OpenVINO runs --modes "
        "openvino-bfloat16 as float32 here; bertscope runs and records float32. For speed on this CPU use "
        "--modes float32",
        "warning: this CPU has no int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI or AMX): --modes "
        "int8 runs no faster than float32 here and drifts (min cosine ~0.99); use --modes float32",
    ]
    assert "--dtype" not in ran.stderr and "--fast" not in ran.stderr


@pytest.mark.usefixtures("no_bf16_nor_vnni")
def test_compare_modes_names_a_slow_mode_and_a_load_its_keywords(
    tiny_dirs: dict[str, Path], cache: Path
) -> None:
    from bertscope.backends.modes import compare_modes

    with pytest.warns(UserWarning) as caught:
        compare_modes(["a cat", "a dog"], ["int8_fused"], model=tiny_dirs["bert"], time_it=False)
    assert [str(w.message) for w in caught if "this CPU" in str(w.message)] == [
        "this CPU has no int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI or AMX): mode 'int8_fused' "
        "runs no faster than float32 here and drifts (min cosine ~0.99); use mode 'float32'"
    ]
    with pytest.warns(
        UserWarning, match=r"AMX\): dtype='bfloat16' runs .* use dtype='float32' \(the default\)$"
    ):
        bertscope.load(tiny_dirs["bert"], dtype="bfloat16", device="cpu")


@pytest.mark.parametrize("word", ["bundled", "default"])
def test_cache_refuses_a_word_for_the_bundled_model_where_a_model_folder_has_that_name(
    word: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export = _export(cache)
    here = tmp_path / "here"
    (here / word).mkdir(parents=True)
    (here / word / "config.json").write_text('{"model_type": "bert"}')
    monkeypatch.chdir(here)
    other = "default" if word == "bundled" else "bundled"
    for args in (("cache", "--clear", word),):  # a listing lists the bundled model, with a note
        ran = run_main(*args)
        assert ran.code == 1 and ran.stdout == "", ran
        assert ran.stderr.strip() == (
            f"error: `{word}` names the bundled model, and ./{word} here is a model folder too: give "
            f"`./{word}` for the folder, `{other}` for the bundled model"
        )
    assert export.is_file()
    assert run_main("cache", f"./{word}").code == 0  # the folder, named as one


def test_cache_labels_a_graph_the_drift_gate_refused(cache: Path) -> None:
    refused = cache / "onnx" / f"bert-{DIGEST}-int8-static-g5-o3-ccd65ea2c2a-v{EXPORT_FORMAT}.onnx"
    passed = cache / "onnx" / f"bert-{DIGEST}-int8-static-g5-o3-c745dffd245-v{EXPORT_FORMAT}.onnx"
    verdicts = {refused: (0.6678, 0.9982), passed: (0.9917, None)}
    for path, (cos_min, short_cos_min) in verdicts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 1000)
        verdict = {"cos_min": cos_min, "text": "Fuel", "short_cos_min": short_cos_min, "short_text": "x"}
        path.with_suffix(".json").write_text(json.dumps({"own_calibration_drift": {"s1-t256": verdict}}))
    kinds = {f.path: f.kind for f in cached_files()}
    gate = "ONNX export (refused by the drift gate, min cosine 0.6678)"
    assert kinds == {refused: gate, passed: "ONNX export"}
    listed = run_main("cache")
    assert listed.code == 0 and f"1 ONNX export, 1 {gate}" in listed.stdout, listed


def test_bench_on_a_device_this_machine_lacks_says_only_that(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ran = run_main("bench", "-m", str(tiny_dirs["bert"]), "--device", "cuda", "--drift")
    assert ran.code == 1 and ran.stdout == "", ran
    (line,) = ran.stderr.strip().splitlines()
    assert line.startswith("error: device 'cuda' asked, but torch ") and "sees no CUDA GPU here" in line
