"""`verify --against FILE`: a saved fingerprint that contradicts what `--save` writes (its canaries removed,
its id not the hash of its own settings and files) is refused as damaged in one line (exit 2), never an
"ok" nor a list of differences; a dict handed to `check_fingerprint` is compared on what it holds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.errors import InvalidInput
from bertscope.verify import check_fingerprint, read_fingerprint, save_fingerprint
from bertscope.verify.fingerprint import compare_fingerprints, fingerprint, store_fingerprint
from console import run_main

Made = dict[str, Any]


@pytest.fixture(scope="module")
def model(tiny_dirs: dict[str, Path]) -> Any:
    return bertscope.load(tiny_dirs["bert"], device="cpu")


@pytest.fixture(scope="module")
def saved(model: bertscope.Model, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fp") / "tiny.fingerprint.json"
    save_fingerprint(model, path)
    return path


def _edited(saved: Path, folder: Path, name: str, edit: Callable[[Made], None]) -> Path:
    made = json.loads(saved.read_text(encoding="utf-8"))
    edit(made)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(made), encoding="utf-8")
    return path


def _against(tiny_dirs: dict[str, Path], path: Path) -> Any:
    return run_main("verify", "-m", str(tiny_dirs["bert"]), "--device", "cpu", "--against", str(path))


def test_the_saved_file_passes(saved: Path, tiny_dirs: dict[str, Path], model: bertscope.Model) -> None:
    ran = _against(tiny_dirs, saved)
    made = json.loads(saved.read_text(encoding="utf-8"))
    assert ran.code == 0 and ran.stdout.startswith(f"ok: same fingerprint as {saved} (id {made['id']})"), ran
    assert read_fingerprint(saved)["id"] == made["id"]


EDITS: dict[str, tuple[Callable[[Made], None], str]] = {
    "canaries removed": (lambda f: f.pop("canaries"), "no canaries"),
    "id edited": (lambda f: f.update(id="0000000000000000"), "its id '0000000000000000' is not the hash"),
    "id removed": (lambda f: f.pop("id"), "no id"),
    # the file's settings no longer hash to its id: the file contradicts itself, it is not the model's drift
    "settings edited": (lambda f: f["settings"]["truncation"].update(max_tokens=512), "is not the hash"),
    "settings emptied": (lambda f: f.update(settings={}), "is not the hash"),
    "a file hash removed": (lambda f: f["files"].pop("config.json"), "is not the hash"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_self_contradicting_file_is_refused_as_damaged(
    edit: str, saved: Path, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    change, said = EDITS[edit]
    path = _edited(saved, tmp_path, edit.replace(" ", "-"), change)
    ran = _against(tiny_dirs, path)
    assert ran.code == 2 and ran.stderr.startswith("error:") and ran.stdout == "", ran
    assert "Traceback" not in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    line = " ".join(ran.stderr.split())
    assert f"{path} is a damaged fingerprint" in line and said in line, line
    with pytest.raises(InvalidInput, match="damaged fingerprint"):
        read_fingerprint(path)


def test_a_dict_is_compared_on_what_it_holds(model: bertscope.Model) -> None:
    """A store's fingerprint (no canaries) and a dict with files of the caller's choosing are the caller's
    own: compared, not refused."""
    assert check_fingerprint(model, store_fingerprint(model)).ok
    made = fingerprint(model)
    made["files"] = {**made["files"], "config.json": "0" * 64}
    check = check_fingerprint(model, made)
    assert [d.what for d in check.differences] == ["files.config.json"]


def test_an_empty_settings_difference_is_named_settings(model: bertscope.Model) -> None:
    found = fingerprint(model, with_canaries=False)
    what = [d.what for d in compare_fingerprints({"settings": {}, "files": found["files"]}, found)]
    assert what[0] == "settings" and "settings." not in what
    assert all(name == "settings" or name.startswith("settings.") and len(name) > 9 for name in what)
