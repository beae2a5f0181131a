"""Review 6's rough edges R1, R3, R4, R5.

- R1: a cut graph another process is writing (in place, its record not yet written) is not called damaged:
  the check that names damage runs under the lock the writer holds until the record is written.
- R3: `Model.use_openvino` refusals name the keyword typed and what it takes on OpenVINO.
- R4: `verify -i X --sample X` names -i, as typed (and --input where that was typed).
- R5: `static --corpus --json` and `AggregatedStatic.settings` count words as `n_words_seen`/`n_words_kept`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import filelock
import numpy as np
import pytest

import bertscope
from bertscope.backends import onnx as onnx_backend
from bertscope.backends.cut_cache import cut_path
from bertscope.backends.onnx import OnnxRunner
from bertscope.errors import InvalidSpec
from console import run_main
from tiny_models import build_tiny_model

TEXTS = ["the cat sat on the mat", "a dog ran after it", "bread"]

# R1 ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model("bert", tmp_path_factory.mktemp("edges") / "bert")


def test_a_cut_graph_in_place_before_its_record_is_not_called_damaged(
    cache: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second builder asks for the cut between the first's move of the file and its record's write:
    it says nothing of damage, does not cut again, and gets the first's cut."""
    model = bertscope.load(tiny_bert, backend="onnxruntime")
    runner = model.engine.runner
    assert isinstance(runner, OnnxRunner)
    cut = cut_path(runner.path, 0)
    second_said: list[str] = []
    second_got: list[Path | None] = []
    second_waits = threading.Event()
    cuts: list[Path] = []
    started: list[threading.Thread] = []

    class Lock(filelock.FileLock):
        """The lock, telling when the second builder is about to wait on it."""

        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name == "second":
                second_waits.set()
            return super().acquire(*args, **kwargs)

    def second() -> None:
        second_got.append(onnx_backend.cached_cut(runner.path, ["hidden_0"], None, log=second_said.append))

    real_record = onnx_backend.record_export
    real_write = onnx_backend.write_cut

    def write(*args: Any) -> None:
        cuts.append(args[1])
        real_write(*args)

    def record(path: Path, about: dict[str, Any]) -> None:
        if path == cut and not cut.with_suffix(".json").exists():  # the file in place, its record not yet
            started.append(threading.Thread(target=second, name="second"))
            started[0].start()
            assert second_waits.wait(timeout=120)  # it checked outside the lock and now waits on it
        real_record(path, about)

    monkeypatch.setattr(filelock, "FileLock", Lock)
    monkeypatch.setattr(onnx_backend, "write_cut", write)
    monkeypatch.setattr(onnx_backend, "record_export", record)
    capsys.readouterr()
    first = model.embed(TEXTS, layers=0).vectors
    assert len(started) == 1
    started[0].join(timeout=120)

    assert second_said == [] and "does not match" not in capsys.readouterr().err
    assert second_got == [cut] and cuts == [cut]  # the first's cut, not cut again
    again = bertscope.load(tiny_bert, backend="onnxruntime")
    np.testing.assert_array_equal(again.embed(TEXTS, layers=0).vectors, first)


# R3 ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "said", "unsaid"),
    [
        (
            {"dtype": "int8"},
            "unknown dtype 'int8' for backend='openvino'; int8 is quantize='int8'; choose one of: float32, "
            "bfloat16",
            ", float16",
        ),
        (
            {"dtype": "int8-static"},
            "int8_static is quantize='int8_static'; choose one of: float32, bfloat16",
            ", float16",
        ),
        (
            {"quantize": "bfloat16"},
            "unknown quantize 'bfloat16' for backend='openvino'; bfloat16 is dtype='bfloat16'; "
            "choose one of: none, int8, int8_static",
            "int8_fused",
        ),
        (
            {"dtype": "float16"},
            "takes dtype='float32' or 'bfloat16' (int8 is quantize='int8')",
            "runs float32",
        ),
    ],
)
def test_use_openvino_refusals_name_the_keyword_and_what_openvino_takes(
    tiny_models: dict[str, bertscope.Model], kwargs: dict[str, str], said: str, unsaid: str
) -> None:
    with pytest.raises(InvalidSpec) as refused:
        tiny_models["bert"].use_openvino(**kwargs)
    assert said in str(refused.value) and unsaid not in str(refused.value)


@pytest.mark.parametrize("precision", ["bogus", "float16"])
def test_a_bad_precision_is_refused_as_precision(
    tiny_models: dict[str, bertscope.Model], precision: str
) -> None:
    with pytest.warns(DeprecationWarning, match="precision="), pytest.raises(InvalidSpec) as refused:
        tiny_models["bert"].use_openvino(precision=precision)
    assert str(refused.value) == (
        f"unknown precision {precision!r} for backend='openvino'; choose one of: float32, bfloat16, int8, "
        "int8_static"
    )
    assert tiny_models["bert"].backend != "openvino"


# R4 ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "named"), [(["-i", "{f}"], "-i"), (["-i{f}"], "-i"), (["--input", "{f}"], "--input"),
                         (["--input={f}"], "--input")],
)  # fmt: skip
def test_verify_names_the_input_flag_as_typed_beside_sample(
    tmp_path: Path, typed: list[str], named: str
) -> None:
    texts = tmp_path / "mine.txt"
    texts.write_text("a cat sat\n")
    ran = run_main("verify", *[t.format(f=texts) for t in typed], "--sample", str(texts))
    assert ran.code == 2 and ran.stdout == "", ran
    assert ran.stderr.strip() == f"error: --sample is the old spelling of {named}; give {named} only"


# R5 ---------------------------------------------------------------------------------------------------


def test_static_corpus_counts_words_as_n_words_seen_and_kept(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model], tiny_dirs: dict[str, Path]
) -> None:
    corpus = ["the cat sat on the mat", "the dog sat", "a bird"]
    agg = tiny_models["bert"].static_from_corpus(corpus, layers=1, min_count=2, progress=False)
    assert agg.words[:1] == ["the"] and set(agg.words) == {"the", "sat"}
    counts = {k: agg.settings.get(k) for k in ("n_words_seen", "n_words_kept", "words_seen", "words_kept")}
    assert counts == {"n_words_seen": 8, "n_words_kept": 2, "words_seen": None, "words_kept": None}

    source = tmp_path / "corpus.txt"
    source.write_text("\n".join(corpus) + "\n")
    out = tmp_path / "sc.npy"
    ran = run_main("static", "-m", str(tiny_dirs["bert"]), "--corpus", str(source), "--layers", "1",
                   "--min-count", "2", "-o", str(out), "--json")  # fmt: skip
    assert ran.code == 0, ran
    summary = json.loads(ran.stdout)
    assert (summary["n_words"], summary["n_words_seen"]) == (2, 8) and "words_seen" not in summary


@pytest.mark.parametrize(("dtype", "quantize"), [("int8", "int8"), ("Int8-Static", "int8_static")])
def test_load_says_where_an_int8_dtype_goes(dtype: str, quantize: str) -> None:
    """load(dtype='int8'), on any backend, names quantize= as use_openvino does; the CLI its flag."""
    for backend in ("openvino", "torch"):
        with pytest.raises(InvalidSpec) as refused:
            bertscope.load(backend=backend, dtype=dtype)
        said = str(refused.value)
        assert f"int8 is quantize={quantize!r}, not a dtype" in said and "\n" not in said, said
    ran = run_main("embed", "a cat", "--dtype", dtype)
    assert ran.code != 0 and f"int8 is --quantize {quantize}, not a dtype" in ran.stderr, ran.stderr
