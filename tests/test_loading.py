"""Loading: the bundled default, local folders, offline hub ids, unsupported models, dtype checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

import bertscope


def _save_foreign_model(folder: Path, config: transformers.PretrainedConfig) -> Path:
    """Write a tiny non-BERT model (config + random weights) into `folder` and return it."""
    transformers.AutoModel.from_config(config).save_pretrained(folder)
    return folder


def test_bundled_info(bundled: bertscope.Model) -> None:
    info = bundled.info()
    assert isinstance(info, bertscope.ModelInfo)
    assert info.family == "bert" and info.model_type == "bert"
    assert info.n_layers == 6 and bundled.n_layers == 6
    assert info.hidden_size == 384 and info.embedding_size == 384
    assert info.vocab_size == 30522
    assert info.pooling == "mean"
    assert info.normalize is True
    assert info.max_tokens == 256 and info.max_positions == 512
    assert info.device == "cpu" and info.dtype == "float32"
    assert info.path is not None and Path(info.path, "config.json").exists()
    assert info.to_dict()["family"] == "bert"


def test_missing_path_says_it_does_not_exist(tmp_path: Path) -> None:
    with pytest.raises(bertscope.ModelLoadError, match="does not exist"):
        bertscope.load(tmp_path / "no-such-model", device="cpu")


def test_folder_without_config_names_config_json(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("not a model\n")
    with pytest.raises(bertscope.ModelLoadError, match="config.json"):
        bertscope.load(tmp_path, device="cpu")


def test_file_instead_of_folder(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"\0")
    with pytest.raises(bertscope.ModelLoadError, match="folder"):
        bertscope.load(path, device="cpu")


def test_hub_id_offline_fails_fast_with_a_way_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    # Fast means no network at all (no retries, no timeouts to wait out): every connection is recorded.
    dialled: list[object] = []
    original = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        dialled.append(address)
        original(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    with pytest.raises(bertscope.ModelLoadError) as info:
        bertscope.load("someorg/somemodel", device="cpu")
    assert dialled == []
    message = str(info.value)
    assert "someorg/somemodel" in message
    assert "offline" in message.lower() and "hub" in message.lower()
    assert "folder" in message and "--local-dir" in message
    assert not isinstance(info.value, bertscope.UnsupportedArchitecture)


def test_gpt2_is_unsupported(tmp_path: Path) -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=32)
    folder = _save_foreign_model(tmp_path / "gpt2", config)
    with pytest.raises(bertscope.UnsupportedArchitecture, match="bert") as info:
        bertscope.load(folder, device="cpu")
    assert "gpt2" in str(info.value)
    assert isinstance(info.value, bertscope.ModelLoadError)


def test_t5_is_unsupported(tmp_path: Path) -> None:
    config = transformers.T5Config(d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2, vocab_size=50)
    folder = _save_foreign_model(tmp_path / "t5", config)
    with pytest.raises(bertscope.UnsupportedArchitecture) as info:
        bertscope.load(folder, device="cpu")
    message = str(info.value)
    assert "t5" in message
    assert all(name in message for name in ("bert", "roberta", "distilbert", "deberta-v2"))


def test_bertscope_model_env_is_the_default(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tiny_dirs["distilbert"]
    monkeypatch.setenv("BERTSCOPE_MODEL", str(folder))
    model = bertscope.load(device="cpu")
    info = model.info()
    assert info.family == "distilbert"
    assert info.path == str(folder)
    assert info.hidden_size == 32 and info.n_layers == 2


def test_explicit_name_wins_over_bertscope_model_env(
    monkeypatch: pytest.MonkeyPatch, tiny_dirs: dict[str, Path]
) -> None:
    monkeypatch.setenv("BERTSCOPE_MODEL", str(tiny_dirs["bert"]))
    model = bertscope.load(tiny_dirs["electra"], device="cpu")
    assert model.info().family == "electra", "an explicit name wins over BERTSCOPE_MODEL"


def test_tiny_family_info(tiny_models: dict[str, bertscope.Model]) -> None:
    for family, model in tiny_models.items():
        info = model.info()
        assert info.family == family
        assert info.n_layers == 2 and info.hidden_size == 32
        assert info.max_tokens == 64
        assert info.embedding_size == (16 if family in ("albert", "electra") else 32)


def test_float16_on_cpu_is_invalid_spec() -> None:
    with pytest.raises(bertscope.InvalidSpec, match="float16"):
        bertscope.load(device="cpu", dtype="float16")


@pytest.mark.parametrize("dtype", ["float64", "int8", "fp32", ""])
def test_unknown_dtype_is_invalid_spec(dtype: str) -> None:
    with pytest.raises(bertscope.InvalidSpec, match="float32") as info:
        bertscope.load(device="cpu", dtype=dtype)
    assert repr(dtype) in str(info.value)


def test_bundled_is_one_name_everywhere(
    bundled: bertscope.Model, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bertscope.core.folder import FolderView, bundled_path
    from bertscope.io.job import embed_corpus

    monkeypatch.setenv("BERTSCOPE_MODEL", str(tiny_dirs["bert"]))
    named = bertscope.load("bundled", device="cpu")
    assert named.info().path == bundled.info().path, "`bundled` names the bundled model over BERTSCOPE_MODEL"
    view = FolderView.open("bundled")
    assert view is not None and view.path == bundled_path()
    monkeypatch.delenv("BERTSCOPE_MODEL")
    stores = [tmp_path / "by_default.npy", tmp_path / "by_name.npy"]
    for model, store in zip((None, "bundled"), stores, strict=True):
        embed_corpus(["one text"], store, model=model, progress=False)
    settings = [json.loads(store.with_suffix(".settings.json").read_text()) for store in stores]
    assert settings[0]["model_arg"] is None and settings[1]["model_arg"] is None, "one fingerprint"


@pytest.mark.parametrize("name", [123, 1.5, ["bundled"]])
def test_a_model_that_is_no_name_or_path_is_refused_in_one_line(name: object) -> None:
    with pytest.raises(
        bertscope.InvalidSpec, match=r"a folder path or a hub id .* not (an int|a float|a list) \("
    ):
        bertscope.load(name)  # type: ignore[arg-type]
