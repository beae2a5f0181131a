"""Audit 19e/19f: an install without torch, attention's notes, and the command line's shared helpers say
what is so, and what to do, in one line."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from bertscope.backends.digest import installed_key
from bertscope.core.loading import TORCH_PIN, open_light
from bertscope.errors import BackendUnavailable
from console import run_main

ROOT = Path(__file__).resolve().parent.parent


def test_the_torch_named_is_the_one_the_makefile_installs() -> None:
    assert re.search(rf"^TORCH_VERSION := {re.escape(TORCH_PIN)}$", (ROOT / "Makefile").read_text(), re.M)


def test_a_blocked_torch_stamps_the_same_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded exact-runtime choice is found where torch cannot be imported (it stamped '-' and was
    missed, so the load measured again, which needs torch)."""
    key = installed_key()
    monkeypatch.setitem(sys.modules, "torch", None)
    assert installed_key() == key


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_a_light_model_without_torch_says_what_to_install(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    loaded = open_light(tiny_dirs["bert"])
    assert loaded is not None
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(BackendUnavailable, match=rf"needs the model's PyTorch module, and {missing} is not"):
        loaded.model  # noqa: B018
    if missing == "torch":
        with pytest.raises(BackendUnavailable, match=rf"pip install 'torch=={re.escape(TORCH_PIN)}'"):
            loaded.model  # noqa: B018


def test_a_command_that_needs_torch_without_it_is_one_line(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    ran = run_main("embed", "a cat", "-m", str(tiny_dirs["bert"]), "--backend", "torch")
    assert ran.code == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"error: this command needs the model's PyTorch module, and torch is not installed here: pip install "
        f"'torch=={TORCH_PIN}' (the version bertscope's Makefile installs)"
    ]
