"""The light engine: a folder whose runtime is an exported graph opens and embeds without torch or
transformers, with the same answers as the plain Hugging Face forward (within 1e-5); the export cache is
keyed by content, checked on open, made once under a lock, and `bertscope cache` lists and clears it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

import bertscope
from bertscope.core.loading import open_light
from bertscope.model import Model

TEXTS = ["I like eating bread", "The storm hit the coast at night.", "a cat"]

# Embeds TEXTS in a fresh interpreter and says which heavy modules it imported.
_EMBED = """
import json, sys, bertscope
m = bertscope.load({options})
vectors = m.embed({texts!r}).vectors
print(json.dumps({{"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                  "backend": m.info().backend, "vectors": vectors.tolist()}}))
"""


def _fresh(code: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    env.pop("BERTSCOPE_MODEL", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)


def _embedded(options: str, cache: Path) -> tuple[dict[str, object], str]:
    done = _fresh(_EMBED.format(options=options, texts=TEXTS), cache)
    return json.loads(done.stdout), done.stderr


@pytest.fixture(scope="module")
def reference(bundled_path: Path) -> np.ndarray:
    """The plain Hugging Face forward of TEXTS, mean-pooled and normalised as the model's own pipeline."""
    tokenizer = AutoTokenizer.from_pretrained(bundled_path)
    model = AutoModel.from_pretrained(bundled_path).eval()
    batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=1).numpy()


@pytest.fixture(scope="module")
def first_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], str]:
    """A fresh process embedding TEXTS on ONNX Runtime with an empty cache (so it exports the bundled
    model, once for the module): the cache it leaves, what it printed on stdout and what it said."""
    folder = tmp_path_factory.mktemp("exported") / "cache"
    found, said = _embedded("backend='onnxruntime'", folder)
    return folder, found, said


@pytest.fixture(scope="module")
def exported_cache(first_export: tuple[Path, dict[str, object], str]) -> Path:
    """A cache holding the bundled model's export, made once by a fresh process, for tests to copy."""
    return first_export[0]


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_a_fresh_process_embeds_from_the_export_without_torch(
    cache: Path, reference: np.ndarray, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "onnxruntime":  # the module's first export is this first run: its cache copied
        folder, first, said = request.getfixturevalue("first_export")
        shutil.copytree(folder, cache)
    else:
        first, said = _embedded(f"backend={backend!r}", cache)  # exports: the one step that needs torch
    assert first["torch"] and "exporting the model to ONNX" in said
    again, said = _embedded(f"backend={backend!r}", cache)
    assert again["torch"] is False and again["transformers"] is False and said == ""
    assert again["backend"] == backend
    for found in (first, again):
        assert np.abs(np.array(found["vectors"]) - reference).max() < 1e-5


def test_the_default_load_is_light_wherever_its_recorded_runtime_is_not_torch(
    cache: Path, exported_cache: Path, reference: np.ndarray
) -> None:
    shutil.copytree(exported_cache, cache)  # the ONNX export, made once (with torch) by a fresh process
    _embedded("", cache)  # the first load measures the runtimes (and makes the OpenVINO model) once
    again, said = _embedded("", cache)
    assert np.abs(np.array(again["vectors"]) - reference).max() < 1e-5
    # Which runtime wins is this machine's measurement; the promise holds for whichever it is.
    assert again["torch"] is (again["backend"] == "torch")
    assert again["transformers"] is (again["backend"] == "torch")


def test_the_command_line_embeds_without_torch(
    cache: Path, exported_cache: Path, reference: np.ndarray
) -> None:
    shutil.copytree(exported_cache, cache)  # the export, made once (with torch) by a fresh process
    code = (
        "import json, sys\nfrom bertscope.cli import main\n"
        f"sys.argv = ['bertscope', 'embed', *{TEXTS!r}, '--backend', 'onnxruntime', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(['torch' in sys.modules, 'transformers' in sys.modules]), file=sys.stderr)\n"
    )
    done = _fresh(code, cache)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [False, False]
    assert np.abs(np.array(json.loads(done.stdout)["vectors"]) - reference).max() < 1e-5


def test_light_facts_equal_the_loaded_module_on_every_family(tiny_dirs: dict[str, Path]) -> None:
    """Opened without torch, each family tokenizes, counts and pools as the loaded module does; its
    forwards (torch, loaded on first use) give the same vectors."""
    opened = 0
    for family, folder in tiny_dirs.items():
        parts = open_light(folder)
        if parts is None:  # model code shipped with the folder: only a full load may open it
            continue
        opened += 1
        light = Model(parts, device="cpu", max_tokens=None, token_budget=None)
        full = bertscope.load(folder, device="cpu", backend="torch")
        assert light.light, family
        assert light.info().to_dict() == {**full.info().to_dict(), "exact": None}, family
        assert (light.n_layers, light.pad_id, light.max_tokens) == (
            full.n_layers,
            full.pad_id,
            full.max_tokens,
        )
        assert light.engine.has_pooler == full.engine.has_pooler, family
        pair = ("How are you?", "Fine, thanks.")
        assert [t.ids for t in light.tokenize([*TEXTS, pair])] == [
            t.ids for t in full.tokenize([*TEXTS, pair])
        ]
        np.testing.assert_array_equal(light.static(["a", "cat"]), full.static(["a", "cat"]))
        assert light.light, f"{family}: static rows must not load torch"
        for pooling in ("mean", "cls", "max", *(["pooler"] if full.engine.has_pooler else [])):
            layers = "-1" if pooling == "pooler" else "all"  # the pooler reads the last layer only
            got = light.embed(TEXTS, layers=layers, pooling=pooling).vectors
            want = full.embed(TEXTS, layers=layers, pooling=pooling).vectors
            assert np.abs(got - want).max() < 1e-5, (family, pooling)
    assert opened >= 10


def test_the_export_cache_is_one_copy_per_model_content(
    tmp_path: Path, cache: Path, bundled_path: Path
) -> None:
    """Two checkouts of the same model share one export; a changed weight is another."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(bundled_path, copy)
    first = bertscope.load(bundled_path, backend="onnxruntime")
    second = bertscope.load(copy, backend="onnxruntime")
    assert first.engine.runner.path == second.engine.runner.path
    exports = sorted((cache / "onnx").glob("*.onnx"))
    assert len(exports) == 1
    np.testing.assert_array_equal(first.embed(TEXTS).vectors, second.embed(TEXTS).vectors)


def test_encode_on_a_named_device_and_the_padded_batch_import_no_torch(
    cache: Path, exported_cache: Path, bundled: bertscope.Model
) -> None:
    """Naming the device in `encode` and `Model.batch` (tokenizer ids, padded) need no torch."""
    shutil.copytree(exported_cache, cache)
    code = (
        "import json, sys, bertscope\n"
        "m = bertscope.load(backend='onnxruntime')\n"
        f"vectors = m.encode({TEXTS!r}, device='cpu')\n"
        f"batch = m.batch({TEXTS!r})\n"
        "print(json.dumps({'light': m.light, 'torch': 'torch' in sys.modules, 'vectors': vectors.tolist(),\n"
        "                  'ids': batch['input_ids'].tolist(), 'mask': batch['attention_mask'].tolist()}))\n"
    )
    found = json.loads(_fresh(code, cache).stdout)
    assert found["light"] is True and found["torch"] is False
    want = bundled.batch(TEXTS)
    assert found["ids"] == want["input_ids"].tolist() and found["mask"] == want["attention_mask"].tolist()
    assert np.abs(np.array(found["vectors"]) - bundled.encode(TEXTS)).max() < 1e-5


def test_anatomy_takes_the_embedding_layer_apart_without_torch(
    cache: Path, exported_cache: Path, bundled_path: Path
) -> None:
    """`anatomy` of a light model reads the folder's weights and proves them against the export's layer 0,
    in a fresh process that imports no torch; its steps equal the plain Hugging Face embedding layer."""
    shutil.copytree(exported_cache, cache)
    code = (
        "import json, sys, bertscope\n"
        "a = bertscope.load(backend='onnxruntime').anatomy([('I like eating bread', 'a cat')])[0]\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'error': a.max_abs_error,\n"
        "                  'summed': a.summed.tolist(), 'encoder_input': a.encoder_input.tolist()}))"
    )
    found = json.loads(_fresh(code, cache).stdout)
    assert found["torch"] is False and found["error"] < 1e-5
    tokenizer = AutoTokenizer.from_pretrained(bundled_path)
    model = AutoModel.from_pretrained(bundled_path).eval()
    batch = tokenizer("I like eating bread", "a cat", return_tensors="pt")
    with torch.inference_mode():
        layer0 = model(**batch, output_hidden_states=True).hidden_states[0][0].numpy()
        emb = model.embeddings
        ids, types = batch["input_ids"], batch["token_type_ids"]
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        summed = (
            emb.word_embeddings(ids) + emb.position_embeddings(positions) + emb.token_type_embeddings(types)
        )
    np.testing.assert_allclose(np.array(found["encoder_input"]), layer0, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.array(found["summed"]), summed[0].numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("damage", ["flipped", "truncated", "no record"])
def test_a_damaged_export_is_made_again_and_never_trusted(
    cache: Path,
    exported_cache: Path,
    reference: np.ndarray,
    damage: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(exported_cache, cache)  # copy2 keeps the times the export's record checks
    (export,) = (cache / "onnx").glob("*.onnx")
    data = bytearray(export.read_bytes())
    if damage == "flipped":  # the same size, other bytes: only the SHA-256 can tell
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
        export.write_bytes(bytes(data))
    elif damage == "truncated":  # a copy cut short
        export.write_bytes(bytes(data[: len(data) // 3]))
    else:
        export.with_suffix(".json").unlink()
    # Made again here, where torch is loaded already (a fresh process would spend ~3 s importing it, and
    # whether the first load imports torch is not what is checked); trusted by a fresh process after.
    monkeypatch.delenv("BERTSCOPE_MODEL", raising=False)
    capsys.readouterr()
    found = bertscope.load(backend="onnxruntime").embed(TEXTS).vectors
    said = capsys.readouterr().err
    assert "exporting the model to ONNX" in said
    if damage != "no record":
        assert "does not match its recorded size and SHA-256" in said
    assert np.abs(found - reference).max() < 1e-5
    again, said = _embedded("backend='onnxruntime'", cache)
    assert again["torch"] is False and said == ""


def test_two_processes_export_the_same_model_once(cache: Path, reference: np.ndarray) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    code = _EMBED.format(options="backend='onnxruntime'", texts=TEXTS)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(2)
    ]
    outputs = [run.communicate() for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    said = "".join(err.decode() for _, err in outputs)
    assert said.count("exporting the model to ONNX") == 1
    for out, _ in outputs:
        assert np.abs(np.array(json.loads(out)["vectors"]) - reference).max() < 1e-5


def test_an_unwritable_cache_still_answers_exactly(
    tmp_path: Path, reference: np.ndarray, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    # in this process (torch loaded already): what the load says and runs is checked, not what it imports
    monkeypatch.setenv("BERTSCOPE_CACHE", str(blocked / "cache"))
    monkeypatch.delenv("BERTSCOPE_MODEL", raising=False)
    capsys.readouterr()
    model = bertscope.load()
    said = capsys.readouterr().err
    assert model.info().backend == "torch" and "set BERTSCOPE_CACHE to a writable folder" in said
    assert np.abs(model.embed(TEXTS).vectors - reference).max() < 1e-5


def test_the_cache_command_lists_and_clears(cache: Path, exported_cache: Path, bundled_path: Path) -> None:
    from console import run_main

    shutil.copytree(exported_cache, cache)  # the export a fresh process made of the bundled model
    bertscope.load(bundled_path, backend="onnxruntime")
    listed = json.loads(run_main("cache", "--json").stdout)["files"]
    exports = [f for f in listed if f["kind"] == "ONNX export"]
    assert len(exports) == 1 and exports[0]["bytes"] > 10_000_000
    assert str(bundled_path.resolve()) in exports[0]["folders"]
    removed = json.loads(run_main("cache", "--clear", str(bundled_path), "--json").stdout)["removed"]
    assert [f["path"] for f in removed] == [exports[0]["path"]]
    assert not list((cache / "onnx").glob("*.onnx"))
    assert run_main("cache", "some-folder").code == 2  # a model is taken with --clear only


def test_onnx_runtime_stops_at_the_deepest_layer_asked(bundled_path: Path) -> None:
    """Early stop on ONNX Runtime: a forward to layer k runs a graph holding no node of a later layer,
    and gives what the whole graph gives for layers 0..k."""
    from bertscope.backends.onnx import cut_graph

    m = bertscope.load(bundled_path, backend="onnxruntime")
    runner = m.engine.runner
    whole = m.embed_tokens(TEXTS, layers="0:3", combine="concat")
    early = m.embed_tokens(TEXTS, layers="0:3", combine="concat")  # the same depth: its cut graph
    assert runner.cut_depths == [2]
    for a, b in zip(whole, early, strict=True):
        np.testing.assert_array_equal(a.vectors, b.vectors)
    full = bertscope.load(bundled_path, backend="torch").embed_tokens(TEXTS, layers="0:3", combine="concat")
    for a, b in zip(early, full, strict=True):
        assert np.abs(a.vectors - b.vectors).max() < 1e-5
    nodes = [
        node.name for node in cut_graph(runner.path, runner.input_names, ["hidden_0", "hidden_1"]).graph.node
    ]
    assert any("/layer.0/" in name for name in nodes)
    assert not any(f"/layer.{i}/" in name for name in nodes for i in range(1, 6))
    m.embed(TEXTS, layers="-1")  # the last layer runs the whole graph, opening no cut
    assert runner.cut_depths == [2]


def test_a_tokenizer_json_that_disagrees_with_its_config_is_read_as_transformers_reads_it(
    tmp_path: Path, bundled_path: Path
) -> None:
    """transformers rebuilds BERT's normalizer from tokenizer_config.json (do_lower_case): a tokenizer.json
    that no longer lowercases must not make the light path tokenize otherwise; it loads instead."""
    import shutil

    folder = tmp_path / "stale"
    shutil.copytree(bundled_path, folder)
    spec = json.loads((folder / "tokenizer.json").read_text())
    spec["normalizer"]["lowercase"] = False
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    assert open_light(folder) is None
    hf = AutoTokenizer.from_pretrained(folder)
    model = bertscope.load(folder, backend="torch")
    assert model.tokenize("The Bank").ids == hf("The Bank")["input_ids"]


def test_contextuality_runs_light_and_equals_the_torch_run(
    cache: Path, exported_cache: Path, bundled: bertscope.Model
) -> None:
    """contextuality read the static rows from the PyTorch module (input_embeddings), so it loaded torch
    where everything else it needs was served light; its rows now come from the folder, the same figures."""
    from bertscope.research.contextuality import contextuality

    words = ["bank", "bread", "river", "storm"]
    texts = [*TEXTS, "The bank by the river.", "He took bread to the bank.", "The storm hit the bank."]
    shutil.copytree(exported_cache, cache)  # the export, made once (with torch) by a fresh process
    code = (
        "import json, sys, bertscope\n"
        "from bertscope.research.contextuality import contextuality\n"
        f"result = contextuality(bertscope.load(backend='onnxruntime'), {texts!r}, words={words!r}, "
        "min_contexts=1)\n"
        "print(json.dumps({'torch': 'torch' in sys.modules, 'records': result.records}))\n"
    )
    light = json.loads(_fresh(code, cache).stdout.strip().splitlines()[-1])
    assert light["torch"] is False
    here = contextuality(bundled, texts, words=words, min_contexts=1).records
    assert [r["layer"] for r in light["records"]] == [r["layer"] for r in here]
    for mine, theirs in zip(light["records"], here, strict=True):
        for key, value in theirs.items():
            if key != "layer":
                assert mine[key] == pytest.approx(value, abs=1e-5), key
