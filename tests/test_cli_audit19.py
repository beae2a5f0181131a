"""Audit 19e/19f: an install without torch, attention's notes, and the command line's shared helpers say
what is so, and what to do, in one line."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bertscope
from bertscope.backends.digest import installed_key
from bertscope.core.loading import TORCH_PIN, open_light
from bertscope.errors import BackendUnavailable, InvalidInput, InvalidSpec
from console import run_main

ROOT = Path(__file__).resolve().parent.parent


def test_the_torch_named_is_the_one_the_makefile_installs() -> None:
    assert re.search(rf"^TORCH_VERSION := {re.escape(TORCH_PIN)}$", (ROOT / "Makefile").read_text(), re.M)


def test_a_blocked_torch_stamps_the_same_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded exact-runtime choice is found where torch cannot be imported (it stamped '-' and was
    missed, so the load measured again, which needs torch)."""
    key = installed_key()
    monkeypatch.setitem(sys.modules, "torch", None)
    assert installed_key() == key


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_a_light_model_without_torch_says_what_to_install(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    loaded = open_light(tiny_dirs["bert"])
    assert loaded is not None
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(BackendUnavailable, match=rf"needs the model's PyTorch module, and {missing} is not"):
        loaded.model  # noqa: B018
    if missing == "torch":
        with pytest.raises(BackendUnavailable, match=rf"pip install 'torch=={re.escape(TORCH_PIN)}'"):
            loaded.model  # noqa: B018


def test_a_command_that_needs_torch_without_it_is_one_line(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    ran = run_main("embed", "a cat", "-m", str(tiny_dirs["bert"]), "--backend", "torch")
    assert ran.code == 1 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"error: loading {tiny_dirs['bert']} needs the model's PyTorch module, and torch is not installed "
        f"here: pip install 'torch=={TORCH_PIN}' (the version bertscope's Makefile installs)"
    ]


_DROPS_ATTENTIONS = """from transformers import BertModel


class CustomBertModel(BertModel):
    def forward(self, *args, output_attentions=None, **kwargs):
        out = super().forward(*args, **kwargs)
        out.attentions = None
        return out
"""
_REFUSES_EAGER = """

    def set_attn_implementation(self, implementation):
        if implementation == "eager":
            raise ValueError("CustomBertModel does not support eager attention (sdpa only)")
        return super().set_attn_implementation(implementation)
"""


@pytest.mark.parametrize("refuses_eager", [False, True])
def test_a_model_that_reports_no_weights_names_the_fix(
    tiny_dirs: dict[str, Path], tmp_path: Path, refuses_eager: bool
) -> None:
    """Its own code drops the weights (0 maps) or refuses eager attention (a traceback from _eager): one
    line that says to load it without trust_remote_code, transformers' own class on eager attention."""
    folder = tmp_path / "custom"
    shutil.copytree(tiny_dirs["bert"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_custom.CustomBertModel"}
    config["_attn_implementation"] = "sdpa"
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_custom.py").write_text(_DROPS_ATTENTIONS + (_REFUSES_EAGER if refuses_eager else ""))
    ran = run_main("--trust-remote-code", "attention", "a cat", "-m", str(folder), "--backend", "torch")
    assert ran.code == 1 and "Traceback" not in ran.stderr
    said = " ".join(ran.stderr.split())
    assert said.startswith("error: ") and "load it without trust_remote_code (no --trust-remote-code)" in said
    if refuses_eager:
        assert "attention weights need eager attention (its sdpa reports none)" in said
        assert "does not support eager attention" in said
    else:
        assert "gave 0 attention maps for 2 layers" in said


def test_no_weights_from_transformers_own_class_says_eager(
    tiny_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope import attention

    monkeypatch.setattr(attention, "_from_module", lambda *_: [])
    monkeypatch.setattr(attention, "_graph_session", lambda *_: None)
    with pytest.raises(InvalidInput, match='set "attn_implementation": "eager" in its config.json'):
        tiny_models["bert"].attentions("a cat")


def test_openvino_without_onnxruntime_says_the_attention_graph_needs_it(
    cache: Path,
    tiny_dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bertscope.backends import onnx

    folder = tiny_dirs["bert"]
    bertscope.load(folder, backend="openvino")  # makes the OpenVINO export: the next load opens light
    model = bertscope.load(folder, backend="openvino")
    assert model.light

    def missing() -> None:
        raise BackendUnavailable("backend='onnxruntime' needs onnxruntime: pip install 'bertscope[onnx]'")

    monkeypatch.setattr(onnx, "require_onnxruntime", missing)
    capsys.readouterr()
    model.attentions("a cat")
    said = capsys.readouterr().err
    assert "attention: the attention graph needs onnxruntime (pip install 'bertscope[onnx]'); reading" in said
    assert "backend='onnxruntime'" not in said


@pytest.mark.parametrize("command", ["tokens", "anatomy"])
def test_a_pair_note_says_what_the_tokenizer_gives(tiny_dirs: dict[str, Path], command: str) -> None:
    """RoBERTa has a segment row; its tokenizer gives no token_type_ids (it said 'no token types')."""
    ran = run_main(command, "a cat", "--pair", "a dog", "-m", str(tiny_dirs["roberta"]))
    said = " ".join(ran.stderr.split())
    assert "tokenizer gives no token_type_ids: every token, B's included, reads segment 0" in said
    assert "has no token types" not in said
    ran = run_main(command, "a cat", "--pair", "a dog", "-m", str(tiny_dirs["distilbert"]))
    assert "has no token types (segment rows): B is marked by the separators only" in " ".join(
        ran.stderr.split()
    )


def test_debug_after_the_command_shows_the_traceback(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--debug` at the end (as "add --debug" reads) was 'No such option: --debug'; after `--` it is text."""
    from bertscope.cli import debug_first

    cli_app = importlib.import_module("bertscope.cli.app")  # the module: bertscope.cli.app is the Typer

    monkeypatch.setitem(cli_app._state, "debug", False)  # --debug sets it for the process: restored after
    assert debug_first(["embed", "a", "--debug", "--", "--debug"]) == [
        "--debug",
        "embed",
        "a",
        "--",
        "--debug",
    ]
    assert debug_first(["tokens", "--", "--debug"]) == ["tokens", "--", "--debug"]
    folder = str(tiny_dirs["bert"])
    assert "No such option" not in run_main("embed", "a", "-m", folder, "--pooling", "foo").stderr
    with pytest.raises(InvalidSpec, match="unknown pooling 'foo'"):  # raised through main: the traceback
        run_main("embed", "a", "-m", folder, "--pooling", "foo", "--debug")
    monkeypatch.setitem(cli_app._state, "debug", False)
    ran = run_main("tokens", "-m", folder, "--json", "--", "--debug")
    assert ran.code == 0 and "--debug" in ran.stdout


@pytest.mark.parametrize("command", ["attention", "anatomy"])
def test_an_unknown_long_on_a_view_of_one_window_lists_what_it_takes(
    tiny_dirs: dict[str, Path], command: str
) -> None:
    """It listed 'truncate, window, error' and then refused window."""
    ran = run_main(command, "x", "-m", str(tiny_dirs["bert"]), "--long", "bogus")
    said = " ".join(ran.stderr.split())
    assert (
        ran.code == 1 and "reads one window: choose one of: truncate, error" in said and "window," not in said
    )


def test_pair_tables_are_titled_with_both_texts(tiny_dirs: dict[str, Path]) -> None:
    """anatomy --pair was titled with A alone, and tokens --pair --pad's tables too."""
    folder = str(tiny_dirs["bert"])
    anatomy = run_main("anatomy", "How are you?", "--pair", "Fine.", "-m", folder)
    assert "embedding layer of 'How are you?' + 'Fine.':" in anatomy.stdout
    padded = run_main("tokens", "How are you?", "a cat", "--pair", "Fine.", "--pad", "-m", folder)
    assert "text 0: 'How are you?' + 'Fine.'" in padded.stdout
    assert "text 1: 'a cat' + 'Fine.'" in padded.stdout


def test_a_torch_bfloat16_load_reads_its_own_attention_weights_as_the_docs_say(
    tiny_dirs: dict[str, Path], tiny_models: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/fast-modes.md said a bfloat16 model gets the float32 model's weights: on torch it is its own."""
    text = "the cat ate the bread"
    capsys.readouterr()
    half = bertscope.load(tiny_dirs["bert"], backend="torch", dtype="bfloat16")
    weights = half.attentions(text)
    assert "float32 model's weights" not in capsys.readouterr().err
    assert not np.allclose(weights, tiny_models["bert"].attentions(text), rtol=0, atol=1e-6)
    said = " ".join((ROOT / "docs" / "fast-modes.md").read_text().split())
    assert "run in bfloat16 on OpenVINO gets the float32 model's weights" in said
    assert '`dtype="bfloat16"` load on torch returns its bfloat16 module\'s own weights, with no note' in said


def test_attention_from_the_module_without_torch_is_one_line(
    tiny_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope import attention

    monkeypatch.setattr(attention, "_graph_session", lambda *_: None)  # no graph: the module answers
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendUnavailable, match=r"reading attention weights needs the model.s PyTorch"):
        tiny_models["bert"].attentions("a cat")


def test_library_paths_that_need_torch_say_so_in_one_line(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A full load on torch, an ONNX export and an anatomy on the PyTorch module's parts ended in a raw
    ModuleNotFoundError where torch cannot be imported (fix helper 19e's report)."""
    import bertscope

    monkeypatch.setenv("BERTSCOPE_CACHE", str(tmp_path / "cache"))  # no export made yet
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendUnavailable, match=r"^loading .* needs the model's PyTorch module"):
        bertscope.load(str(tiny_dirs["bert"]), backend="torch")
    with pytest.raises(BackendUnavailable, match=r"needs the model's PyTorch module") as refused:
        bertscope.load(str(tiny_dirs["bert"]), backend="onnxruntime").embed("a cat")
    assert "\n" not in str(refused.value)
