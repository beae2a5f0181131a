"""Attention without torch: a model that answers from an exported graph reads its attention weights from
its attention graph (every layer's probabilities, exported once per model content beside its export), equal
to the plain Hugging Face forward's `output_attentions=True` within 1e-5; where the graph cannot be made the
same, the PyTorch module answers, never another answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.attention import attention_layer
from bertscope.backends import export
from bertscope.backends.cache import cached_files
from bertscope.backends.onnx import content_digest, export_onnx
from bertscope.core.families import family_for

SENTENCE = "The animal didn't cross the street because it was tired"
TEXTS: list[str | tuple[str, str]] = [SENTENCE, "a cat", ("How are you?", "Fine, thanks.")]
# Longer than the tiny ModernBERT's 16-token local window, so its windowed layer masks
LONG = "the cat ate the bread and the dog went over the house in the night with a big red car"

Reference = Callable[[str | tuple[str, str]], np.ndarray]


def _hf_reference(folder: Path, model: Any = None) -> Reference:
    """The plain Hugging Face forward's `output_attentions=True` (eager) of one text or pair (`model`: the
    folder's, loaded already)."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = model or AutoModel.from_pretrained(folder)
    model.set_attn_implementation("eager")
    model.eval()

    def attentions(text: str | tuple[str, str]) -> np.ndarray:
        batch = (
            tokenizer(*text, return_tensors="pt")
            if isinstance(text, tuple)
            else tokenizer(text, return_tensors="pt")
        )
        with torch.no_grad():
            return torch.stack(model(**batch, output_attentions=True).attentions)[:, 0].numpy()

    return attentions


@pytest.fixture(scope="module")
def hf_bundled(bundled_path: Path) -> Reference:
    return _hf_reference(bundled_path)


@pytest.fixture(scope="module")
def attention_cache(tmp_path_factory: pytest.TempPathFactory, bundled_path: Path) -> Path:
    """A cache holding the bundled model's export and attention graph, made once in this process.

    The graph's proof against the module is held at the 1e-5 these tests assert against Hugging Face, not
    at the library's stricter `ATTENTION_GATE`: the bundled model reads 5.4e-6 on one CPU and 8.5e-6 on
    another (backends/export.py), and the tests must read the graph on every CPU."""
    folder = tmp_path_factory.mktemp("attention") / "cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BERTSCOPE_CACHE", str(folder))
        patch.setattr(export, "ATTENTION_GATE", 1e-5)
        bertscope.load(bundled_path, backend="onnxruntime")  # the export (loads the module)
        light = bertscope.load(bundled_path, backend="onnxruntime")
        assert light.light
        light.attentions("a cat")  # the attention graph: made now, once
    assert len(list((folder / "onnx").glob("*-attentions-v2.onnx"))) == 1
    return folder


def _fresh(code: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    env.pop("BERTSCOPE_MODEL", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True, timeout=300
    )


def test_a_light_model_reads_its_attention_graph_equal_to_hugging_face(
    cache: Path, attention_cache: Path, bundled_path: Path, hf_bundled: Reference
) -> None:
    shutil.copytree(attention_cache, cache)
    m = bertscope.load(bundled_path, backend="onnxruntime")
    for text in TEXTS:
        got = m.attentions(text)
        want = hf_bundled(text)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert m.light  # read from the graph: the module never loaded


def test_a_fresh_process_computes_attention_without_torch(
    cache: Path, attention_cache: Path, hf_bundled: Reference
) -> None:
    shutil.copytree(attention_cache, cache)
    code = (
        "import json, sys, bertscope\n"
        "m = bertscope.load(backend='onnxruntime')\n"
        "found = m.attentions(('How are you?', 'Fine, thanks.'))\n"
        "why = m.explain('a cat sat', 'a dog sat', pooling='cls')\n"  # its [CLS] attention row
        "print(json.dumps({'torch': 'torch' in sys.modules, 'transformers': 'transformers' in sys.modules,\n"
        "                  'weights': found.tolist(), 'method': why.method}))\n"
    )
    found = json.loads(_fresh(code, cache).stdout)
    assert found["torch"] is False and found["transformers"] is False
    assert "attention" in found["method"]
    want = hf_bundled(("How are you?", "Fine, thanks."))
    np.testing.assert_allclose(np.array(found["weights"]), want, rtol=0, atol=1e-5)


def test_the_attention_command_answers_without_torch_where_the_default_runtime_is_a_graph(
    cache: Path, attention_cache: Path, bundled: bertscope.Model, hf_bundled: Reference
) -> None:
    """`bertscope attention` as typed (the exact default, measured once per machine: the session's own
    measurement is copied in) imports torch only where that runtime is torch."""
    shutil.copytree(attention_cache, cache)
    measured = Path(str((bundled.exact_choice or {}).get("measured", "")))
    if not measured.is_file():
        pytest.skip("the session's model did not measure the exact default (a runtime alone)")
    (cache / "fast").mkdir(exist_ok=True)
    # a fresh date: a measurement older than the installed package is measured again (backends/fast.py)
    shutil.copy(measured, cache / "fast" / measured.name)
    code = (
        "import json, sys\n"
        "sys.argv = ['bertscope', *sys.argv[1:]]\n"
        "from bertscope.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(json.dumps('torch' in sys.modules), file=sys.stderr)\n"
    )
    done = _fresh(code, cache, "attention", SENTENCE, "--layer", "5", "--json")
    found = json.loads(done.stdout)
    assert json.loads(done.stderr.strip().splitlines()[-1]) is (bundled.backend == "torch")
    want = hf_bundled(SENTENCE)[4].mean(axis=0)
    assert found["layer"] == 5
    np.testing.assert_allclose(np.array(found["attention"]), want, rtol=0, atol=1e-5)


def _light(folder: Path, module: Any = None) -> bertscope.Model:
    """The model in `folder` opened light on ONNX Runtime, its export made here first (from `module`: the
    folder's, loaded already)."""
    module = module or AutoModel.from_pretrained(folder).eval()
    export_onnx(lambda: module, family_for(module.config.model_type), digest=content_digest(folder))
    light = bertscope.load(folder, backend="onnxruntime")
    assert light.light
    return light


def test_every_tiny_family_reads_its_attention_graph_equal_to_hugging_face(
    cache: Path, tiny_dirs: dict[str, Path]
) -> None:
    """Each family's graph is made by its first light model's call; a second light model reads it and
    stays light (no module loaded)."""
    # One torch thread: on a busy 2-core machine each tiny op of two threads waited for both to be
    # scheduled (31 s for this test at a load average of 3, 6 s on one thread); the conftest puts the count
    # back after the test.
    torch.set_num_threads(1)
    for family, folder in tiny_dirs.items():
        module = AutoModel.from_pretrained(folder)
        texts: list[str | tuple[str, str]] = [LONG, ("a cat", "the dog ate bread")]
        reference = _hf_reference(folder, module)
        wanted = [reference(text) for text in texts]
        for light in (_light(folder, module), bertscope.load(folder, backend="onnxruntime")):
            assert light.light, family
            for text, want in zip(texts, wanted, strict=True):
                np.testing.assert_allclose(light.attentions(text), want, rtol=0, atol=1e-5, err_msg=family)
        assert light.light, f"{family}: its attention graph did not serve"


@pytest.mark.parametrize("failure", ["differs", "does not trace", "no onnxruntime"])
def test_a_graph_that_cannot_be_the_modules_is_never_used(
    cache: Path,
    tiny_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: str,
) -> None:
    """A graph whose probabilities miss the module's, an exporter failure, or no onnxruntime to run the graph
    (a model on OpenVINO): the module answers (equal to Hugging Face), one line says why, and no graph is
    cached."""
    from bertscope.backends import export, onnx

    folder = tiny_dirs["bert"]
    light = _light(folder)
    if failure == "differs":
        monkeypatch.setattr(export, "_attention_gap", lambda *_: 0.5)
    elif failure == "no onnxruntime":

        def missing() -> None:
            raise bertscope.BackendUnavailable("backend='onnxruntime' needs onnxruntime")

        monkeypatch.setattr(onnx, "require_onnxruntime", missing)
    else:

        def refuse(*_: object, **__: object) -> None:
            raise RuntimeError("an op the exporter cannot follow")

        monkeypatch.setattr(torch.onnx, "export", refuse)
    got = light.attentions(LONG)
    np.testing.assert_allclose(got, _hf_reference(folder)(LONG), rtol=0, atol=1e-5)
    said = capsys.readouterr().err
    assert "reading the weights from the PyTorch module" in said
    assert ("differ from its module's by 0.5" in said) is (failure == "differs")
    assert not list((cache / "onnx").glob("*-attentions-*.onnx"))


def test_the_attention_graph_is_listed_checked_and_made_again_when_damaged(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tiny_dirs["bert"]
    want = _light(folder).attentions(LONG)  # makes the graph
    (graph,) = (cache / "onnx").glob("*-attentions-v2.onnx")
    assert graph in [f.path for f in cached_files() if f.kind == "ONNX export"]
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF
    graph.write_bytes(bytes(data))
    capsys.readouterr()
    np.testing.assert_allclose(
        bertscope.load(folder, backend="onnxruntime").attentions(LONG), want, atol=1e-6
    )
    assert "does not match its recorded size and SHA-256" in capsys.readouterr().err
    light = bertscope.load(folder, backend="onnxruntime")
    np.testing.assert_allclose(light.attentions(LONG), want, atol=1e-6)
    assert light.light  # made again, whole: read without the module


def test_an_impossible_layer_or_head_is_refused_before_anything_loads(
    cache: Path, tiny_dirs: dict[str, Path]
) -> None:
    light = _light(tiny_dirs["bert"])
    assert [attention_layer(light, layer) for layer in (1, 2, -1, -2)] == [0, 1, 1, 0]
    assert attention_layer(light, 2, head=3) == 1
    for layer, head, message in [
        (0, None, "attention layers are 1..2 (or -1..-2)"),
        (3, None, "attention layers are 1..2"),
        (-3, None, "attention layers are 1..2"),
        (1, 4, "heads 0..3"),
        (1, -1, "heads 0..3"),
    ]:
        with pytest.raises(bertscope.InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
            attention_layer(light, layer, head=head)
    assert light.light


def test_a_light_distilbert_knows_its_heads_from_n_heads(cache: Path, tiny_dirs: dict[str, Path]) -> None:
    """DistilBERT's config says n_heads: read light, no head was possible ("heads 0..-1")."""
    folder = tiny_dirs["distilbert"]
    heads = json.loads((folder / "config.json").read_text())["n_heads"]
    light = _light(folder)
    assert light.light and light.config.num_attention_heads == heads
    assert attention_layer(light, 1, head=heads - 1) == 0
    with pytest.raises(bertscope.InvalidInput, match=f"heads 0..{heads - 1}"):
        attention_layer(light, 1, head=heads)
    assert light.light


@pytest.mark.parametrize(
    ("flags", "message"),
    [(("--layer", "99"), "attention layers are 1..6"), (("--head", "12"), "heads 0..11")],
)
def test_the_command_refuses_an_impossible_layer_or_head_before_any_forward(
    monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], message: str
) -> None:
    """`bertscope attention --layer 99` computed every attention (a first export even) before refusing."""
    import bertscope.attention as attention_module
    from console import run_main

    def no_forward(*args: object, **kwargs: object) -> None:
        raise AssertionError("attentions were computed before the layer was checked")

    monkeypatch.setattr(attention_module, "attention_of", no_forward)
    ran = run_main("attention", "a cat", *flags)
    assert ran.code != 0 and message in ran.stderr and len(ran.stderr.strip().splitlines()) == 1, ran


def test_an_int8_model_is_told_its_weights_are_the_float32_models(
    cache: Path, tiny_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The int8 graph returns no probabilities: the weights are the float32 model's (equal to Hugging
    Face's within 1e-5), and that is said once per model, where it was said nowhere."""
    folder = tiny_dirs["bert"]
    torch.set_num_threads(1)
    quantized = bertscope.load(folder, backend="onnxruntime", quantize="int8")
    capsys.readouterr()
    first = quantized.attentions("a cat")
    said = capsys.readouterr().err
    assert "attention: these are the float32 model's weights: the int8 graph" in said
    np.testing.assert_allclose(first, _hf_reference(folder)("a cat"), rtol=0, atol=1e-5)
    quantized.attentions("the dog")
    assert "float32 model's weights" not in capsys.readouterr().err  # once per model
    float32 = bertscope.load(folder, backend="onnxruntime")
    float32.attentions("a cat")
    assert "float32 model's weights" not in capsys.readouterr().err  # nothing to say of a float32 model
