"""The light engine beyond float32: ONNX Runtime's int8, OpenVINO's bfloat16 and mode="fast" (read from
its recorded measurement: on the shipped calibration texts or the caller's, never one for the other) open
without torch once their graph is cached, with the vectors and the settings (`info()`, a corpus job's
stored settings) of the full load of the same options."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bertscope.backends import fast
from bertscope.backends.fast import Measured, candidates, load_fast_recorded, write_measured
from bertscope.backends.light import opens_light
from bertscope.backends.quantize import calibration_texts, export_variant
from bertscope.backends.runtimes import calibration_digest
from bertscope.core.loading import open_light
from bertscope.model import Model

TEXTS = ["I like eating bread", "The storm hit the coast at night.", "a cat"]
OPTIONS = {
    "onnxruntime-int8": "quantize='int8'",
    # float32 on a CPU without native bfloat16 (warned): light and full alike, whatever the CPU
    "openvino-bfloat16": "backend='openvino', dtype='bfloat16'",
    "fast": "mode='fast'",
}

# Loads a model with each of OPTIONS in a fresh interpreter (the full load when `torch_path`: as if the
# folder could not open light), embeds TEXTS, and says what it made and which heavy modules it imported.
# `record`: first writes the fast-mode measurement for a model folder (_RECORD_MEASUREMENT, in this same
# fresh interpreter, before anything loads) and says the mode it chooses.
_EMBED = """
import json, sys
chosen = None
{record}
import bertscope, bertscope.backends.light
from bertscope.core.spec import stored_settings
if {torch_path}:
    bertscope.backends.light.opens_light = lambda *args, **kwargs: False
runs = {{}}
for key, options in {options!r}.items():
    print("{marker}" + key, file=sys.stderr, flush=True)  # what follows on stderr is this run's
    m = eval("bertscope.load(" + options + ")")
    vectors = m.embed({texts!r}).vectors
    # stored_settings: what a corpus job stores beside its vectors
    runs[key] = {{"info": m.info().to_dict(), "settings": stored_settings(m, {{}}, None),
                 "vectors": vectors.tolist()}}
print(json.dumps({{"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "chosen": chosen, "runs": runs}}))
"""


def _fresh(code: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    env.pop("BERTSCOPE_MODEL", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)


def _embedded(
    cache: Path, *, torch_path: bool = False, options: dict[str, str] = OPTIONS, measured: Path | None = None
) -> tuple[dict[str, Any], str]:
    """What a fresh process embedding with `options` made; `measured`: the model folder whose fast-mode
    measurement that process records first, in its fresh cache (choosing ONNX Runtime's int8 where this
    CPU has VNNI, else its float32: a runtime either way), its choice said as "chosen"."""
    record = ""
    if measured is not None:
        record = _RECORD_MEASUREMENT.format(tests=str(Path(__file__).parent), folder=str(measured))
    code = _EMBED.format(options=options, texts=TEXTS, torch_path=torch_path, record=record, marker=_MARKER)
    done = _fresh(code, cache)
    return json.loads(done.stdout), done.stderr


_MARKER = "=== test_light_modes run: "


def _said_by(said: str, keys: Iterable[str]) -> str:
    """What an _EMBED process wrote on stderr while it loaded and embedded with the options of `keys`."""
    parts = re.split(f"{_MARKER}(\\S+)\n", said)  # [before, key, its part, key, its part, ...]
    by_key = dict(zip(parts[1::2], parts[2::2], strict=True))
    return "".join(by_key[key] for key in keys)


@pytest.fixture(scope="module")
def made(
    tmp_path_factory: pytest.TempPathFactory, tiny_plain: Path, tiny_bert: Path
) -> tuple[Path, str, dict[str, Any], str]:
    """The first process in a fresh cache, which makes the graphs of OPTIONS on `tiny_plain`: opened light,
    torch loaded for them. The same process makes the tiny BERT's graphs of CALIBRATED next (named by that
    model, apart from tiny_plain's), for
    test_int8_fitted_on_the_callers_texts_opens_light_once_its_graph_is_cached; what it said on stderr is
    the fourth item."""
    cache = tmp_path_factory.mktemp("light-modes") / "cache"
    first, said = _embedded(cache, options=_all_options(tiny_plain, tiny_bert), measured=tiny_plain)
    assert first["torch"] and "exporting the model to ONNX" in _said_by(said, OPTIONS)
    assert "measuring" not in said
    assert first["chosen"] in ("onnxruntime int8", "onnxruntime float32")
    return cache, first["chosen"], first, said


@pytest.fixture(scope="module")
def light(
    made: tuple[Path, str, dict[str, Any], str], tiny_plain: Path, tiny_bert: Path
) -> tuple[dict[str, Any], str]:
    """A second fresh process, every graph cached (the tiny BERT's of CALIBRATED too)."""
    return _embedded(made[0], options=_all_options(tiny_plain, tiny_bert))


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory, tiny_plain: Path, tiny_bert: Path) -> dict[str, Any]:
    """A fresh process loading the same options the full way (torch and the module), in a cache of its
    own: the graphs it makes must be the ones the light load made (int8's calibration sees the same
    forwards: the module's first, warming one before it watches). The same process loads the tiny BERT
    with CALIBRATED the full way too (its graphs named by that model, apart from tiny_plain's), for
    test_int8_fitted_on_the_callers_texts_opens_light_once_its_graph_is_cached."""
    cache = tmp_path_factory.mktemp("light-modes") / "cache"
    found, said = _embedded(
        cache, torch_path=True, options=_all_options(tiny_plain, tiny_bert), measured=tiny_plain
    )
    assert found["torch"] is True and "exporting the model to ONNX" in said
    return found


def test_a_second_process_imports_neither_torch_nor_transformers(
    made: tuple[Path, str, dict[str, Any], str], light: tuple[dict[str, Any], str]
) -> None:
    again, said = light
    assert again["torch"] is False and again["transformers"] is False
    assert "exporting" not in said and "measuring" not in said
    assert f"fast mode: {made[1]}," in said


@pytest.mark.parametrize("key", OPTIONS)
def test_the_light_load_answers_as_the_first_and_as_the_full_load(
    key: str,
    made: tuple[Path, str, dict[str, Any], str],
    light: tuple[dict[str, Any], str],
    full: dict[str, Any],
) -> None:
    first, again, torch_path = made[2]["runs"][key], light[0]["runs"][key], full["runs"][key]
    assert np.array_equal(np.array(again["vectors"]), np.array(first["vectors"]))  # the same graph
    for run in (first, again):  # settings: info() and what a corpus job stores
        assert _cache_named(run["info"]) == _cache_named(torch_path["info"])
        assert run["settings"] == torch_path["settings"]
        assert np.abs(np.array(run["vectors"]) - np.array(torch_path["vectors"])).max() <= 1e-6
    expected = {
        "onnxruntime-int8": ("onnxruntime", "int8", "exact"),
        "openvino-bfloat16": ("openvino", None, "exact"),
        "fast": ("onnxruntime", "int8" if "int8" in made[1] else None, "fast"),
    }[key]
    assert (again["info"]["backend"], again["info"]["quantize"], again["info"]["mode"]) == expected
    if key == "fast":
        assert again["info"]["fast"]["chosen"] == made[1]


def test_mode_fast_without_a_valid_measurement_takes_the_full_load(
    cache: Path, bundled_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _light_model(bundled_path)
    assert load_fast_recorded(model, _FAST, min_cosine=0.999) is None  # nothing recorded: load_fast measures
    _record_measurement(bundled_path, "onnxruntime float32", stale=True)
    assert load_fast_recorded(_light_model(bundled_path), _FAST, min_cosine=0.999) is None
    assert capsys.readouterr().err == ""  # load_fast, which measures again, says why
    # a torch mode chosen needs the module: the full load runs it
    _record_measurement(bundled_path, "torch float32")
    assert load_fast_recorded(_light_model(bundled_path), _FAST, min_cosine=0.999) is None


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT for the checks of the caller's calibration texts: what they check (a graph or a
    measurement named by the texts, opened light with the full load's vectors and settings) is the same on
    any model, and the bundled one's exports and int8 calibration cost ~3x as much in every process."""
    from tiny_models import build_tiny_model

    return build_tiny_model("bert", tmp_path_factory.mktemp("tiny-bert") / "bert")


@pytest.fixture(scope="module")
def tiny_plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another tiny random BERT (seed 1: other weights, so graphs of its own key) for OPTIONS: the light
    load's graphs, vectors and settings against the full load's are the same checks on any model, and the
    bundled model made the three processes of `made`, `full` and `light` take ~33 s where these take ~12 s.
    Not `tiny_bert`: the CALIBRATED loads that follow in the same process must make their own export."""
    from tiny_models import build_tiny_model

    return build_tiny_model("bert", tmp_path_factory.mktemp("tiny-plain") / "bert", seed=1)


# int8 fitted on the caller's own texts: each graph's cache name carries their digest
CALIBRATION = [
    "The river rose after a week of rain.",
    "She sold the old piano to a neighbour.",
    "Prices climbed for the third month in a row.",
    "a dog",
    "How do I reset my password?",
    "The committee postponed its vote until spring.",
]
CALIBRATED = {
    "onnxruntime-int8_static": f"quantize='int8_static', calibration={CALIBRATION!r}",
    "openvino-int8_static": f"backend='openvino', quantize='int8_static', calibration={CALIBRATION!r}",
}


def _calibrated(folder: Path) -> dict[str, str]:
    """CALIBRATED's options on the model in `folder`."""
    return {key: f"{str(folder)!r}, {options}" for key, options in CALIBRATED.items()}


def _all_options(plain: Path, calibrated: Path) -> dict[str, str]:
    """What the fixtures' processes load: OPTIONS on `plain`, then CALIBRATED on `calibrated`."""
    return {
        **{key: f"{str(plain)!r}, {options}" for key, options in OPTIONS.items()},
        **_calibrated(calibrated),
    }


def test_int8_fitted_on_the_callers_texts_opens_light_once_its_graph_is_cached(
    made: tuple[Path, str, dict[str, Any], str], light: tuple[dict[str, Any], str], full: dict[str, Any]
) -> None:
    """The first process makes the graphs from the caller's texts (opened light, torch loaded for the
    export and int8's calibration); a second one opens them without torch, with the vectors and settings
    (the calibration digest included) of a process that loads the same options the full way (`full`'s,
    in a cache of its own). The processes are the fixtures' (tiny_plain's runs before these)."""
    cache, first, said = made[0], made[2], made[3]
    assert first["torch"] and "exporting the model to ONNX" in _said_by(said, CALIBRATED)
    again, said = light
    assert again["torch"] is False and again["transformers"] is False
    assert "exporting" not in said and "quantizing" not in said
    assert full["torch"] is True
    digest = calibration_digest(CALIBRATION)
    for key in CALIBRATED:
        making, opened, torch_path = first["runs"][key], again["runs"][key], full["runs"][key]
        assert np.array_equal(np.array(opened["vectors"]), np.array(making["vectors"]))  # the same graph
        assert np.abs(np.array(opened["vectors"]) - np.array(torch_path["vectors"])).max() <= 1e-6, key
        assert opened["info"] == making["info"] == torch_path["info"]
        assert opened["settings"] == making["settings"] == torch_path["settings"]
        assert opened["info"]["quantize"] == "int8_static"
        assert digest is not None and digest in json.dumps(opened["settings"])  # the caller's texts, named
    # the ONNX Runtime graph is named by the caller's texts, never by the shipped ones' (of the tiny BERT:
    # the cache holds tiny_plain's graphs too, each name starting with its model's key)
    (ours,) = cache.rglob(f"*-{export_variant('int8', CALIBRATION, 'static')}-*.onnx")
    tiny_key = ours.name.split("-int8-")[0]
    for texts, made_here in ((CALIBRATION, True), (calibration_texts(), False)):
        variant = export_variant("int8", texts, "static")
        assert bool(list(cache.rglob(f"{tiny_key}-{variant}-*.onnx"))) is made_here


# mode="fast" fitted on the caller's texts, kept cheap (as tests/test_fast.py): only torch float32 and ONNX
# Runtime's dynamic int8 are candidates, and a fixed speed makes int8 win (its vectors, and so its cosines,
# are real, taken on the first 8 rows of each measured set). Every process patches the same candidates,
# since they name the measurement file; `measured` says what this process measured.
_FAST_CALIBRATED = """
import json, sys, bertscope
from bertscope.backends import fast
from bertscope.backends.modes import MODES
from bertscope.core.spec import stored_settings
ways = {{way.label: way for way in (MODES["float32"], MODES["int8"])}}
fast.candidates = lambda device: dict(ways)
measured = []
def fake(ways, texts, *, rounds):
    measured.extend(ways)
    rows = list(texts)[:8]
    speed = {{"torch float32": 100.0, "onnxruntime int8": 1000.0}}
    return {{name: (speed[name], embed(rows)) for name, embed in ways.items()}}
fast.measure = fake
m = bertscope.load({folder!r}, mode="fast", fast_min_cosine=0.9, calibration={calibration!r})
vectors = m.embed({texts!r}).vectors
print(json.dumps({{"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "measured": measured, "info": m.info().to_dict(), "digest": m.calibration_digest,
                  "settings": stored_settings(m, {{}}, None), "vectors": vectors.tolist()}}))
"""


def _fast_calibrated(cache: Path, folder: Path, calibration: list[str]) -> tuple[dict[str, Any], str]:
    done = _fresh(_FAST_CALIBRATED.format(folder=str(folder), calibration=calibration, texts=TEXTS), cache)
    return json.loads(done.stdout), done.stderr


def test_fast_on_the_callers_texts_opens_light_once_measured_on_them(
    tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path
) -> None:
    """The first process finds nothing recorded for the caller's texts: it loads torch, measures (int8
    fitted on their texts) and records. A second one reads that record and the cached int8 graph without
    torch or transformers, with the first one's vectors, info() and stored settings. A third, with other
    texts, does not read it: it measures again, with torch."""
    cache = tmp_path_factory.mktemp("light-fast-calibrated") / "cache"
    first, said = _fast_calibrated(cache, tiny_bert, CALIBRATION)
    assert first["torch"] is True and first["measured"] and "fast mode: measuring" in said
    assert first["info"]["fast"]["chosen"] == "onnxruntime int8" and first["info"]["quantize"] == "int8"
    assert first["digest"] == calibration_digest(CALIBRATION)  # fitted on the caller's texts, and says so
    again, said = _fast_calibrated(cache, tiny_bert, CALIBRATION)
    assert again["torch"] is False and again["transformers"] is False
    assert again["measured"] == [] and "measuring" not in said and "exporting" not in said
    assert "fast mode: onnxruntime int8," in said  # the same line as the measuring load's choice
    assert np.array_equal(np.array(again["vectors"]), np.array(first["vectors"]))  # the same graph
    assert again["info"] == first["info"] and again["settings"] == first["settings"]
    assert again["digest"] == first["digest"]
    other = CALIBRATION[1:]  # other texts: their own measurement, never the one recorded for CALIBRATION
    third, said = _fast_calibrated(cache, tiny_bert, other)
    assert (
        third["torch"] is True and third["measured"] == first["measured"] and "fast mode: measuring" in said
    )
    assert third["digest"] == calibration_digest(other) != first["digest"]
    assert third["info"]["fast"]["measured"] != first["info"]["fast"]["measured"]
    assert len(list((cache / "fast").glob("*.json"))) == 2  # one measurement per set of texts


def test_a_fast_measurement_serves_only_loads_on_its_own_calibration_texts(
    cache: Path, bundled_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A measurement recorded on the caller's texts serves neither the shipped texts nor others; one on
    the shipped texts serves no caller's texts. (The way is not applied here: it would export the model.)"""
    applied: list[Any] = []

    def apply_way(base: Model, options: dict[str, Any], *, build: Any, calibration: Any) -> Model:
        applied.append(calibration)
        return base

    monkeypatch.setattr(fast, "apply_way", apply_way)

    def recorded(calibration: list[str] | None) -> Model | None:
        model = _light_model(bundled_path)
        return load_fast_recorded(model, _FAST, min_cosine=0.999, calibration=calibration)

    other = CALIBRATION[1:]
    _record_measurement(bundled_path, "onnxruntime float32", calibration=CALIBRATION)
    assert recorded(None) is None and recorded(other) is None and applied == []
    assert recorded(CALIBRATION) is not None and applied == [CALIBRATION]  # fitted on the caller's texts
    _record_measurement(bundled_path, "onnxruntime float32")  # the shipped texts'
    assert recorded(None) is not None and applied == [CALIBRATION, None]
    assert recorded(other) is None and applied == [CALIBRATION, None]


@pytest.mark.parametrize(
    ("options", "light"),
    [
        ({"quantize": "int8"}, True),
        (
            {"quantize": "int8", "calibration": ["a text"]},
            True,
        ),  # fitted on the caller's texts: theirs cached
        ({"backend": "openvino", "quantize": "int8_static"}, True),
        ({"backend": "openvino", "quantize": "int8_static", "calibration": ["a text"]}, True),
        ({"backend": "openvino", "quantize": "int8_fused"}, False),  # refused by the full load
        ({"backend": "openvino", "dtype": "bfloat16"}, True),
        ({"dtype": "bfloat16"}, False),  # torch's bfloat16
        ({"backend": "torch", "quantize": "int8"}, False),
        ({"mode": "fast"}, True),
        ({"mode": "fast", "remeasure": True}, False),
        ({"mode": "fast", "calibration": ["a text"]}, True),  # measured on them: the file names their digest
        ({"mode": "fast", "device": "cuda"}, False),
    ],
)
def test_which_options_open_light(options: dict[str, Any], light: bool) -> None:
    asked = {"device": "cpu", "dtype": "float32", "backend": "auto", "quantize": None, "mode": "exact"}
    asked.update({k: v for k, v in options.items() if k in asked})
    opens = opens_light(
        asked, False, calibration=options.get("calibration"), remeasure=options.get("remeasure", False)
    )
    assert opens is light


def _cache_named(info: dict[str, Any]) -> dict[str, Any]:
    """`info` with the measurement file named without its folder (each process here has its own cache)."""
    if info["fast"] is None:
        return info
    return {**info, "fast": {**info["fast"], "measured": Path(info["fast"]["measured"]).name}}


_FAST = {"dtype": "float32", "backend": "auto", "quantize": None}


def _light_model(folder: Path) -> Model:
    loaded = open_light(folder)
    assert loaded is not None
    return Model(loaded, device="cpu", max_tokens=None, token_budget=None)


# Records the measurement in a fresh interpreter (the start of _EMBED's): its name holds the threads and
# token budget a fresh process runs with (this one's are the suite's, conftest.py). Sets the mode chosen.
_RECORD_MEASUREMENT = """
import sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from bertscope.backends.fast import candidates
from test_light_modes import _record_measurement
wanted = candidates("cpu")
way = "onnxruntime int8" if "onnxruntime int8" in wanted else "onnxruntime float32"
chosen = _record_measurement(Path({folder!r}), way)
"""


def _record_measurement(
    folder: Path, chosen: str, *, stale: bool = False, calibration: list[str] | None = None
) -> str:
    """Write the measurement mode='fast' reads for the bundled model on this machine, with `chosen` the
    fastest by far (so it wins within any bound); `stale`: written by another bertscope version;
    `calibration`: the texts it was measured on (None: the shipped ones)."""
    model = _light_model(folder)
    wanted = candidates("cpu")
    assert chosen in wanted
    path = fast._cache_path(model, fast.calibration_or_shipped(calibration), wanted)
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
