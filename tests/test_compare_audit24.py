"""compare's weights table, audit 24: every family's parts named where they act (ALBERT's shared layers,
the embedding projections and norms, the position tables every block reads), a head's prefix matched by
the other model's names, the weights summed a block of rows at a time, a part with nothing read not called
identical, a small change not shown as 0.000, float64 weights read, a grown vocabulary said."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from bertscope.research import weight_changes as weights_module
from bertscope.research.compare import weight_changes

# (family, a piece of the names perturbed, the part the table must name)
PERTURBED = [
    ("albert", "encoder.albert_layer_groups.0.", "shared layers (every block)"),
    ("albert", "encoder.embedding_hidden_mapping_in.", "embeddings"),
    ("electra", "embeddings_project.", "embeddings"),
    ("nomic_bert", "emb_ln.", "embeddings"),
    ("jina_embeddings_v3", "emb_ln.", "embeddings"),
    ("deberta-v2", "encoder.rel_embeddings.", "position tables (every block)"),
    ("deberta-v2", "encoder.LayerNorm.", "position tables (every block)"),
    ("mpnet", "encoder.relative_attention_bias.", "position tables (every block)"),
    ("roformer", "encoder.embed_positions.", "position tables (every block)"),
    ("bert", "pooler.", "other"),
    ("modernbert", "final_norm.", "other"),
    ("modernbert", "layers.1.", "block 1"),
    ("distilbert", "transformer.layer.0.", "block 0"),
]


def _child(source: Path, folder: Path, picked: str, *, prefix: str = "", scale: float = 0.1) -> Path:
    """`source` copied to `folder`, `scale` added to every float tensor whose name starts with `picked`,
    every name saved with `prefix` in front (a head's model)."""
    shutil.copytree(source, folder)
    weights = load_file(folder / "model.safetensors")
    for name, value in weights.items():
        if name.startswith(picked) and value.dtype.kind == "f":
            weights[name] = value + np.asarray(scale, dtype=value.dtype)
    save_file({prefix + k: v for k, v in weights.items()}, folder / "model.safetensors")
    return folder


@pytest.mark.parametrize(("family", "picked", "part"), PERTURBED)
def test_each_familys_changed_part_is_named(tiny_dirs, tmp_path, family, picked, part) -> None:
    """A change to one part of a family's child is named as that part and no other: ALBERT's layer group
    (every block runs it) was 'other' while its blocks read 'identical'."""
    base = tiny_dirs[family]
    rows, note = weight_changes(base, _child(base, tmp_path / "child", picked), 2)
    assert [r["part"] for r in rows if r["changed"]] == [part], rows
    assert note is None
    others = {r["part"] for r in rows} - {"embeddings", "block 0", "block 1", part}
    assert others <= {"other", "shared layers (every block)", "position tables (every block)"}
    if family == "albert":  # its blocks hold no weights of their own: not measured, not 'identical'
        blocks = [r for r in rows if r["block"] is not None]
        assert all(r["parameters"] == 0 and r["relative_change"] is None for r in blocks)
        assert all(r["changed"] is None for r in blocks)


@pytest.mark.parametrize(
    ("family", "prefix", "picked"),
    [("eurobert", "model.", "embed_tokens."), ("nomic_bert", "bert.", "emb_ln."),
     ("electra", "electra.", "embeddings_project.")],
)  # fmt: skip
def test_a_heads_prefix_is_matched_by_the_other_models_names(
    tiny_dirs, tmp_path, family, prefix, picked
) -> None:
    """A child saved under a head's prefix the base lacks (`model.embed_tokens`, `bert.emb_ln`) is
    paired with its base's tensors: they were only-in-A and only-in-B, and the embeddings 'identical'."""
    base = tiny_dirs[family]
    rows, note = weight_changes(base, _child(base, tmp_path / "child", picked, prefix=prefix), 2)
    assert [r["part"] for r in rows if r["changed"]] == ["embeddings"]
    assert note is None


def test_weights_are_summed_in_bounded_memory(tmp_path, monkeypatch) -> None:
    """The sums read a block of rows at a time: peak memory stays near the block, not 4x the largest
    tensor (a 60000 x 768 float32 matrix peaked at 737 MB)."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4000, 256)).astype(np.float32)  # 4 MB; 8 MB as float64
    b = a + np.float32(0.01) * rng.normal(size=a.shape).astype(np.float32)
    for name, value in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        save_file({"encoder.layer.0.dense.weight": value}, tmp_path / name / "model.safetensors")
    monkeypatch.setattr(weights_module, "BLOCK_VALUES", 256 * 64)  # 64 rows: 128 KB of float64
    tracemalloc.start()
    try:
        rows, _ = weight_changes(tmp_path / "a", tmp_path / "b", 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes / 4, peak
    diff = b.astype(np.float64) - a
    expected = np.sqrt(np.sum(diff**2) / np.sum(a.astype(np.float64) ** 2))
    assert rows[1]["relative_change"] == pytest.approx(expected, rel=1e-9)


def test_float64_weights_are_read_and_other_floats_said(tmp_path, monkeypatch) -> None:
    """F64 tensors were skipped (read 'identical'); a float type not read is named in the note, and a
    matrix grown by rows says how many rows were compared and how many B adds."""
    a = {
        "embeddings.word_embeddings.weight": np.ones((5, 4), dtype=np.float32),
        "encoder.layer.0.dense.weight": np.ones((4, 4), dtype=np.float64),
        "position_ids": np.arange(4, dtype=np.int64),
    }
    b = {k: v.copy() for k, v in a.items()}
    b["encoder.layer.0.dense.weight"] += 0.5
    b["embeddings.word_embeddings.weight"] = np.ones((8, 4), dtype=np.float32)
    for name, weights in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        save_file(weights, tmp_path / name / "model.safetensors")
    rows, note = weight_changes(tmp_path / "a", tmp_path / "b", 1)
    assert [(r["part"], r["changed"]) for r in rows] == [("embeddings", False), ("block 0", True)]
    assert rows[1]["relative_change"] == pytest.approx(0.5)
    assert note == "embeddings.word_embeddings.weight: the 5 shared rows compared; B adds 3"

    # a float8 tensor (the bytes of one): not read, so named, not counted identical
    from bertscope.core.safetensors_header import Stored

    real = weights_module.safetensors_tensors

    def with_f8(path: Path) -> dict[str, Stored]:
        found = dict(real(path))
        found["encoder.layer.0.dense.weight"] = found["encoder.layer.0.dense.weight"]._replace(
            dtype="F8_E4M3"
        )
        return found

    monkeypatch.setattr(weights_module, "safetensors_tensors", with_f8)
    rows, note = weight_changes(tmp_path / "a", tmp_path / "b", 1)
    assert rows[1] == {
        "part": "block 0", "block": 0, "parameters": 0, "relative_change": None, "changed": None
    }  # fmt: skip
    assert note is not None and "weights of a type not read, not compared: " in note
    assert "encoder.layer.0.dense.weight (F8_E4M3)" in note


def test_a_small_change_shows_its_digits() -> None:
    """A relative change of 1e-7 read 0.000 next to 'changed'; nothing read reads '-'."""
    from bertscope.cli.layers import _change

    assert _change(1e-7) == "1.0e-07"
    assert _change(0.5012) == "0.501"
    assert _change(0.0) == "0"
    assert _change(None) == "-" and _change(float("nan")) == "-"


def test_the_table_names_albert_s_shared_layers_and_a_small_change(tiny_dirs, tmp_path) -> None:
    """The command line names ALBERT's shared layers as changed and its blocks as not read (they read
    '0.000' and 'identical' beside 'other | 20 | 0.501'); a 1e-7 change shows its digits, not 0.000."""
    from typer.testing import CliRunner

    from bertscope.cli import app

    texts = tmp_path / "texts.txt"
    texts.write_text("The bank raised its rates.\nWe sat on the river bank.\n")
    base = tiny_dirs["albert"]
    child = _child(base, tmp_path / "albert", "encoder.albert_layer_groups.0.")
    done = CliRunner().invoke(app, ["compare", str(base), str(child), "-i", str(texts)])
    assert done.exit_code == 0, done.output
    assert (
        "weights: shared layers (every block) changed; the others are identical; "
        "no weights read for block 0, block 1"
    ) in done.stdout
    base = tiny_dirs["bert"]
    child = _child(base, tmp_path / "bert", "encoder.layer.1.", scale=1e-7)
    done = CliRunner().invoke(app, ["compare", str(base), str(child), "-i", str(texts)])
    assert done.exit_code == 0, done.output
    row = next(line for line in done.stdout.splitlines() if "block 1" in line and "│" in line)
    assert "e-0" in row and "0.000" not in row, row
    assert "weights: block 1 changed; the others are identical" in done.stdout


def test_float32_rows_widened_to_float64_keep_float32_s_last_bit() -> None:
    """Rows a float32 runtime made, widened to float64, differing only in float32's last bits, are one
    vector, as they are in float32 (they were read against float64's epsilon and lost the note)."""
    from bertscope.research.cka import Moments

    rng = np.random.default_rng(0)
    v = rng.standard_normal(32).astype(np.float32)
    eps = np.finfo(np.float32).eps
    rows = np.stack([v * (1 + eps * rng.integers(-2, 3, 32)).astype(np.float32) for _ in range(20)])
    both = np.stack([rows, rng.standard_normal((20, 32)).astype(np.float32)], axis=1)  # (20, 2, 32)
    for dtype in (np.float32, np.float64):
        moments = Moments(same=True)
        moments.add(both.astype(dtype))
        assert moments.same_vector_layers("x") == [0], dtype
    far = (1e5 + rng.standard_normal((20, 2, 8))).astype(np.float64)  # float64 values: float64's bit
    moments = Moments(same=True)
    moments.add(far)
    assert moments.same_vector_layers("x") == []


def test_a_weight_not_finite_is_a_change_and_said(tiny_dirs, tmp_path) -> None:
    """A nan in block 0 read 'identical in every part' (nan > 0 is False), with no note."""
    base = tiny_dirs["bert"]
    child = shutil.copytree(base, tmp_path / "nan")
    weights = load_file(child / "model.safetensors")
    name = next(n for n in weights if n.startswith("encoder.layer.0.") and weights[n].ndim == 2)
    weights[name] = weights[name].copy()
    weights[name][0, 0] = np.nan
    save_file(weights, child / "model.safetensors")
    rows, note = weight_changes(base, child, 2)
    assert [r["part"] for r in rows if r["changed"]] == ["block 0"], rows
    assert note is not None and f"not finite (nan or inf): {name}" in note


def test_debertas_convolution_is_block_0s() -> None:
    """transformers applies DeBERTa-v2's conv (conv_kernel_size > 0) to the first layer's output."""
    assert weights_module._part("encoder.conv.conv.weight", 2) == "block 0"
    assert weights_module._part("encoder.conv.LayerNorm.weight", 2) == "block 0"
