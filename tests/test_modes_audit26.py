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

DIGEST = "0e8e6750365ca43ab91d"
EXPORT = f"bert-{DIGEST}-float32-v{EXPORT_FORMAT}.onnx"


def _export(cache: Path) -> Path:
    export = cache / "onnx" / EXPORT
    export.parent.mkdir(parents=True, exist_ok=True)
    export.write_bytes(b"\0" * 1000)
    export.with_suffix(".json").write_text("{}")
    return export


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
