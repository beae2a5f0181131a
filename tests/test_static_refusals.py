"""A static model (model2vec) refused in its own one line where a command needs a transformer or takes what
a mean of rows has not got, and the library's refusals of a distillation or a vocabulary addition that
name the fix as the caller spells it (`dim=` in Python, `--dim` on the command line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.errors import InvalidInput, InvalidSpec
from console import run_main


def _one_line(stderr: str) -> str:
    """The CLI's error line, checked to be the only line (no traceback)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def test_vocab_add_on_a_static_model_is_refused_in_the_librarys_line(
    static_m2v: Any, m2v_folder: Path, tmp_path: Path
) -> None:
    from bertscope.vocab import add_tokens, new_words

    with pytest.raises(InvalidSpec) as own:
        static_m2v.add_tokens(["zzz"])
    for call in (add_tokens, new_words):
        with pytest.raises(InvalidSpec) as refused:
            call(static_m2v, ["zzz"])
        assert str(refused.value) == str(own.value)
    ran = run_main("vocab", "add", "-m", str(m2v_folder), "zzz", "-o", str(tmp_path / "out"))
    assert ran.code == 1
    assert _one_line(ran.stderr) == f"error: {own.value}"
    assert "static model (model2vec)" in ran.stderr and not (tmp_path / "out").exists()


def test_a_word_its_pieces_cannot_spell_is_sent_to_the_other_inits(bundled: Any, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as refused:
        bundled.add_tokens(["😀"])
    said = str(refused.value)
    assert 'init="mean" or init="random"' in said and "['[UNK]']" in said
    assert "vocabulary spells" not in said and "\n" not in said
    assert bundled.add_tokens(["😀"], init="mean").tokenize("😀").tokens[1] == "😀"  # the fix it names works
    ran = run_main("vocab", "add", "😀", "-o", str(tmp_path / "x"))
    line = _one_line(ran.stderr)
    assert ran.code == 1 and "--init mean or --init random, or --init-from 😀=a,b" in line
    assert "init=" not in line and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("vocabulary", "said"),
    [("zebra", "vocabulary='zebra' is no list of words"), (["", " "], r"vocabulary holds 2 item\(s\)")],
)
def test_distill_refuses_a_string_or_blank_words_for_vocabulary(
    tiny_models: dict[str, Any], tmp_path: Path, vocabulary: Any, said: str
) -> None:
    with pytest.raises(InvalidInput, match=said) as refused:
        bertscope.distill(tiny_models["bert"], tmp_path / "o", dim=8, vocabulary=vocabulary, progress=False)
    assert "\n" not in str(refused.value) and not (tmp_path / "o").exists()


def test_distill_names_dim_as_the_caller_spells_it_and_refuses_a_static_model_first(
    tiny_models: dict[str, Any], tiny_dirs: dict[str, Path], static_m2v: Any, m2v_folder: Path, tmp_path: Path
) -> None:
    bert, out = tiny_models["bert"], tmp_path / "o"
    width = bert.info().hidden_size
    with pytest.raises(InvalidInput) as wide:
        bertscope.distill(bert, out, dim=width * 2, progress=False)
    assert str(wide.value) == f"dim={width * 2} is wider than the model ({width}); give dim={width} or less"
    with pytest.raises(InvalidInput, match=r"^dim=-3: .*\(or dim=None: the model's width\)$"):
        bertscope.distill(bert, out, dim=-3, progress=False)
    with pytest.raises(InvalidSpec) as static:
        bertscope.distill(static_m2v, out, progress=False)  # dim=256 is wider than its 8 rows too
    assert "is a static model (model2vec)" in str(static.value) and "dim" not in str(static.value)
    ran = run_main("distill", "-m", str(tiny_dirs["bert"]), "--dim", str(width * 2), "-o", str(out))
    assert (
        _one_line(ran.stderr)
        == f"error: --dim {width * 2} is wider than the model ({width}); give --dim {width} or less"
    )
    ran = run_main("distill", "-m", str(tiny_dirs["bert"]), "--dim", "-3", "-o", str(out))
    assert "(or --dim 0: the model's width)" in _one_line(ran.stderr) and "None" not in ran.stderr
    ran = run_main("distill", "-m", str(m2v_folder), "-o", str(out))
    assert _one_line(ran.stderr) == f"error: {static.value}".replace(str(static_m2v.source), str(m2v_folder))
    assert not out.exists()


def test_a_static_model_refuses_text_pairs_in_its_own_line(static_m2v: Any, m2v_folder: Path) -> None:
    for call in (static_m2v.tokenize, static_m2v.embed, lambda texts: list(static_m2v.iter_embed(texts))):
        with pytest.raises(InvalidInput, match=r"is a static model \(model2vec\): it takes no text pairs"):
            call([("a cat", "b")])
    assert len(static_m2v.tokenize(("a cat", "b"))) == 2  # a bare tuple: two texts, as before
    for command in ("tokens", "embed"):
        ran = run_main(command, "-m", str(m2v_folder), "a cat", "--pair", "b")
        line = _one_line(ran.stderr)
        assert ran.code == 1 and "static model (model2vec): it takes no text pairs (--pair" in line
        assert "tuple" not in line
