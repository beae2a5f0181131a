"""One torch-backed Model shared by threads: each forward stops early on a view of the module, never by
changing the module, so threads asking different layers at once get the vectors a serial call gets
(core/families.py `stopped_after`, core/engine.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope

TEXTS = ["the storm hit the coast and the boats stayed in", "a cat sat on the mat"]
THREADS = 8


def _layers_run(model: bertscope.Model) -> int:
    """The layers the shared module runs (ALBERT: the times its one layer group is applied)."""
    engine = model.engine
    module = engine.model
    if engine.family.name == "albert":
        return int(module.encoder.config.num_hidden_layers)
    return len(module.get_submodule(engine.family.layers_path))


def _embeddings(model: bertscope.Model) -> Any:
    """The embedding layer, which every forward runs first (inside the early stop, whatever the family)."""
    engine = model.engine
    return engine.model.get_submodule(engine.family.embeddings_attr or "")


def _threaded(model: bertscope.Model, asked: list[str]) -> list[np.ndarray]:
    """Each thread embeds with its layer spec; every thread waits inside its forward (at the embedding
    layer) until all of them are there, so the forwards overlap whatever the scheduler does."""
    barrier = threading.Barrier(len(asked), timeout=120)
    arrived = threading.local()

    def meet(_module: Any, _args: Any) -> None:
        if getattr(arrived, "done", False):  # once per thread
            return
        arrived.done = True
        barrier.wait()

    answers: list[Any] = [None] * len(asked)

    def run(i: int) -> None:
        try:
            answers[i] = model.embed(TEXTS, layers=asked[i]).vectors
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            answers[i] = e
            barrier.abort()

    handle = _embeddings(model).register_forward_pre_hook(meet)
    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(asked))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        handle.remove()
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers


def _check_threads_match_serial(model: bertscope.Model, specs: list[str]) -> None:
    n_layers = model.engine.n_layers
    serial = {spec: model.embed(TEXTS, layers=spec).vectors for spec in set(specs)}
    asked = [specs[i % len(specs)] for i in range(THREADS)]
    for answer, spec in zip(_threaded(model, asked), asked, strict=True):
        np.testing.assert_allclose(answer, serial[spec], rtol=0, atol=1e-6, err_msg=f"layers={spec}")
    assert _layers_run(model) == n_layers  # the module keeps every layer
    for spec in set(specs):  # and serial calls after the threads answer as before
        np.testing.assert_allclose(model.embed(TEXTS, layers=spec).vectors, serial[spec], rtol=0, atol=1e-6)


def test_bundled_torch_threads_asking_different_layers() -> None:
    model = bertscope.load(backend="torch", device="cpu")
    assert isinstance(model, bertscope.Model)
    assert model.engine.runner is None  # the torch forward, the one that stops early
    _check_threads_match_serial(model, ["1", "2", "3", "4", "5", "-1", "0", "2,4"])


@pytest.mark.parametrize("family", ["modernbert", "albert"])
def test_tiny_torch_threads_asking_different_layers(tiny_dirs: dict[str, Path], family: str) -> None:
    model = bertscope.load(tiny_dirs[family], backend="torch", device="cpu")
    assert isinstance(model, bertscope.Model)
    assert model.engine.runner is None
    _check_threads_match_serial(model, ["1", "-1"])


def test_stopped_after_leaves_the_module_whole(tiny_models: dict[str, bertscope.Model]) -> None:
    """The early stop is a view: the module and its config are as they were, whatever the family."""
    for family, model in tiny_models.items():
        if not isinstance(model, bertscope.Model) or model.engine.n_layers < 2:
            continue
        engine = model.engine
        module = engine.model
        n_config = module.config.num_hidden_layers
        named = dict(module.named_modules())
        view = engine.family.stopped_after(module, 1)
        assert view is not module, family
        assert _layers_run(model) == engine.n_layers, family
        assert module.config.num_hidden_layers == n_config, family
        assert dict(module.named_modules()) == named, family
        assert engine.family.stopped_after(module, engine.n_layers) is module, family


def test_an_error_inside_a_stopped_forward_leaves_the_model_working(tiny_dirs: dict[str, Path]) -> None:
    model = bertscope.load(tiny_dirs["modernbert"], backend="torch", device="cpu")
    assert isinstance(model, bertscope.Model)
    before = model.embed(TEXTS, layers="1").vectors

    def fail(_module: Any, _args: Any) -> None:
        raise RuntimeError("inside the forward")

    handle = _embeddings(model).register_forward_pre_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="inside the forward"):
            model.embed(TEXTS, layers="1")
    finally:
        handle.remove()
    assert _layers_run(model) == model.engine.n_layers
    assert model.engine.model.final_norm.__class__.__name__ != "Identity"
    np.testing.assert_allclose(model.embed(TEXTS, layers="1").vectors, before, rtol=0, atol=1e-6)
    model.embed(TEXTS, layers="-1")


def test_the_module_is_shared_only_once_warm(tiny_dirs: dict[str, Path]) -> None:
    """The lazily loaded module is loaded once, and no other thread sees it before its first (whole)
    forward has installed transformers' hidden-state hooks on every layer."""
    model = bertscope.load(tiny_dirs["bert"], backend="torch", device="cpu")
    assert isinstance(model, bertscope.Model)
    engine = model.engine
    module = engine.model
    entered, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {"calls": 0}

    def factory() -> Any:
        seen["calls"] += 1
        entered.set()
        assert release.wait(timeout=120)
        return module

    engine._model = None
    engine._torch_model = factory
    first = threading.Thread(target=lambda: engine.model)
    first.start()
    assert entered.wait(timeout=120)
    seen["published while loading"] = engine._model
    seen["locked while loading"] = engine._opening.locked()
    second = threading.Thread(target=lambda: engine.model)
    second.start()
    release.set()
    first.join()
    second.join()
    assert seen["published while loading"] is None
    assert seen["locked while loading"]
    assert seen["calls"] == 1
    assert engine.model is module


def test_the_view_runs_only_the_layers_asked(tiny_models: dict[str, bertscope.Model]) -> None:
    """Stopping early still saves the later layers' work: a torch forward to layer 1 runs one layer."""
    runs: list[str] = []
    checked = []
    for family, model in tiny_models.items():
        if not isinstance(model, bertscope.Model) or model.engine.n_layers < 2:
            continue
        engine = model.engine
        module = engine.model
        path = "encoder.albert_layer_groups" if family == "albert" else engine.family.layers_path
        handles = [
            layer.register_forward_hook(lambda *_: runs.append("")) for layer in module.get_submodule(path)
        ]
        try:
            ids = np.array([[5, 6, 7]], dtype=np.int64) % engine.vocab_rows
            for deepest in (1, engine.n_layers):
                runs.clear()
                engine._torch_forward(ids, np.zeros_like(ids), np.ones_like(ids), deepest)
                assert len(runs) == deepest, family
        finally:
            for handle in handles:
                handle.remove()
        checked.append(family)
    assert {"bert", "albert", "modernbert"} <= set(checked)
