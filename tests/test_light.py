"""The light engine: a folder whose runtime is an exported graph opens and embeds without torch or
transformers, with the same answers as the plain Hugging Face forward (within 1e-5); the export cache is
keyed by content, checked on open, made once under a lock, and `bertscope cache` lists and clears it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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


_MARKER = "=== test_light step: "

# Runs STEPS one after another in one fresh interpreter (a process start and its imports cost seconds on a
# loaded 2-core machine, and each check needs only "torch not imported yet"), noting after each whether
# torch or transformers is imported by then: a step that imports them is caught at that step. A step
# sets `out`; `cache` (optional) is the BERTSCOPE_CACHE it runs in (read at each load).
_STEPS = """
import contextlib, io, json, os, sys
import bertscope
TEXTS = {texts!r}
results = {{}}
for name, cache, code in {steps!r}:
    if cache is not None:
        os.environ["BERTSCOPE_CACHE"] = cache
    print({marker!r} + name, file=sys.stderr, flush=True)  # what follows on stderr is this step's
    scope = {{"bertscope": bertscope, "TEXTS": TEXTS, "contextlib": contextlib, "io": io, "sys": sys}}
    exec(code, scope)
    results[name] = {{**scope["out"], "torch": "torch" in sys.modules,
                      "transformers": "transformers" in sys.modules}}
print(json.dumps(results))
"""


def _stepped(steps: list[tuple[str, str | None, str]], cache: Path) -> dict[str, dict[str, Any]]:
    """Each step's `out`, its torch and transformers flags, and what it said on stderr ("said")."""
    done = _fresh(_STEPS.format(texts=TEXTS, steps=steps, marker=_MARKER), cache)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    parts = re.split(f"{_MARKER}(\\S+)\n", done.stderr)  # [before, name, its part, name, its part, ...]
    for name, said in zip(parts[1::2], parts[2::2], strict=True):
        found[name]["said"] = said
    return found


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
def two_exports(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[int], list[tuple[bytes, bytes]]]:
    """Two fresh processes embedding TEXTS on ONNX Runtime at once in an empty cache (so one exports the
    bundled model while the other waits on the lock), once for the module: the cache they leave, their
    exit codes and their (stdout, stderr)."""
    cache = tmp_path_factory.mktemp("exported") / "cache"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTSCOPE_CACHE": str(cache)}
    env.pop("BERTSCOPE_MODEL", None)
    code = _EMBED.format(options="backend='onnxruntime'", texts=TEXTS)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(2)
    ]
    outputs = [run.communicate() for run in runs]
    return cache, [run.returncode for run in runs], outputs


@pytest.fixture(scope="module")
def exported_cache(two_exports: tuple[Path, list[int], list[tuple[bytes, bytes]]]) -> Path:
    """A cache holding the bundled model's export, made once by a fresh process, for tests to copy."""
    assert two_exports[1] == [0, 0], two_exports[2]
    return two_exports[0]


# What each test below checks a fresh process does without torch, in a copy of `exported_cache`.
_CLI = (
    "from bertscope.cli import main\n"
    "sys.argv = ['bertscope', 'embed', *TEXTS, '--backend', 'onnxruntime', '--json']\n"
    "printed = io.StringIO()\n"
    "with contextlib.redirect_stdout(printed):\n"
    "    try:\n        main()\n    except SystemExit:\n        pass\n"
    "out = {'printed': printed.getvalue()}\n"
)
_ENCODE = (
    "m = bertscope.load(backend='onnxruntime')\n"
    "vectors = m.encode(TEXTS, device='cpu')\n"
    "batch = m.batch(TEXTS)\n"
    "out = {'light': m.light, 'vectors': vectors.tolist(),\n"
    "       'ids': batch['input_ids'].tolist(), 'mask': batch['attention_mask'].tolist()}\n"
)
_ANATOMY = (
    "a = bertscope.load(backend='onnxruntime').anatomy([('I like eating bread', 'a cat')])[0]\n"
    "out = {'error': a.max_abs_error, 'summed': a.summed.tolist(),\n"
    "       'encoder_input': a.encoder_input.tolist()}\n"
)
WORDS = ["bank", "bread", "river", "storm"]
CONTEXTS = [*TEXTS, "The bank by the river.", "He took bread to the bank.", "The storm hit the bank."]
_CONTEXTUALITY = (
    "from bertscope.research.contextuality import contextuality\n"
    f"result = contextuality(bertscope.load(backend='onnxruntime'), {CONTEXTS!r}, words={WORDS!r})\n"
    "out = {'records': result.records}\n"
)


def _embeds(backend: str) -> str:
    return (
        f"m = bertscope.load(backend={backend!r})\n"
        "out = {'backend': m.info().backend, 'vectors': m.embed(TEXTS).vectors.tolist()}\n"
    )


@pytest.fixture(scope="module")
def light_steps(tmp_path_factory: pytest.TempPathFactory, exported_cache: Path) -> dict[str, dict[str, Any]]:
    """One fresh process in a copy of the export's cache, running each light check in turn."""
    cache = tmp_path_factory.mktemp("light-steps") / "cache"
    shutil.copytree(exported_cache, cache)  # copy2 keeps the times the export's record checks
    steps = [
        ("onnxruntime", None, _embeds("onnxruntime")),
        ("cli", None, _CLI),
        ("encode", None, _ENCODE),
        ("anatomy", None, _ANATOMY),
        ("contextuality", None, _CONTEXTUALITY),
        # OpenVINO reads the same ONNX export (its float32 keeps no IR of its own)
        ("openvino", None, _embeds("openvino")),
    ]
    return _stepped(steps, cache)


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_a_fresh_process_embeds_from_the_export_without_torch(
    two_exports: tuple[Path, list[int], list[tuple[bytes, bytes]]],
    light_steps: dict[str, dict[str, Any]],
    reference: np.ndarray,
    backend: str,
) -> None:
    # the export both runtimes read, made by the module's first process (with torch: the one step that
    # needs it); float32 OpenVINO reads that ONNX graph (tests/test_openvino.py proves it equal to torch)
    _, codes, outputs = two_exports
    assert codes == [0, 0], outputs
    (first,) = [json.loads(out) for out, err in outputs if b"exporting the model to ONNX" in err]
    assert first["torch"]
    again = light_steps[backend]
    assert again["torch"] is False and again["transformers"] is False and again["said"] == ""
    assert again["backend"] == backend
    for found in (first, again):
        assert np.abs(np.array(found["vectors"]) - reference).max() < 1e-5


def test_the_default_load_is_light_wherever_its_recorded_runtime_is_not_torch(
    cache: Path, exported_cache: Path, reference: np.ndarray, bundled: bertscope.Model
) -> None:
    shutil.copytree(exported_cache, cache)  # the ONNX export, made once (with torch) by a fresh process
    measured = Path(str((bundled.exact_choice or {}).get("measured", "")))
    if measured.is_file():  # the session's model measured the runtimes: its figures, as a fresh process's
        (cache / "fast").mkdir(exist_ok=True)
        # copied, not copy2: figures older than the package's files are measured again (an edited checkout)
        shutil.copy(measured, cache / "fast" / measured.name)
    else:
        _embedded("", cache)  # the first load measures the runtimes once
    again, said = _embedded("", cache)
    assert np.abs(np.array(again["vectors"]) - reference).max() < 1e-5
    # Which runtime wins is this machine's measurement; the promise holds for whichever it is.
    assert again["torch"] is (again["backend"] == "torch")
    assert again["transformers"] is (again["backend"] == "torch")


def test_the_command_line_embeds_without_torch(
    light_steps: dict[str, dict[str, Any]], reference: np.ndarray
) -> None:
    found = light_steps["cli"]  # `bertscope embed ... --backend onnxruntime --json` in a fresh process
    assert (found["torch"], found["transformers"]) == (False, False)
    assert np.abs(np.array(json.loads(found["printed"])["vectors"]) - reference).max() < 1e-5


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
    tmp_path: Path, cache: Path, exported_cache: Path, bundled_path: Path
) -> None:
    """Two checkouts of the same model share one export; a changed weight is another."""
    # the bundled model's export, made by a fresh process (exporting again here would cost seconds): the
    # copy of its folder must read that one, not make a second
    shutil.copytree(exported_cache, cache)
    copy = tmp_path / "copy"
    shutil.copytree(bundled_path, copy)
    first = bertscope.load(bundled_path, backend="onnxruntime")
    second = bertscope.load(copy, backend="onnxruntime")
    assert first.engine.runner.path == second.engine.runner.path
    exports = sorted((cache / "onnx").glob("*.onnx"))
    assert len(exports) == 1
    np.testing.assert_array_equal(first.embed(TEXTS).vectors, second.embed(TEXTS).vectors)


def test_encode_on_a_named_device_and_the_padded_batch_import_no_torch(
    light_steps: dict[str, dict[str, Any]], bundled: bertscope.Model
) -> None:
    """Naming the device in `encode` and `Model.batch` (tokenizer ids, padded) need no torch."""
    found = light_steps["encode"]
    assert found["light"] is True and found["torch"] is False
    want = bundled.batch(TEXTS)
    assert found["ids"] == want["input_ids"].tolist() and found["mask"] == want["attention_mask"].tolist()
    assert np.abs(np.array(found["vectors"]) - bundled.encode(TEXTS)).max() < 1e-5


def test_anatomy_takes_the_embedding_layer_apart_without_torch(
    light_steps: dict[str, dict[str, Any]], bundled_path: Path
) -> None:
    """`anatomy` of a light model reads the folder's weights and proves them against the export's layer 0,
    in a fresh process that imports no torch; its steps equal the plain Hugging Face embedding layer."""
    found = light_steps["anatomy"]
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


def test_the_service_takes_the_embedding_layer_apart_without_loading_the_module(
    cache: Path, bundled_path: Path
) -> None:
    """/anatomy of a light model bounds its answer from the folder's weights: the module stays unloaded
    (it was loaded only to count the parts, 3 s at a fresh server's first request), and the answer is the
    plain Hugging Face embedding layer within 1e-5."""
    from fastapi.testclient import TestClient

    from bertscope.server import create_app

    bertscope.load(bundled_path, backend="onnxruntime")  # the export, made once
    model = bertscope.load(bundled_path, backend="onnxruntime")
    assert isinstance(model, Model) and model.light
    with TestClient(create_app(model)) as client:
        answer = client.post("/anatomy", json={"inputs": ["I like eating bread", "a cat"]})
    assert answer.status_code == 200, answer.text[:300]
    assert model.light, "/anatomy loaded the PyTorch module"
    found = answer.json()
    assert found["lacks"] == ["projection"] and found["max_abs_error"] < 1e-5
    tokenizer = AutoTokenizer.from_pretrained(bundled_path)
    reference = AutoModel.from_pretrained(bundled_path).eval()
    with torch.inference_mode():
        batch = tokenizer("I like eating bread", "a cat", return_tensors="pt")
        layer0 = reference(**batch, output_hidden_states=True).hidden_states[0][0].numpy()
    np.testing.assert_allclose(np.array(found["steps"]["encoder_input"]), layer0, rtol=0, atol=1e-5)


def test_a_damaged_export_is_made_again_and_never_trusted(
    tmp_path: Path,
    exported_cache: Path,
    reference: np.ndarray,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each damage in a cache of its own, made again here; one fresh process then reads the three."""
    monkeypatch.delenv("BERTSCOPE_MODEL", raising=False)
    caches = {}
    for damage in ("flipped", "truncated", "no-record"):
        cache = caches[damage] = tmp_path / damage / "cache"
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
        # Made again here, where torch is loaded already (a fresh process would spend ~3 s importing it,
        # and whether the first load imports torch is not what is checked); trusted by a fresh process after.
        monkeypatch.setenv("BERTSCOPE_CACHE", str(cache))
        capsys.readouterr()
        found = bertscope.load(backend="onnxruntime").embed(TEXTS).vectors
        said = capsys.readouterr().err
        assert "exporting the model to ONNX" in said, damage
        if damage != "no-record":
            assert "does not match its recorded size and SHA-256" in said, damage
        assert np.abs(found - reference).max() < 1e-5, damage
    steps = [(damage, str(cache), _embeds("onnxruntime")) for damage, cache in caches.items()]
    for damage, again in _stepped(steps, tmp_path).items():
        assert (again["torch"], again["said"]) == (False, ""), damage
        assert np.abs(np.array(again["vectors"]) - reference).max() < 1e-5, damage


def test_two_processes_export_the_same_model_once(
    two_exports: tuple[Path, list[int], list[tuple[bytes, bytes]]], reference: np.ndarray
) -> None:
    _, codes, outputs = two_exports  # the module's first two processes, started at once in an empty cache
    assert codes == [0, 0], outputs
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
    light_steps: dict[str, dict[str, Any]], bundled: bertscope.Model
) -> None:
    """contextuality read the static rows from the PyTorch module (input_embeddings), so it loaded torch
    where everything else it needs was served light; its rows now come from the folder, the same figures."""
    from bertscope.research.contextuality import contextuality

    light = light_steps["contextuality"]
    assert light["torch"] is False
    here = contextuality(bundled, CONTEXTS, words=WORDS).records
    assert [r["layer"] for r in light["records"]] == [r["layer"] for r in here]
    for mine, theirs in zip(light["records"], here, strict=True):
        for key, value in theirs.items():
            if key != "layer":
                assert mine[key] == pytest.approx(value, abs=1e-5), key
