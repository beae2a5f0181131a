"""Audit 7 of the research commands: an attention graph that missed its module's is recorded and not
exported again by each new process (said once, not twice); explain names the empty text as a or b; compare's
mean cosine is undefined (nan, null, '-') where a token vector is zero; a path that is there but is no
regular file (/dev/null) is not called missing."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.backends.onnx import content_digest, export_onnx
from bertscope.core.families import family_for
from console import run_main
from tiny_models import build_tiny_model

TEXT = "the cat ate the bread and the dog went over the house"
MISSED = "exporting the model to ONNX (attentions"


@pytest.fixture
def tiny_bert(tmp_path: Path) -> Path:
    return build_tiny_model("bert", tmp_path / "bert")


def _hf_attentions(folder: Path, text: str) -> np.ndarray:
    """The plain Hugging Face forward's eager `output_attentions=True` of `text`."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        out = model(**tokenizer(text, return_tensors="pt"), output_attentions=True)
    return torch.stack(out.attentions)[:, 0].numpy()


def _light(folder: Path) -> bertscope.Model:
    """`folder` opened light on ONNX Runtime (its export made first)."""
    module = AutoModel.from_pretrained(folder).eval()
    export_onnx(lambda: module, family_for("bert"), digest=content_digest(folder))
    light = bertscope.load(folder, backend="onnxruntime")
    assert light.light
    return light


@pytest.fixture
def missed(
    cache: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, np.ndarray]:
    """A tiny model whose attention graph missed its module's (every graph misses the gate patched below
    zero, whatever this CPU reads): the record, and the attentions the first call read."""
    from bertscope import attention
    from bertscope.backends import export

    monkeypatch.setattr(export, "ATTENTION_GATE", -1.0)
    monkeypatch.setattr(attention, "_SAID_MISSES", set(), raising=False)
    light = _light(tiny_bert)
    capsys.readouterr()
    got = light.attentions(TEXT)
    said = capsys.readouterr().err
    np.testing.assert_allclose(got, _hf_attentions(tiny_bert, TEXT), rtol=0, atol=1e-5)
    assert said.count(MISSED) == 1
    assert said.count("differ from its module's by") == 1
    # one fallback phrase: export.py and attention.py each said it
    assert said.count("PyTorch module") == 1, said
    (record,) = (cache / "fast").glob("bert-*-attentions-v2.refused.json")
    assert not list((cache / "onnx").glob("*-attentions-*.onnx"))
    return record, got


def test_a_missed_attention_graph_is_not_exported_again(
    missed: tuple[Path, np.ndarray],
    tiny_bert: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Later loads (as a fresh process: the said misses forgotten) read the module without exporting or
    proving, say so once, and answer the same."""
    from bertscope import attention
    from bertscope.backends import onnx

    record, first = missed

    exported = onnx.export_onnx

    def no_attention_graph(*args: object, **kwargs: object) -> Path:
        assert not kwargs.get("attentions"), "the attention graph was exported again"
        return exported(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx, "export_onnx", no_attention_graph)
    monkeypatch.setattr(attention, "_SAID_MISSES", set(), raising=False)  # a fresh process has said nothing
    for _ in range(2):
        later = bertscope.load(tiny_bert, backend="onnxruntime")
        assert later.light
        np.testing.assert_allclose(later.attentions(TEXT), first, rtol=0, atol=1e-6)
    said = capsys.readouterr().err
    assert MISSED not in said
    assert said.count(f"as recorded in {record}; reading the weights from the PyTorch module") == 1, said


def test_a_record_from_another_runtime_is_proved_again(
    missed: tuple[Path, np.ndarray], tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record holds for this CPU and these versions only: from another torch, the graph is exported
    and proved again (and, missing again, recorded again)."""
    record, _ = missed
    about = json.loads(record.read_text())
    record.write_text(json.dumps({**about, "torch": "0.0"}))
    bertscope.load(tiny_bert, backend="onnxruntime").attentions(TEXT)
    assert capsys.readouterr().err.count(MISSED) == 1
    assert json.loads(record.read_text())["torch"] == about["torch"]


def test_a_waiting_exporter_reads_the_record_without_tracing(
    missed: tuple[Path, np.ndarray], tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export_onnx(attentions=True) where the miss is recorded (a process that waited on the lock while
    another proved it) refuses in the same line without tracing the graph, and logs no export it does not
    make."""

    def no_trace(*_: object, **__: object) -> None:
        raise AssertionError("traced again")

    monkeypatch.setattr(torch.onnx, "export", no_trace)
    module = AutoModel.from_pretrained(tiny_bert).eval()
    said: list[str] = []
    with pytest.raises(bertscope.ModelLoadError, match=r"differ from its module's by .* \(more than -1\)$"):
        digest = content_digest(tiny_bert)
        export_onnx(lambda: module, family_for("bert"), digest=digest, attentions=True, log=said.append)
    assert not [line for line in said if "exporting the model to ONNX" in line], said


@pytest.mark.parametrize(("a", "b", "named"), [("a cat", "   ", "text b"), ("", "a cat", "text a")])
def test_explain_names_the_empty_text(tiny_bert: Path, a: str, b: str, named: str) -> None:
    model = bertscope.load(tiny_bert)
    with pytest.raises(bertscope.InvalidInput, match=rf"^{named} is empty: every text needs"):
        model.explain(a, b)
    ran = run_main("explain", a, b, "--model", str(tiny_bert))
    assert (
        ran.code == 1
        and ran.stderr.strip() == f"error: {named} is empty: every text needs a non-space character"
    )


def test_explain_names_a_text_with_no_word_pieces(tiny_bert: Path) -> None:
    with pytest.raises(bertscope.InvalidInput, match=r"^text b gives no word pieces"):
        bertscope.load(tiny_bert).explain("a cat", "\u0301")


def test_compare_mean_cosine_is_undefined_where_a_vector_is_zero(tiny_bert: Path, tmp_path: Path) -> None:
    """The last layer's LayerNorm zeroed: every token vector there is zero, so its cosine with anything is
    undefined: nan (null in --json, '-' in the table), the note says why; the other layers unchanged."""
    zeroed = tmp_path / "zeroed"
    shutil.copytree(tiny_bert, zeroed)
    module = AutoModel.from_pretrained(tiny_bert)
    with torch.no_grad():
        module.encoder.layer[-1].output.LayerNorm.weight.zero_()
        module.encoder.layer[-1].output.LayerNorm.bias.zero_()
    module.save_pretrained(zeroed, safe_serialization=True)
    texts = tmp_path / "texts.txt"
    texts.write_text("the cat ate the bread\na dog went over the house\n")
    lines = texts.read_text().splitlines()
    result = bertscope.compare(bertscope.load(tiny_bert), bertscope.load(zeroed), lines)
    *defined, last = result.layers
    assert math.isnan(last["mean_cosine"]) and math.isnan(last["cka"])
    assert [r["mean_cosine"] for r in defined] == pytest.approx([1.0] * len(defined))
    assert (
        result.note is not None
        and "token vectors are zero, so the mean cosine there is undefined" in result.note
    )
    ran = run_main("compare", str(tiny_bert), str(zeroed), "-i", str(texts), "--json")
    assert ran.code == 0, ran
    block = f"block {last['layer'] - 1}"
    expected = {"layer": last["layer"], "output_of": block, "cka": None, "mean_cosine": None}
    assert json.loads(ran.stdout)["layers"][-1] == expected
    ran = run_main("compare", str(tiny_bert), str(zeroed), "-i", str(texts))
    (row,) = [line for line in ran.stdout.splitlines() if line.startswith(f"│ {last['layer']} ")]
    assert [cell.strip() for cell in row.strip("│").split("│")] == [str(last["layer"]), block, "-", "-"]


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null here")
def test_a_path_that_is_no_regular_file_is_not_called_missing(tiny_bert: Path, tmp_path: Path) -> None:
    from bertscope.core.text_files import read_utf8

    with pytest.raises(bertscope.InvalidInput, match=r"/dev/null: not a regular file .*; give a text file$"):
        read_utf8("/dev/null")
    with pytest.raises(bertscope.InvalidInput, match=r": no such file$"):
        read_utf8(tmp_path / "none.txt")
    ran = run_main("cka", "-i", "/dev/null", "--model", str(tiny_bert))
    assert ran.code == 1
    assert ran.stderr.strip() == (
        "error: cannot read /dev/null: not a regular file (a device, pipe or socket): give a text file, or - "
        "to read stdin"
    )
    missing = run_main("cka", "-i", str(tmp_path / "none.txt"), "--model", str(tiny_bert))
    assert missing.stderr.strip().endswith(": no such file")
