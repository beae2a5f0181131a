"""What the exact default and the runtime caches may reuse, and the load options that would go unread."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.backends import exact, onnx, recorded
from bertscope.backends.digest import content_digest
from bertscope.backends.fast import Measured
from bertscope.errors import BackendUnavailable, InvalidSpec


def test_the_model_code_a_folder_ships_is_part_of_its_digest(tmp_path: Path, monkeypatch: Any) -> None:
    """An edit to `auto_map` code changes the graph an export traced: another digest, so another export
    and measurement. A README is not the model."""
    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"auto_map": {"AutoModel": "modeling_my.MyBert"}}')
    (folder / "modeling_my.py").write_text("class MyBert: pass\n")
    first = content_digest(folder)
    (folder / "README.md").write_text("notes")
    assert content_digest(folder) == first
    (folder / "modeling_my.py").write_text("class MyBert: scale = 0.5\n")
    assert content_digest(folder) != first


class _Model:
    """Stands in for a Model: counts the runtimes opened for it."""

    def __init__(self) -> None:
        self.engine = type("E", (), {"runner": None})()
        self.opened = 0

    def use_onnxruntime(self) -> None:
        self.opened += 1
        self.engine.runner = object()


def test_an_opened_runtime_is_reused_only_at_the_threads_it_was_opened_with(monkeypatch: Any) -> None:
    monkeypatch.setattr(exact, "_RUNNERS", {})
    label = next(label for label in exact.exact_candidates() if exact._backend(label) == "onnxruntime")
    model = _Model()
    for threads in (2, 2, 1, 2, 1):
        monkeypatch.setattr(exact, "cpu_threads", lambda threads=threads: threads)
        exact._switch(model, label, "digest")
    assert model.opened == 2  # one runtime for 2 threads, one for 1


def test_a_chosen_runtime_that_cannot_be_imported_now_gives_way_to_the_next_fastest(
    bundled: bertscope.Model, monkeypatch: Any
) -> None:
    """The choice was measured (the session's `bundled` load); the runtime it names fails to import now
    (a broken install): the next fastest exact way runs, torch at the last, with no error."""
    from conftest import _session_cache

    original = exact._switch

    def no_runtimes(model: Any, label: str, digest: str) -> None:
        if exact._backend(label) is not None:
            raise BackendUnavailable(f"{label} needs a package that fails to import")
        original(model, label, digest)

    with _session_cache():
        model = bertscope.load(device="cpu", backend="torch")
        monkeypatch.setattr(exact, "_switch", no_runtimes)
        exact.choose_exact(model, record=False)
    assert model.engine.runner is None and model.info().backend == "torch"
    assert model.exact_choice["chosen"] == exact._TORCH


def test_a_runtime_that_fails_to_import_while_measuring_does_not_apply(
    bundled: bertscope.Model, monkeypatch: Any
) -> None:
    original = exact._switch

    def no_runtimes(model: Any, label: str, digest: str) -> None:
        if exact._backend(label) is not None:
            raise BackendUnavailable(f"{label} needs a package that fails to import")
        original(model, label, digest)

    monkeypatch.setattr(exact, "_switch", no_runtimes)
    model = bertscope.load(device="cpu", backend="torch")
    wanted = exact.exact_candidates()
    measured = exact._measure(model, wanted, onnx.calibration_texts(), "digest")
    gaps = {m.mode: m.max_abs for m in measured}
    assert gaps[exact._TORCH] == 0.0
    assert all(gap == float("inf") for label, gap in gaps.items() if label != exact._TORCH)


def test_an_upgraded_library_measures_the_exact_default_again(tmp_path: Path, monkeypatch: Any) -> None:
    """torch, transformers or a runtime reinstalled: whether each way is exact is measured again (the key
    reads the packages' file times, so no import and no metadata scan)."""
    stamp = tmp_path / "__init__.py"
    stamp.write_text("")
    from bertscope.backends import digest

    real = digest._installed_origin

    def found(name: str) -> str | None:  # onnxruntime "installed" as the stamp file
        return str(stamp) if name == "onnxruntime" else real(name)

    monkeypatch.setattr(digest, "_installed_origin", found)
    before = exact._measured_path("bert", "digest")
    assert exact._measured_path("bert", "digest") == before
    os.utime(stamp, ns=(1, 1))
    assert exact._measured_path("bert", "digest") != before


def test_info_forgets_a_recorded_runtime_uninstalled_since(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    recorded.remember(folder, {"backend": "openvino", "dtype": "float32"}, "cpu")
    assert recorded.recall(folder, "cpu") == {"backend": "openvino", "dtype": "float32"}
    real = importlib.util.find_spec
    gone = {"openvino"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name))
    assert recorded.recall(folder, "cpu") is None  # `info` loads the model, which chooses again


def test_a_whole_export_in_a_cache_that_cannot_be_written_is_still_used(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Copied without its times, a whole export is hashed again; where its record cannot be rewritten
    (a read-only cache) it is used all the same, and hashed again next time."""
    path = tmp_path / "model.onnx"
    path.write_bytes(b"graph bytes")
    onnx.record_export(path, {"bytes": path.stat().st_size, "mtime_ns": 1, "sha256": onnx.file_sha256(path)})

    def read_only(path: Path, about: dict[str, Any]) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(onnx, "record_export", read_only)
    assert onnx.cached_export(path) == path


@pytest.mark.parametrize("record", ["today's", "an older bertscope's (size and mtime)"])
def test_an_export_edited_in_place_with_its_time_set_back_is_hashed_and_refused(
    tmp_path: Path, record: str
) -> None:
    """Size and modification time kept (touch -r, cp -p, rsync --inplace) do not pass an edited export
    unhashed: its change time moved, so it is hashed, found changed and made again."""
    path = tmp_path / "model.onnx"
    path.write_bytes(b"graph bytes")
    stat = path.stat()
    older = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    stamp = onnx.export_stamp(path) if record == "today's" else older
    onnx.record_export(path, {"sha256": onnx.file_sha256(path), **stamp})
    if record == "today's":
        assert onnx.cached_export(path) == path
    before = path.stat()
    with path.open("r+b") as stream:  # one byte changed, the size kept
        stream.write(b"G")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    notes: list[str] = []
    assert onnx.cached_export(path, log=notes.append) is None
    assert "does not match its recorded size and SHA-256" in notes[0]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"calibration": ["a text"]}, "calibration="),
        ({"backend": "onnxruntime", "calibration": ["a text"]}, "calibration="),
        ({"backend": "openvino", "calibration": ["a text"]}, "int8_static"),
        ({"fast_min_cosine": 0.99}, "fast_min_cosine=0.99"),
        ({"backend": "torch", "remeasure": True}, "remeasure"),
        ({"quantize": "int8", "remeasure": True}, "remeasure"),
    ],
)
def test_an_option_the_others_leave_unread_is_refused(
    tiny_dirs: dict[str, Path], options: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidSpec, match=named):
        bertscope.load(tiny_dirs["bert"], device="cpu", **options)


def test_the_exact_gate_reads_texts_at_the_models_full_length(
    bundled: bertscope.Model, monkeypatch: Any
) -> None:
    """float32 drift grows with length: short sentences alone let a runtime through that passes 1e-5 on
    a 256-token text (OpenVINO, 1.12e-05 on the bundled model). The gate reads two full-length texts, and
    a way must stay a fifth under 1e-5 on them to be chosen."""
    seen: list[int] = []
    original = exact._all_hidden

    def recorded(model: Any, texts: list[str]) -> Any:
        seen.extend(len(t) for t in model.tokenize(texts))
        return original(model, texts)

    monkeypatch.setattr(exact, "_all_hidden", recorded)
    model = bertscope.load(device="cpu", backend="torch")
    exact._measure(model, {exact._TORCH: {}}, onnx.calibration_texts(), "digest")
    assert seen.count(model.max_tokens) >= 2  # two texts cut at the limit, beside the short ones
    ways = {exact._TORCH: {}, "close": {}, "closer": {}}
    measured = [
        Measured(mode, {}, speed, 1.0, 1.0, 1.0, gap)
        for mode, speed, gap in [(exact._TORCH, 1.0, 0.0), ("close", 3.0, 9e-6), ("closer", 2.0, 7e-6)]
    ]
    assert [m.mode for m in exact._exact_by_speed(measured, ways)] == ["closer", exact._TORCH]


def test_a_weight_file_rewritten_with_its_old_size_and_time_is_another_digest(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A fine-tuned checkpoint of the same shape, copied in with its modification time set back (`cp -p`,
    `tar -x`, `touch -r`), must not be taken for the weights hashed before: its export would be stale."""
    import os

    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    weights = folder / "model.safetensors"
    weights.write_bytes(b"\x01" * 4096)
    first = content_digest(folder)
    before = weights.stat()
    weights.write_bytes(b"\x02" * 4096)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert content_digest(folder) != first
