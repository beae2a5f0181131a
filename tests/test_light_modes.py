"""The light engine beyond float32: ONNX Runtime's int8, OpenVINO's bfloat16 and mode="fast" (read from
its recorded measurement) open without torch once their graph is cached, with the vectors and the
settings (`info()`, a corpus job's stored settings) of the full load of the same options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bertscope.backends import fast
from bertscope.backends.fast import Measured, candidates, load_fast_recorded, write_measured
from bertscope.core.loading import open_light
from bertscope.model import Model, _opens_light

TEXTS = ["I like eating bread", "The storm hit the coast at night.", "a cat"]

# Embeds TEXTS in a fresh interpreter (the full load when `torch_path`: as if the folder could not open
# light) and says which heavy modules it imported, the model's info and the settings a corpus job stores.
_EMBED = """
import json, sys, bertscope, bertscope.model
if {torch_path}:
    bertscope.model._opens_light = lambda *args, **kwargs: False
m = bertscope.load({options})
vectors = m.embed({texts!r}).vectors
from bertscope.core.spec import stored_settings
settings = stored_settings(m, {{}}, None)  # what a corpus job stores beside its vectors
print(json.dumps({{"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "info": m.info().to_dict(), "settings": settings, "vectors": vectors.tolist()}}))
"""


def _embedded(options: str, cache: Path, *, torch_path: bool = False) -> tuple[dict[str, Any], str]:
    code = _EMBED.format(options=options, texts=TEXTS, torch_path=torch_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    env.pop("BERTSCOPE_MODEL", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout), done.stderr


def _same_run(light: dict[str, Any], full: dict[str, Any]) -> None:
    """The light load answers as the full load of the same options: equal vectors, equal settings."""
    assert light["info"] == full["info"] and light["settings"] == full["settings"]
    assert np.abs(np.array(light["vectors"]) - np.array(full["vectors"])).max() <= 1e-6


@pytest.mark.parametrize(
    ("options", "backend", "quantize"),
    [
        ("quantize='int8'", "onnxruntime", "int8"),
        # float32 on a CPU without native bfloat16 (warned): light and full alike, whatever the CPU
        ("backend='openvino', dtype='bfloat16'", "openvino", None),
    ],
    ids=["onnxruntime-int8", "openvino-bfloat16"],
)
def test_a_cached_lossy_graph_opens_without_torch_with_the_full_loads_answer(
    cache: Path, options: str, backend: str, quantize: str | None
) -> None:
    first, said = _embedded(options, cache)  # opened light; torch loaded only to make the graph
    assert first["torch"] and "exporting the model to ONNX" in said
    again, said = _embedded(options, cache)
    assert again["torch"] is False and again["transformers"] is False
    assert "exporting" not in said
    assert again["info"]["backend"] == backend and again["info"]["quantize"] == quantize
    assert np.array_equal(np.array(again["vectors"]), np.array(first["vectors"]))  # the same graph
    full, _ = _embedded(options, cache, torch_path=True)
    assert full["torch"] is True
    _same_run(again, full)
    _same_run(first, full)


def test_mode_fast_reads_its_recorded_choice_without_torch(cache: Path, bundled_path: Path) -> None:
    # int8 where this CPU has VNNI (a candidate), else ONNX Runtime's float32: a runtime either way
    int8 = "onnxruntime int8" in candidates("cpu")
    chosen = _record_measurement(bundled_path, "onnxruntime int8" if int8 else "onnxruntime float32")
    light, said = _embedded("mode='fast'", cache)  # makes the int8 graph (torch), measures nothing
    assert "measuring" not in said and f"fast mode: {chosen}" in said
    again, said = _embedded("mode='fast'", cache)
    assert again["torch"] is False and again["transformers"] is False
    assert f"fast mode: {chosen}" in said
    assert again["info"]["mode"] == "fast" and again["info"]["fast"]["chosen"] == chosen
    assert np.array_equal(np.array(again["vectors"]), np.array(light["vectors"]))
    full, said = _embedded("mode='fast'", cache, torch_path=True)
    assert full["torch"] is True and "measuring" not in said
    _same_run(again, full)


def test_mode_fast_without_a_valid_measurement_takes_the_full_load(cache: Path, bundled_path: Path) -> None:
    model = _light_model(bundled_path)
    assert load_fast_recorded(model, _FAST, min_cosine=0.999) is None  # nothing recorded: load_fast measures
    _record_measurement(bundled_path, "onnxruntime float32", stale=True)
    assert load_fast_recorded(_light_model(bundled_path), _FAST, min_cosine=0.999) is None
    # a torch mode chosen needs the module: the full load runs it
    _record_measurement(bundled_path, "torch float32")
    assert load_fast_recorded(_light_model(bundled_path), _FAST, min_cosine=0.999) is None


@pytest.mark.parametrize(
    ("options", "light"),
    [
        ({"quantize": "int8"}, True),
        ({"quantize": "int8", "calibration": ["a text"]}, False),  # fitted on the caller's texts: full load
        ({"backend": "openvino", "quantize": "int8_static"}, True),
        ({"backend": "openvino", "quantize": "int8_static", "calibration": ["a text"]}, False),
        ({"backend": "openvino", "quantize": "int8_fused"}, False),  # refused by the full load
        ({"backend": "openvino", "dtype": "bfloat16"}, True),
        ({"dtype": "bfloat16"}, False),  # torch's bfloat16
        ({"backend": "torch", "quantize": "int8"}, False),
        ({"mode": "fast"}, True),
        ({"mode": "fast", "remeasure": True}, False),
        ({"mode": "fast", "calibration": ["a text"]}, False),
        ({"mode": "fast", "device": "cuda"}, False),
    ],
)
def test_which_options_open_light(options: dict[str, Any], light: bool) -> None:
    asked = {"device": "cpu", "dtype": "float32", "backend": "auto", "quantize": None, "mode": "exact"}
    asked.update({k: v for k, v in options.items() if k in asked})
    opens = _opens_light(
        asked, False, calibration=options.get("calibration"), remeasure=options.get("remeasure", False)
    )
    assert opens is light


_FAST = {"dtype": "float32", "backend": "auto", "quantize": None}


def _light_model(folder: Path) -> Model:
    loaded = open_light(folder)
    assert loaded is not None
    return Model(loaded, device="cpu", max_tokens=None, token_budget=None)


def _record_measurement(folder: Path, chosen: str, *, stale: bool = False) -> str:
    """Write the measurement mode='fast' reads for the bundled model on this machine, with `chosen` the
    fastest by far (so it wins within any bound); `stale`: written by another bertscope version."""
    model = _light_model(folder)
    wanted = candidates("cpu")
    assert chosen in wanted
    path = fast._cache_path(model, fast.calibration_or_shipped(None), wanted)
    rows = [
        Measured(label, way.options, speed, speed / 100.0, 1.0, 1.0)
        for label, way in wanted.items()
        for speed in [1000.0 if label == chosen else (100.0 if label == "torch float32" else 50.0)]
    ]
    write_measured(path, rows)
    if stale:
        about = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**about, "bertscope": "0.0.0"}), encoding="utf-8")
    return chosen
