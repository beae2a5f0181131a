"""Model code shipped with a folder (config.json auto_map) runs only when asked: trust_remote_code.

The folders here are tiny local stand-ins for hub models like Jina BERT (model_type "bert", its own class)
or GTE-en v1.5 (a model type transformers does not know): a model file beside config.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
import transformers.dynamic_module_utils
from typer.testing import CliRunner

import bertscope
from bertscope.cli.app import app

SHIPPED_MODEL = '''
from transformers import BertConfig, BertModel


class TinyRotaryConfig(BertConfig):
    model_type = "tiny_rotary"


class TinyRemoteBertModel(BertModel):
    """Stands for model code a folder ships: transformers runs it only with trust_remote_code."""
'''
runner = CliRunner()


@pytest.fixture(autouse=True)
def modules_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers copies shipped code into its modules cache: keep that in the test's folder."""
    monkeypatch.setattr(transformers.dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path / "modules"))


def _shipping(source: Path, folder: Path, auto_map: dict[str, str], model_type: str | None = None) -> Path:
    shutil.copytree(source, folder)
    (folder / "modeling_tiny.py").write_text(SHIPPED_MODEL)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = auto_map
    if model_type is not None:
        config["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def shipped_bert(tiny_dirs: dict[str, Path], tmp_path: Path) -> Path:
    """model_type "bert" whose AutoModel is the folder's own class (as Jina BERT's config reads)."""
    return _shipping(
        tiny_dirs["bert"], tmp_path / "shipped", {"AutoModel": "modeling_tiny.TinyRemoteBertModel"}
    )


def test_a_folder_shipping_its_model_code_is_refused_naming_the_option(shipped_bert: Path) -> None:
    with pytest.raises(bertscope.ModelLoadError) as info:
        bertscope.load(shipped_bert, device="cpu")
    message = str(info.value)
    assert "\n" not in message and "modeling_tiny.TinyRemoteBertModel" in message
    assert "trust_remote_code=True" in message and "--trust-remote-code" in message


def test_trust_remote_code_runs_the_shipped_class_equal_to_transformers(shipped_bert: Path) -> None:
    m = bertscope.load(shipped_bert, device="cpu", trust_remote_code=True)
    assert type(m.hf_model).__name__ == "TinyRemoteBertModel" and m.info().family == "bert"
    reference = transformers.AutoModel.from_pretrained(str(shipped_bert), trust_remote_code=True).eval()
    ids = m.tokenize("the cat ate the bread").ids
    with torch.inference_mode():
        states = reference(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    expected = torch.stack(states)[:, 0].numpy()
    np.testing.assert_allclose(m.hidden_states("the cat ate the bread"), expected, atol=1e-5, rtol=0)


def test_the_command_line_refuses_then_runs_with_the_flag(shipped_bert: Path) -> None:
    refused = runner.invoke(app, ["info", "-m", str(shipped_bert)])  # main() prints it as one line
    assert isinstance(refused.exception, bertscope.ModelLoadError)
    assert "--trust-remote-code" in str(refused.exception)
    allowed = runner.invoke(app, ["--trust-remote-code", "info", "-m", str(shipped_bert), "--json"])
    assert allowed.exit_code == 0, allowed.output
    assert json.loads(allowed.stdout)["family"] == "bert"
    again = runner.invoke(app, ["info", "-m", str(shipped_bert)])  # the flag does not outlive its command
    assert isinstance(again.exception, bertscope.ModelLoadError)


def test_an_unknown_model_type_is_refused_without_asking_on_stdin(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    auto_map = {
        "AutoConfig": "modeling_tiny.TinyRotaryConfig",
        "AutoModel": "modeling_tiny.TinyRemoteBertModel",
    }
    folder = _shipping(tiny_dirs["bert"], tmp_path / "unknown", auto_map, model_type="tiny_rotary")
    with pytest.raises(bertscope.ModelLoadError, match="trust_remote_code=True"):
        bertscope.load(folder, device="cpu")
    with pytest.raises(bertscope.UnsupportedArchitecture, match="'tiny_rotary' is not a BERT-family"):
        bertscope.load(folder, device="cpu", trust_remote_code=True)


def test_a_port_transformers_ships_itself_needs_no_remote_code(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    # Nomic BERT's hub config maps AutoModel to its own NomicBertModel; transformers has that class.
    auto_map = {"AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"}
    folder = _shipping(tiny_dirs["nomic_bert"], tmp_path / "nomic", auto_map)
    m = bertscope.load(folder, device="cpu")
    assert type(m.hf_model).__name__ == "NomicBertModel" and m.info().family == "nomic_bert"
