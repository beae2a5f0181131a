"""Every command that runs a forward takes the shared load options (--device, --dtype, --backend,
--quantize, --threads) and hands them to `bertscope.load`, for each model it loads; a bad value is refused
in one line naming the choices, a combination the library refuses too, and a runtime asked gives the
default's figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope.model
from console import Ran, run_main

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples"
PAIRS = Path(__file__).parent / "data" / "labelled_pairs.tsv"
TEXTS = [
    "The cat sat on the mat.",
    "Stocks fell sharply on Monday.",
    "She bought fresh bread at the bakery.",
    "The river bank was covered in snow.",
    "A new vaccine was approved today.",
    "He plays the guitar every evening.",
]
# Every value other than its default: each must reach the load as typed.
ASKED = "--device cpu --dtype bfloat16 --backend openvino --quantize int8 --threads 1".split()
EXPECTED = {"device": "cpu", "dtype": "bfloat16", "backend": "openvino", "quantize": "int8", "threads": 1}
DEFAULTS = {"device": "auto", "dtype": "float32", "backend": "auto", "quantize": "none", "threads": None}


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("load_options") / "texts.txt"
    path.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return path


def commands(texts: Path, tmp: Path) -> dict[str, tuple[list[str], int]]:
    """Each command that runs a forward: its arguments, and how many models it loads."""
    t = str(texts)
    return {
        "explain": (["explain", "a cat", "a dog"], 1),
        "calibrate": (["calibrate", "-i", str(PAIRS), "-o", str(tmp / "threshold.json")], 1),
        "attention": (["attention", "a cat sat on the mat"], 1),
        "geometry": (["geometry", "-i", t], 1),
        "probe": (["probe", "-i", str(EXAMPLES / "senses.tsv")], 1),
        "probe --task depth": (["probe", "-i", str(EXAMPLES / "trees.conllu"), "--task", "depth"], 1),
        "cka": (["cka", "-i", t], 1),
        "cka --model-b": (["cka", "-i", t, "--model-b", "bundled"], 2),
        "compare": (["compare", "bundled", "bundled", "-i", t], 2),
    }


NAMES = list(commands(Path("t"), Path("o")))


class Loaded(Exception):
    """Raised by the recording `load` once every model of the command has been asked for: no work runs."""


class Loads:
    """A stand-in for `bertscope.load` that records each call's keywords; the `count`-th raises `Loaded`."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.count = 1

    def __call__(self, name: Any = None, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if len(self.calls) >= self.count:
            raise Loaded
        return object()  # the first of two models: not used before the second loads

    def of(self, args: list[str], count: int) -> list[dict[str, Any]]:
        """Run `args`, stopping at its last load: each load's options as the command gave them."""
        self.count = count
        with pytest.raises(Loaded):
            run_main(*args)
        assert len(self.calls) == count, self.calls
        return [{key: _plain(call[key]) for key in EXPECTED} for call in self.calls]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Loads:
    """`bertscope.load` recorded: `load_model` imports it from `bertscope.model` at each call."""
    recorder = Loads()
    monkeypatch.setattr(bertscope.model, "load", recorder)
    return recorder


def _plain(value: Any) -> Any:
    """An option's value as typed: the str Enums the callbacks make are compared by their text."""
    return getattr(value, "value", value)


@pytest.mark.parametrize("name", NAMES)
def test_the_load_options_reach_every_load(name: str, texts: Path, tmp_path: Path, loads: Loads) -> None:
    args, count = commands(texts, tmp_path)[name]
    assert loads.of([*args, *ASKED], count) == [EXPECTED] * count
    loads.calls.clear()
    assert loads.of(args, count) == [DEFAULTS] * count  # not given: the defaults, as before


def one_line(ran: Ran) -> str:
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr
    return ran.stderr.strip()


@pytest.mark.parametrize("name", NAMES)
def test_a_bad_backend_is_refused_in_one_line_as_embed_refuses_it(
    name: str, texts: Path, tmp_path: Path, loads: Loads
) -> None:
    args, _ = commands(texts, tmp_path)[name]
    ran = run_main(*args, "--backend", "nope")
    embed = run_main("embed", "a cat", "--backend", "nope")
    assert (
        (ran.code, one_line(ran))
        == (embed.code, one_line(embed))
        == (
            1,
            "error: unknown backend 'nope'; choose one of: auto, torch, onnxruntime, openvino",
        )
    )
    assert loads.calls == []  # refused before any load


@pytest.mark.parametrize("name", NAMES)
def test_a_combination_the_library_refuses_is_its_one_line(name: str, texts: Path, tmp_path: Path) -> None:
    args, _ = commands(texts, tmp_path)[name]
    ran = run_main(*args, "--backend", "torch", "--quantize", "int8")
    assert ran.code == 1
    assert one_line(ran).startswith("error: --quantize int8 runs on ONNX Runtime"), ran.stderr


def test_cka_of_two_models_on_torch_gives_the_default_figures(texts: Path) -> None:
    """Both models loaded with --backend torch (the PyTorch module) give the figures of the default runtime
    (the fastest measured exact here, float32 within 1e-5 of torch)."""
    args = ["cka", "-i", str(texts), "--model-b", "bundled", "--json"]
    runs = [run_main(*args), run_main(*args, "--backend", "torch")]
    assert [ran.code for ran in runs] == [0, 0], runs
    default, torch = (json.loads(ran.stdout) for ran in runs)
    assert default["n_rows"] == torch["n_rows"] > 0
    assert np.abs(np.array(default["cka"]) - np.array(torch["cka"])).max() < 1e-5
