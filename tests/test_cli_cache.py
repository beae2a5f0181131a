"""`bertscope cache`: a summary a person can read (a line per model content, the largest first, capped),
--all for every file, MODEL for one model's; in a cache of the test's own (BERTSCOPE_CACHE), never the
user's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertscope.backends.cache import by_model, cached_files, clear_cache
from bertscope.backends.digest import content_digest
from bertscope.backends.fast import FAST_FORMAT, Measured, graphs_key, write_measured
from bertscope.backends.onnx import EXPORT_FORMAT
from bertscope.backends.openvino import IR_FORMAT
from console import Ran, run_main

MODELS = 25  # more than the summary's 20


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)


def _model_files(cache: Path, digest: str, scale: int, family: str = "bert") -> None:
    """An export (with its record), an OpenVINO model and a measurement of one model content."""
    export = cache / "onnx" / f"{family}-{digest}-float32-v{EXPORT_FORMAT}.onnx"
    _write(export, 1000 * scale)
    export.with_suffix(".json").write_text("{}")
    _write(
        cache / "openvino" / f"{family}-{digest}-float32-v{EXPORT_FORMAT}-int8-weights-ir{IR_FORMAT}.xml", 10
    )
    # a measurement a load reads (this format, this bertscope's plausible figures): not flagged unused
    write_measured(
        cache / "fast" / f"{family}-{digest}-a4e7276895b3-a2b8cdd4-f{FAST_FORMAT}-{graphs_key()}.json",
        [Measured("torch float32", {}, 100.0, 1.0, 1.0, 1.0)],
    )


@pytest.fixture
def filled(cache: Path, tmp_path: Path) -> dict[str, Path]:
    """25 model contents, each its own folder (content digest recorded), sizes 1 to 25 kB of exports."""
    folders = {}
    for n in range(1, MODELS + 1):
        folder = tmp_path / f"model-{n:02d}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": "bert", "n": n}))
        digest = content_digest(folder)  # remembered in this cache: `cache` names the folder
        _model_files(cache, digest, scale=n)
        folders[digest] = folder
    return folders


def _largest_first(ran: Ran) -> list[str]:
    """The model contents of the summary table, in the order shown."""
    return [line.split()[1] for line in ran.stdout.splitlines() if line.startswith("│")]


def test_the_summary_is_a_line_per_model_the_largest_first_and_capped(filled: dict[str, Path]) -> None:
    ran = run_main("cache")
    assert ran.code == 0, ran
    shown = _largest_first(ran)
    by_size = sorted(filled, key=lambda d: -int(filled[d].name.split("-")[1]))
    assert shown == by_size[:20]
    assert (
        "3 ONNX export" not in ran.stdout
        and "1 ONNX export, 1 OpenVINO model, 1 runtime measurement" in ran.stdout
    )
    # the folder seen with the largest (a long path is cut to fit the line)
    seen = ran.stdout.splitlines()[3].split("│")[5].strip().rstrip("…")
    assert len(seen) > 20 and str(filled[shown[0]]).startswith(seen)
    said = ran.stderr.splitlines()
    assert said[0].startswith(f"{3 * MODELS} files of {MODELS} models, ")
    assert said[1].startswith("... and 5 more (") and said[1].endswith("; --all lists every one")
    assert all(filled[d].name not in ran.stdout for d in by_size[20:])


def test_all_lists_every_model_and_file(filled: dict[str, Path]) -> None:
    ran = run_main("cache", "--all")
    assert ran.code == 0, ran
    for digest, folder in filled.items():
        assert f"{digest} (bert): " in ran.stdout and f"  {folder}\n" in ran.stdout
        assert f"bert-{digest}-float32-v{EXPORT_FORMAT}.onnx" in ran.stdout
    assert ran.stdout.count("model folders seen (1):") == MODELS
    assert "more" not in ran.stderr and ran.stderr.startswith(f"{3 * MODELS} files of {MODELS} models")


def test_a_model_lists_only_its_own_files(filled: dict[str, Path]) -> None:
    digest, folder = next(iter(filled.items()))
    ran = run_main("cache", str(folder))
    assert ran.code == 0, ran
    assert f"{digest} (bert): " in ran.stdout and f"  {folder}\n" in ran.stdout
    others = [d for d in filled if d != digest]
    assert not any(d in ran.stdout for d in others)
    assert ran.stderr.startswith("3 files of 1 model, ")
    data = json.loads(run_main("cache", str(folder), "--json").stdout)
    assert {Path(f["path"]).name.split("-")[1] for f in data["files"]} == {digest}
    assert [m["digest"] for m in data["models"]] == [digest] and data["models"][0]["folders"] == [str(folder)]


def test_json_lists_everything_uncapped(filled: dict[str, Path]) -> None:
    data = json.loads(run_main("cache", "--json").stdout)
    assert len(data["files"]) == 3 * MODELS and len(data["models"]) == MODELS
    sizes = [m["bytes"] for m in data["models"]]
    assert sizes == sorted(sizes, reverse=True)


def test_clear_keeps_its_meaning_and_all_is_refused_beside_it(filled: dict[str, Path], cache: Path) -> None:
    digest, folder = next(iter(filled.items()))
    refused = run_main("cache", "--clear", "--all")
    assert refused.code == 1 and "--all lists every model" in refused.stderr
    assert len(cached_files()) == 3 * MODELS  # nothing removed
    assert run_main("cache", str(folder), "--all").code == 1
    removed = json.loads(run_main("cache", "--clear", str(folder), "--json").stdout)["removed"]
    assert len(removed) == 3 and {r["digest"] for r in removed} == {digest}
    assert not list(cache.glob(f"*/*{digest}*"))  # the export's record went with it
    assert run_main("cache", str(folder)).stderr.startswith(f"no cached files of {folder} (content {digest})")
    assert run_main("cache", "--clear").code == 0 and cached_files() == []
    assert run_main("cache").stderr.startswith("no cached files in ")


def test_a_model_that_is_no_folder_is_refused(cache: Path, tmp_path: Path) -> None:
    hub_id = run_main("cache", "some-model")
    assert hub_id.code == 2 and "not a local folder" in hub_id.stderr
    missing = run_main("cache", str(tmp_path / "nowhere"))
    assert missing.code == 1 and "no model folder at" in missing.stderr
    (tmp_path / "empty").mkdir()  # a folder of no model: its digest was the SHA-256 of nothing
    for args in (("cache",), ("cache", "--clear")):
        empty = run_main(*args, str(tmp_path / "empty"))
        assert empty.code == 1 and "holds no config.json, so it is no model folder" in empty.stderr


def test_files_group_by_content_with_older_formats_counted_apart(cache: Path) -> None:
    digest = "0123456789abcdef0123"
    _model_files(cache, digest, scale=2, family="roberta")
    _write(cache / "onnx" / f"roberta-{digest}-float32-v1.onnx", 300)  # an older bertscope's
    (model,) = by_model(cached_files())
    measured = next((cache / "fast").glob("*.json")).stat().st_size
    assert model.digest == digest and model.family == "roberta"
    assert model.bytes == 2000 + 2 + 10 + measured + 300
    assert model.holds() == (
        "1 ONNX export, 1 ONNX export (older bertscope, unused), 1 OpenVINO model, 1 runtime measurement"
    )
    assert [f.bytes for f in model.files] == sorted((f.bytes for f in model.files), reverse=True)


@pytest.mark.parametrize("family", ["xlm-roberta", "deberta-v2"])
def test_a_family_named_with_a_hyphen_is_listed_and_cleared_per_model(cache: Path, family: str) -> None:
    digest, other = "0123456789abcdef0123", "fedcba98765432100123"
    _model_files(cache, digest, scale=2, family=family)
    _model_files(cache, other, scale=1)
    models = {m.digest: m for m in by_model(cached_files())}
    assert set(models) == {digest, other} and models[digest].family == family
    assert len(clear_cache(digest)) == 3  # what `bertscope cache --clear MODEL` removes
    assert [m.digest for m in by_model(cached_files())] == [other]


def test_a_tilde_in_bertscope_cache_is_the_home_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bertscope.backends.recorded import cache_root

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BERTSCOPE_CACHE", "~/bscache")
    assert cache_root() == tmp_path / "bscache"
