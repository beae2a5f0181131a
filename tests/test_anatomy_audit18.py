"""Audit 18i: what the anatomy says of DeBERTa's position rows and of a bfloat16 load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

import bertscope
from tiny_models import config_variant


def test_deberta_with_position_rows_says_positions_enter_twice(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """position_biased_input adds absolute position rows here; the note said positions were relative only."""
    folder = config_variant(tiny_dirs, tmp_path, "deberta-v2", position_biased_input=True, type_vocab_size=2)
    anatomy = bertscope.load(folder, device="cpu", backend="torch").anatomy("a cat")
    assert anatomy.proof_holds and anatomy.position is not None
    assert any(note.startswith("positions enter twice: the absolute position rows") for note in anatomy.notes)
    plain = bertscope.load(tiny_dirs["deberta-v2"], device="cpu", backend="torch").anatomy("a cat")
    assert "positions are relative: each attention layer adds position-to-content biases" in plain.notes


def test_a_bfloat16_load_takes_its_own_rows_apart_and_its_proof_holds(bundled_path: Path) -> None:
    """docs/tokens-and-layers.md said the parts are the float32 weights and the proof misses on bfloat16:
    a torch bfloat16 load holds bfloat16 rows, which are its parts, and they rebuild its own layer 0."""
    half = bertscope.load(bundled_path, device="cpu", backend="torch", dtype="bfloat16").anatomy("I am Sinan")
    full = bertscope.load(bundled_path, device="cpu", backend="torch").anatomy("I am Sinan")
    assert half.proof_holds and not any("rounding moves" in note for note in half.notes)
    rounded = torch.from_numpy(full.word).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(half.word, rounded)
    assert 0 < np.abs(half.word - full.word).max() < 5e-3
