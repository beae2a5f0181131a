"""The embedding layer taken apart, per family, checked against the plain Hugging Face forward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import bertscope
import bertscope.anatomy as anatomy_module
from console import run_main
from tiny_models import FAMILIES, config_variant

TEXTS = ["I like eating bread", "a cat", "tokenization"]
ROBERTA_STYLE = {"roberta", "xlm-roberta", "mpnet"}


def _hf_layer0(folder: Path, texts: list[str]) -> list[np.ndarray]:
    """Each text's hidden_states[0] from a plain transformers forward of a padded batch, pad trimmed."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        layer0 = model(**batch, output_hidden_states=True).hidden_states[0]
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    return [layer0[i, :n].numpy() for i, n in enumerate(lengths)]


def _expected_positions(family: str, n: int, pad_id: int) -> list[int]:
    """The position ids the family's model uses for n real tokens."""
    if family in ROBERTA_STYLE:
        return list(range(pad_id + 1, pad_id + 1 + n))
    return list(range(n))


@pytest.fixture(scope="module")
def anatomies(tiny_models: dict[str, bertscope.Model]) -> dict[str, list[bertscope.Anatomy]]:
    """The padded-batch anatomy of TEXTS for every tiny family model."""
    return {family: model.anatomy(TEXTS) for family, model in tiny_models.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_rebuild_matches_the_models_own_layer0(
    family: str, anatomies: dict[str, list[bertscope.Anatomy]], tiny_dirs: dict[str, Path]
) -> None:
    result = anatomies[family]
    assert [a.tokens.text for a in result] == TEXTS
    lengths = {len(a.tokens) for a in result}
    assert len(lengths) > 1, "the batch must need padding"
    reference = _hf_layer0(tiny_dirs[family], TEXTS)
    for anatomy, hf_row in zip(result, reference, strict=True):
        assert anatomy.max_abs_error < 1e-5
        assert anatomy.encoder_input.shape == hf_row.shape
        np.testing.assert_allclose(anatomy.encoder_input, hf_row, rtol=0, atol=1e-5)
        np.testing.assert_allclose(anatomy.model_output, hf_row, rtol=0, atol=1e-5)
        assert anatomy.n_dropped == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_parts_are_the_models_own_rows(
    family: str, anatomies: dict[str, list[bertscope.Anatomy]], tiny_models: dict[str, bertscope.Model]
) -> None:
    model = tiny_models[family]
    parts = model.family.parts(model.hf_model)  # the model's own modules, wherever the family keeps them
    word_table = parts.word.weight.detach().numpy()
    for anatomy in anatomies[family]:
        tok = anatomy.tokens
        np.testing.assert_array_equal(anatomy.word, word_table[tok.ids])
        if anatomy.position is not None:
            positions = _expected_positions(family, len(tok), model.pad_id)
            assert anatomy.position_ids == positions
            np.testing.assert_array_equal(
                anatomy.position,
                parts.position.weight.detach().numpy()[positions],  # type: ignore[union-attr]
            )
        if anatomy.token_type is not None:
            type_table = parts.token_type.weight.detach().numpy()  # type: ignore[union-attr]
            np.testing.assert_array_equal(anatomy.token_type, type_table[tok.token_type_ids])
        present = {name for name in ("word", "position", "token_type") if getattr(anatomy, name) is not None}
        assert anatomy.sum_order[0] == "word" and set(anatomy.sum_order) == present
        expected = anatomy.word
        for name in anatomy.sum_order[1:]:  # added in the order the model adds them
            expected = expected + getattr(anatomy, name)
        np.testing.assert_array_equal(anatomy.summed, expected)


@pytest.mark.parametrize("family", sorted(ROBERTA_STYLE))
def test_roberta_style_positions_start_after_pad(
    family: str, anatomies: dict[str, list[bertscope.Anatomy]], tiny_models: dict[str, bertscope.Model]
) -> None:
    assert tiny_models[family].pad_id == 1
    for anatomy in anatomies[family]:
        assert anatomy.position_ids[0] == 2
        assert anatomy.position_ids == list(range(2, 2 + len(anatomy.tokens)))


def test_bert_positions_count_from_zero(anatomies: dict[str, list[bertscope.Anatomy]]) -> None:
    for anatomy in anatomies["bert"]:
        assert anatomy.position_ids == list(range(len(anatomy.tokens)))
        assert anatomy.token_type is not None and "token_type" not in anatomy.lacks


@pytest.mark.parametrize(
    "family", ["modernbert", "gte", "nomic_bert", "roformer", "jina_embeddings_v3", "eurobert"]
)
def test_rotary_families_say_where_positions_go(
    family: str, anatomies: dict[str, list[bertscope.Anatomy]]
) -> None:
    for anatomy in anatomies[family]:
        assert "position" in anatomy.lacks and anatomy.position is None
        assert anatomy.positions_in_attention == "rotary"
        assert anatomy.position_ids == list(range(len(anatomy.tokens)))
        assert "positions are rotary" in anatomy.notes[0]


def test_mpnet_says_its_attention_adds_a_relative_bias_besides_its_position_rows(
    anatomies: dict[str, list[bertscope.Anatomy]], tiny_models: dict[str, bertscope.Model]
) -> None:
    """MPNet's position rows were shown as its whole story (positions_in_attention null, no note)."""
    module = tiny_models["mpnet"].hf_model
    assert (
        module.encoder.relative_attention_bias.num_embeddings == module.config.relative_attention_num_buckets
    )
    for anatomy in anatomies["mpnet"]:
        assert anatomy.position is not None and "position" not in anatomy.lacks
        assert anatomy.positions_in_attention == "relative"
        assert any("positions enter twice" in note for note in anatomy.notes)
    assert tiny_models["mpnet"].info().positions_in_attention == "relative"
    for family in ("bert", "roberta", "distilbert"):
        assert all(a.positions_in_attention is None for a in anatomies[family])


def test_deberta_v2_lacks_position(anatomies: dict[str, list[bertscope.Anatomy]]) -> None:
    for anatomy in anatomies["deberta-v2"]:
        assert "position" in anatomy.lacks
        assert anatomy.position is None and anatomy.position_ids == []


def test_distilbert_lacks_token_type(anatomies: dict[str, list[bertscope.Anatomy]]) -> None:
    for anatomy in anatomies["distilbert"]:
        assert "token_type" in anatomy.lacks and anatomy.token_type is None
        assert "position" not in anatomy.lacks


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_projection_widens_16_to_32(family: str, anatomies: dict[str, list[bertscope.Anatomy]]) -> None:
    for anatomy in anatomies[family]:
        n = len(anatomy.tokens)
        assert "projection" not in anatomy.lacks
        assert anatomy.word.shape == (n, 16)
        assert anatomy.summed.shape == (n, 16)
        assert anatomy.encoder_input.shape == (n, 32)
        if anatomy.projected is not None:
            assert anatomy.projected.shape == (n, 32)


@pytest.mark.parametrize(
    "family",
    ["bert", "roberta", "xlm-roberta", "distilbert", "deberta-v2", "mpnet", "modernbert", "gte", "nomic_bert"]
    + ["roformer", "jina_embeddings_v3", "eurobert"],
)
def test_no_projection_keeps_the_width(family: str, anatomies: dict[str, list[bertscope.Anatomy]]) -> None:
    for anatomy in anatomies[family]:
        assert "projection" in anatomy.lacks and anatomy.projected is None
        normalized = anatomy.summed if "layernorm" in anatomy.lacks else anatomy.normalized
        np.testing.assert_array_equal(anatomy.encoder_input, normalized)


def test_eurobert_has_no_norm_in_its_embedding_layer(anatomies: dict[str, list[bertscope.Anatomy]]) -> None:
    for anatomy in anatomies["eurobert"]:
        assert anatomy.lacks == ("position", "token_type", "projection", "layernorm")
        assert anatomy.normalized is None and anatomy.max_abs_error == 0.0
        np.testing.assert_array_equal(anatomy.encoder_input, anatomy.word)
        assert any("no norm here" in note for note in anatomy.notes)


def test_single_text_gives_one_anatomy(tiny_models: dict[str, bertscope.Model]) -> None:
    anatomy = tiny_models["bert"].anatomy("a cat")
    assert isinstance(anatomy, bertscope.Anatomy)
    assert anatomy.tokens.tokens == ["[CLS]", "a", "cat", "[SEP]"]


def test_bundled_rebuild_is_exact(bundled: bertscope.Model, bundled_path: Path) -> None:
    anatomy = bundled.anatomy("I am Sinan")
    assert anatomy.max_abs_error < 1e-5
    assert anatomy.word.shape == anatomy.encoder_input.shape == (len(anatomy.tokens), 384)
    (reference,) = _hf_layer0(bundled_path, ["I am Sinan"])
    np.testing.assert_allclose(anatomy.encoder_input, reference, rtol=0, atol=1e-5)


def test_bundled_long_text_reports_dropped_tokens(bundled: bertscope.Model) -> None:
    # 300 single-piece words + [CLS] + [SEP] = 302 tokens; the bundled model takes 256.
    with pytest.warns(
        bertscope.TruncatedTextsWarning,
        match=r"1 of 1 text\(s\).*\(46 tokens dropped\).*; split the text to see its end$",
    ):
        anatomy = bundled.anatomy("bread " * 300)
    assert bundled.max_tokens == 256
    assert anatomy.n_dropped == 302 - 256
    assert anatomy.encoder_input.shape == (256, 384)
    assert anatomy.tokens.tokens[-1] == "[SEP]"
    assert anatomy.max_abs_error < 1e-5


def test_pair_anatomy_equals_the_model_embeddings_with_token_types(
    bundled: bertscope.Model, bundled_path: Path
) -> None:
    pair = ("How are you?", "Fine, thanks.")
    batch = transformers.AutoTokenizer.from_pretrained(bundled_path)(*pair, return_tensors="pt")
    model = transformers.AutoModel.from_pretrained(bundled_path).eval()
    with torch.no_grad():
        layer0 = model.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"])[0]
        segment = model.embeddings.token_type_embeddings(batch["token_type_ids"])[0]
    (a,) = bundled.anatomy([pair])  # a pair sits in a list
    assert a.tokens.token_type_ids == batch["token_type_ids"][0].tolist()
    np.testing.assert_allclose(a.token_type, segment.numpy(), atol=1e-6)
    np.testing.assert_allclose(a.encoder_input, layer0.numpy(), atol=1e-5)
    assert a.max_abs_error < 1e-5
    # Segment row 1 really is used: the B tokens' segment vectors differ from A's.
    b_start = a.tokens.tokens.index("[SEP]") + 1
    assert not np.allclose(a.token_type[b_start], a.token_type[1])


def test_pair_hidden_states_and_sentence_vector_equal_the_plain_forward(
    bundled: bertscope.Model, bundled_path: Path
) -> None:
    pair = ("How are you?", "Fine, thanks.")
    batch = transformers.AutoTokenizer.from_pretrained(bundled_path)(*pair, return_tensors="pt")
    model = transformers.AutoModel.from_pretrained(bundled_path).eval()
    with torch.no_grad():
        states = torch.stack(model(**batch, output_hidden_states=True).hidden_states)[:, 0].numpy()
    np.testing.assert_allclose(bundled.hidden_states(pair), states, atol=1e-5)
    tokens = bundled.embed_tokens([pair], layers=-1)[0]
    assert tokens.pair == pair[1]
    np.testing.assert_allclose(tokens.vectors, states[-1], atol=1e-5)
    vector = bundled.embed([pair], pooling="mean", normalize=False).vectors[0]
    np.testing.assert_allclose(vector, states[-1].mean(axis=0), atol=1e-5)


LIGHT = {"bert", "roberta", "xlm-roberta", "distilbert", "mpnet"}  # the tiny ELECTRA has a projection


@pytest.mark.parametrize("family", FAMILIES)
def test_a_light_model_takes_its_embedding_layer_apart_from_the_folder_as_torch_does(
    family: str,
    tiny_dirs: dict[str, Path],
    anatomies: dict[str, list[bertscope.Anatomy]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Opened light, the families whose layer is rows and one LayerNorm are taken apart from the folder's
    weights without the PyTorch module; every step, position and note equals the torch anatomy's within
    1e-5, and the others (projections, rotary, relative, no norm) fall back to the module."""
    from bertscope.core.embedding_layer import embedding_weights
    from bertscope.core.loading import open_light
    from bertscope.model import Model

    parts = open_light(tiny_dirs[family])
    if parts is None:  # model code shipped with the folder: only a full load opens it
        assert family not in LIGHT
        return
    assert parts.view is not None
    assert (embedding_weights(parts.view) is not None) == (family in LIGHT)
    if family in LIGHT:  # the module's parts must not be what answers

        def refuse(*args: object) -> None:
            raise AssertionError(f"{family}: the light anatomy fell back to the PyTorch module")

        monkeypatch.setattr(anatomy_module, "_decompose_torch", refuse)
    light = Model(parts, device="cpu", max_tokens=None, token_budget=None)
    got = light.anatomy(TEXTS)
    for mine, want in zip(got, anatomies[family], strict=True):
        assert mine.max_abs_error < 1e-5
        assert (mine.lacks, mine.notes, mine.positions_in_attention, mine.position_ids) == (
            want.lacks,
            want.notes,
            want.positions_in_attention,
            want.position_ids,
        )
        for step in ("word", "position", "token_type", "summed", "projected", "normalized", "encoder_input"):
            a, b = getattr(mine, step), getattr(want, step)
            assert (a is None) == (b is None), step
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=f"{family} {step}")


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta", "mpnet"])  # the light-read families
def test_a_config_without_layer_norm_eps_reads_its_config_class_default(
    family: str, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """A config.json without `layer_norm_eps` gets its config class's default in transformers; the light
    rebuild reads the same epsilon (MPNet's was 1e-5 where MPNetConfig says 1e-12)."""
    import json
    import shutil

    from bertscope.core.embedding_layer import embedding_weights
    from bertscope.core.loading import open_light

    folder = tmp_path / family
    shutil.copytree(tiny_dirs[family], folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("layer_norm_eps", None)
    (folder / "config.json").write_text(json.dumps(config))
    parts = open_light(folder)
    assert parts is not None and parts.view is not None
    weights = embedding_weights(parts.view)
    assert weights is not None
    assert weights.eps == transformers.AutoConfig.from_pretrained(folder).layer_norm_eps


def test_a_light_rebuild_that_misses_layer_0_is_done_again_by_the_module(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong reading of the folder's weights (here: a LayerNorm epsilon of 1) never shows: its proof
    fails, and the PyTorch module takes the layer apart instead."""
    from bertscope.core import embedding_layer
    from bertscope.core.loading import open_light
    from bertscope.model import Model

    monkeypatch.setitem(embedding_layer._EPS_FIXED, "bert", 1.0)
    parts = open_light(tiny_dirs["bert"])
    assert parts is not None
    light = Model(parts, device="cpu", max_tokens=None, token_budget=None)
    got = light.anatomy(TEXTS)
    reference = _hf_layer0(tiny_dirs["bert"], TEXTS)
    for anatomy, hf_row in zip(got, reference, strict=True):
        assert anatomy.max_abs_error < 1e-5
        np.testing.assert_allclose(anatomy.encoder_input, hf_row, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_rows_read_only_the_rows_asked_exactly_as_torch_widens_them(
    tmp_path: Path, dtype: torch.dtype
) -> None:
    """The light anatomy's rows (a memory map of the safetensors file) equal torch's float32 of them."""
    from safetensors.torch import save_file

    from bertscope.core.safetensors_header import FloatRows, safetensors_tensors

    matrix = torch.randn(50, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    save_file(
        {"embeddings.word_embeddings.weight": matrix, "other": torch.ones(3)}, tmp_path / "model.safetensors"
    )
    rows = FloatRows(safetensors_tensors(tmp_path)["embeddings.word_embeddings.weight"])
    ids = np.array([[3, 49, 0], [7, 7, 1]])
    assert rows.shape == (50, 8)
    got = rows[ids]
    assert got.dtype == np.float32 and got.shape == (2, 3, 8)
    np.testing.assert_array_equal(got, matrix.float().numpy()[ids])


PAIR = ("the cat is a dog and what", "is that thing like eating bread")


def test_bundled_bfloat16_anatomy_holds_its_proof_adding_the_rows_in_the_models_order() -> None:
    """BertEmbeddings adds the segment row, then the position row; in bfloat16 the other order misses
    layer 0 by a rounding step (1.56e-02), which the proof called a wrong anatomy (exit 1)."""
    ran = run_main("anatomy", "I am Sinan", "--dtype", "bfloat16")
    assert ran.code == 0, ran.stderr
    assert "proof: LayerNorm(word + token_type + position) rebuilds the model's own layer 0" in ran.stdout
    assert "holds" in ran.stdout and "error" not in ran.stderr
    for backend in ("torch", "auto"):
        model = bertscope.load(device="cpu", dtype="bfloat16", backend=backend)
        (a,) = model.anatomy([PAIR])
        assert a.sum_order == ("word", "token_type", "position")
        assert any(a.tokens.token_type_ids)
        assert a.max_abs_error < 1e-5, backend


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta", "albert", "electra"])
def test_bfloat16_anatomy_of_a_family_with_segment_rows_holds_its_proof(
    family: str, tiny_dirs: dict[str, Path]
) -> None:
    for dtype in ("bfloat16", "float32"):
        (a,) = bertscope.load(tiny_dirs[family], device="cpu", dtype=dtype).anatomy([PAIR])
        assert a.token_type is not None and a.position is not None
        assert a.sum_order == ("word", "token_type", "position")
        assert a.max_abs_error < 1e-5, (family, dtype)


def test_deberta_v2_adds_its_position_row_before_the_segment_row(
    tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """DeBERTa-v2 with absolute positions and segments adds the position row first, unlike BERT."""
    folder = config_variant(tiny_dirs, tmp_path, "deberta-v2", position_biased_input=True, type_vocab_size=2)
    (a,) = bertscope.load(folder, device="cpu", dtype="bfloat16").anatomy([PAIR])
    assert a.sum_order == ("word", "position", "token_type")
    assert any(a.tokens.token_type_ids)
    assert a.max_abs_error < 1e-5


def test_the_proof_scales_with_layer_0_s_largest_value(
    cache: Path, tiny_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """A LayerNorm weight x40 puts layer 0 near 150, where float32 steps by 1.5e-5: the exported graph's
    layer 0 missed the parts by that one step and an absolute 1e-5 called the sound anatomy wrong."""
    import shutil

    folder = tmp_path / "big-gamma"
    shutil.copytree(tiny_dirs["bert"], folder)
    module = transformers.AutoModel.from_pretrained(folder)
    with torch.no_grad():
        module.embeddings.LayerNorm.weight.mul_(40)
    module.save_pretrained(folder)
    m = bertscope.load(folder, backend="onnxruntime")
    for text in ("the cat sat on the mat", "a b c d e f g h"):
        a = m.anatomy(text)
        scale = float(np.abs(a.model_output).max())
        assert scale > 50 and a.proof_bound == pytest.approx(8 * 2.0**-23 * scale)
        assert a.proof_holds, (a.max_abs_error, a.proof_bound)
        assert a.to_dict()["proof_bound"] == a.proof_bound
    small = bertscope.load(tiny_dirs["bert"], backend="torch").anatomy("the cat")
    assert float(np.abs(small.model_output).max()) < 10
    assert small.proof_bound == 1e-5 and small.proof_holds
    small.encoder_input = small.encoder_input + 2 * small.proof_bound
    assert not small.proof_holds
