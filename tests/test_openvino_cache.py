"""OpenVINO's cached int8 IR is checked as the ONNX exports are (a damaged one is made again, never
trusted), an unwritable cache is one clear error, and its options are spelled as every other option."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bertscope
from bertscope.backends import openvino as ov_backend
from bertscope.backends.fast import load_fast
from bertscope.backends.openvino import resolve_precision
from bertscope.core._enums import Backend, Quantize
from bertscope.errors import InvalidSpec, ModelLoadError

pytest.importorskip("openvino")
pytest.importorskip("nncf")

TEXTS = ["a small test sentence", "another one, a little longer than the first one"]


def _int8(folder: Path, quantize: str = "int8") -> bertscope.Model:
    return bertscope.load(folder, device="cpu", backend="openvino", quantize=quantize)


@pytest.fixture(scope="module")
def made(tiny_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A cache holding the tiny BERT's export and int8 IR (for tests to copy), and the vectors it gives."""
    folder = tmp_path_factory.mktemp("openvino-int8") / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTSCOPE_CACHE", str(folder))
        return folder, _int8(tiny_dirs["bert"]).embed(TEXTS).vectors


def _damage(xml: Path, damage: str) -> None:
    weights = xml.with_suffix(".bin")
    data = bytearray(weights.read_bytes())
    if damage == "truncated bin":  # a copy cut short: OpenVINO itself refused it with a C++ error
        weights.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "flipped bin":  # the same size, other bytes: only the SHA-256 can tell
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
        weights.write_bytes(bytes(data))
    elif damage == "edited xml":
        xml.write_text(xml.read_text(encoding="utf-8") + "<!-- edited -->\n", encoding="utf-8")
    else:
        xml.with_suffix(".json").unlink()


@pytest.mark.parametrize("damage", ["truncated bin", "flipped bin", "edited xml", "no record"])
def test_a_damaged_ir_is_made_again_and_never_trusted(
    damage: str,
    made: tuple[Path, np.ndarray],
    cache: Path,
    tiny_dirs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copytree(made[0], cache)  # copy2 keeps the times the record checks
    (xml,) = (cache / "openvino").glob("*-int8-weights-*.xml")
    _damage(xml, damage)
    capsys.readouterr()
    again = _int8(tiny_dirs["bert"])
    said = capsys.readouterr().err
    assert "compressing the model's weights to int8" in said
    if damage != "no record":
        assert "does not match its recorded size and SHA-256; making it again" in said
    assert np.abs(again.embed(TEXTS).vectors - made[1]).max() <= 1e-6

    def refuse(*_: object) -> None:
        raise AssertionError("quantized again although the IR was made again and recorded")

    monkeypatch.setattr(ov_backend, "_compress_weights", refuse)
    np.testing.assert_array_equal(_int8(tiny_dirs["bert"]).embed(TEXTS).vectors, again.embed(TEXTS).vectors)
    assert "does not match" not in capsys.readouterr().err


def test_a_copied_ir_is_trusted_by_its_sha256(
    made: tuple[Path, np.ndarray], cache: Path, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(made[0], cache, copy_function=shutil.copy)  # new times, the same bytes

    def refuse(*_: object) -> None:
        raise AssertionError("quantized again although the IR is whole")

    monkeypatch.setattr(ov_backend, "_compress_weights", refuse)
    np.testing.assert_array_equal(_int8(tiny_dirs["bert"]).embed(TEXTS).vectors, made[1])


@pytest.mark.skipif(
    not Path("/proc/self").is_dir(), reason="needs /proc: a folder no one can write, root too"
)
def test_int8_on_an_unwritable_cache_folder_says_to_set_bertscope_cache(
    made: tuple[Path, np.ndarray], cache: Path, tiny_dirs: dict[str, Path]
) -> None:
    shutil.copytree(made[0], cache, ignore=shutil.ignore_patterns("openvino"))  # the export alone
    (cache / "openvino").symlink_to("/proc")  # there, but takes no file (chmod would not stop root)
    with pytest.raises(ModelLoadError, match=r"cannot write the cache folder .*set BERTSCOPE_CACHE"):
        _int8(tiny_dirs["bert"])


@pytest.mark.parametrize(
    ("dtype", "quantize", "precision"),
    [
        ("Float32", None, "float32"),
        ("FLOAT32", "INT8", "int8"),
        ("float32", "int8-static", "int8_static"),
        (" float32 ", "Int8_Static", "int8_static"),
        ("float32", "NONE", "float32"),
        (torch.float32, Quantize.INT8, "int8"),
    ],
)
def test_openvino_reads_dtype_and_quantize_as_every_option_is_read(
    dtype: Any, quantize: str | None, precision: str
) -> None:
    assert resolve_precision(dtype, quantize, "cpu") == precision


@pytest.mark.parametrize(
    ("dtype", "quantize", "needle"),
    [
        ("Float16", None, "dtype='float16' needs backend='torch'"),
        ("torch.float32", None, "unknown dtype"),
        ("float32", "int 8", "unknown quantize"),
        ("float32", "INT8-FUSED", "is an ONNX Runtime graph"),
        ("BFloat16", "int8", "leave dtype out"),
    ],
)
def test_openvino_refuses_what_no_other_option_accepts(dtype: str, quantize: str | None, needle: str) -> None:
    with pytest.raises(InvalidSpec, match=needle):
        resolve_precision(dtype, quantize, "cpu")


def test_a_load_spelled_in_capitals_runs_openvino_int8(
    made: tuple[Path, np.ndarray], cache: Path, tiny_dirs: dict[str, Path]
) -> None:
    shutil.copytree(made[0], cache)
    m = _int8(tiny_dirs["bert"], quantize="INT8")
    assert (m.info().backend, m.info().quantize) == ("openvino", "int8")
    np.testing.assert_array_equal(m.embed(TEXTS).vectors, made[1])


class _Built(Exception):
    """Raised by the build given to load_fast: its options were accepted."""


def _build(_: torch.dtype) -> Any:
    raise _Built


@pytest.mark.parametrize(
    "asked",
    [
        {"backend": "AUTO"},
        {"quantize": "NONE"},
        {"dtype": "Float32"},
        {"backend": Backend.AUTO, "dtype": torch.float32},
    ],
)
def test_fast_mode_reads_its_options_as_load_does(asked: dict[str, Any]) -> None:
    options = {"dtype": "float32", "backend": "auto", "quantize": None, **asked}
    with pytest.raises(_Built):
        load_fast(options, device=torch.device("cpu"), min_cosine=0.99, calibration=None, build=_build)


@pytest.mark.parametrize(
    ("asked", "needle"),
    [
        ({"backend": "Torch"}, "picks the backend, dtype and quantize itself"),
        ({"quantize": "INT8"}, "picks the backend, dtype and quantize itself"),
        ({"dtype": torch.bfloat16}, "picks the backend, dtype and quantize itself"),
        ({"backend": "gpu"}, "unknown backend"),
    ],
)
def test_fast_mode_refuses_options_it_picks_itself(asked: dict[str, Any], needle: str) -> None:
    options = {"dtype": "float32", "backend": "auto", "quantize": None, **asked}
    with pytest.raises(InvalidSpec, match=needle):
        load_fast(options, device=torch.device("cpu"), min_cosine=0.99, calibration=None, build=_build)


def test_bertscope_cache_counts_an_irs_record_with_its_weights(
    made: tuple[Path, np.ndarray], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bertscope cache` lists an OpenVINO model's record with its weights, not as a model of its own, and
    clearing the model removes the record too."""
    from bertscope.backends.cache import cached_files, clear_cache

    cache = shutil.copytree(made[0], tmp_path / "cache")
    monkeypatch.setenv("BERTSCOPE_CACHE", str(cache))
    weights = next((cache / "openvino").glob("*.bin"))
    rows = [f for f in cached_files() if f.path.parent.name == "openvino"]
    assert {f.path.suffix for f in rows} == {".xml"}  # one model, one row: its graph, weights and record
    row = next(f for f in rows if f.path == weights.with_suffix(".xml"))
    parts = (weights, weights.with_suffix(".xml"), weights.with_suffix(".json"))
    assert row.bytes == sum(p.stat().st_size for p in parts)
    clear_cache(row.digest)
    assert not list((cache / "openvino").glob("*.json"))
