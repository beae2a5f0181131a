"""Audit 26a of static exports and distillation: a name holding a newline, a tab or a space keeps its own
row and its own, distinct name in every text export (escaped the one reversible way); the library's
exports refuse an existing file without overwrite=True, as the command line does; distill saves float32
rows on asking (--precision, read as every precision is), loads on torch without timing the exact
default's runtimes, and says a phrase's static vector in words that read right in Python and on `vocab
add`; the npy writer lets each block go once written."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import bertscope
from bertscope.core.exports import (
    EXPORTS,
    Block,
    ExportFormat,
    RowKind,
    Rows,
    escape_name,
    unescape_name,
    write_rows,
    write_vectors,
)  # fmt: skip
from bertscope.errors import InvalidInput
from console import run_main
from tiny_models import build_tiny_model

# 1. every row keeps its own name in every text export ----------------------------------------------

# Names a vocabulary's added tokens or a corpus's words can hold: each must come back as itself, and
# "two words" must not come back as the SentencePiece piece "two▁words" (U+2581 once stood for a space).
ODD = [
    "tab\there", "new\nline", "cr\rhere", "two words", "two\u2581words", "back\\slash", "back\\nslash",
    "a\u00a0b", "line\u2028end", "\\u0020", "\\", "\\\\", "end\\", "\\\t", "\\ x", "ünï", "plain",
]  # fmt: skip


def _names(files: list[Path], fmt: ExportFormat, rows: int, *, header: bool = False) -> list[str]:
    """The rows' names read back as a consumer of the format reads them, each text line one row
    (`header`: the projector's metadata has one, as for word rows with their counts)."""
    if fmt is ExportFormat.PARQUET:
        table = pq.read_table(files[0]).to_pydict()
        return list(table.get("token", table.get("word")))
    if fmt is ExportFormat.WORD2VEC:
        lines = files[0].read_text(encoding="utf-8").splitlines()
        assert len(lines) == rows + 1
        cells = [line.split(" ")[0] for line in lines[1:]]
    else:
        side = files[1]
        lines = side.read_text(encoding="utf-8").splitlines()
        lines = lines[1:] if header and fmt is ExportFormat.PROJECTOR else lines
        assert len(lines) == rows
        cells = [line.split("\t")[0] for line in lines]
    for file in files[1:] if fmt is ExportFormat.WORD2VEC else []:  # the counts beside word2vec text
        assert len(file.read_text(encoding="utf-8").splitlines()) == rows
    return [unescape_name(cell) for cell in cells]


@pytest.mark.parametrize("fmt", list(EXPORTS))
def test_every_export_keeps_each_rows_own_name(tmp_path: Path, fmt: ExportFormat) -> None:
    """A newline in a name split its line in three formats (every later row shifted by one)."""
    vectors = np.arange(len(ODD) * 3, dtype=np.float32).reshape(-1, 3) / 7
    name = "o" + (EXPORTS[fmt].suffixes[0] if EXPORTS[fmt].suffixes else "")
    files = write_vectors(tmp_path / name, fmt, ODD, np.arange(1, len(ODD) + 1), vectors)
    assert _names(files, fmt, len(ODD), header=True) == ODD


def test_word2vec_text_loads_in_gensim_with_every_name_distinct(tmp_path: Path) -> None:
    """gensim read 'line' with the next row's vector and the last key as None."""
    keyed = pytest.importorskip("gensim.models").KeyedVectors
    vectors = np.arange(len(ODD) * 3, dtype=np.float32).reshape(-1, 3) / 7
    (path, _) = write_vectors(tmp_path / "o.vec", None, ODD, np.ones(len(ODD)), vectors)
    loaded = keyed.load_word2vec_format(str(path), binary=False)
    assert [unescape_name(key) for key in loaded.index_to_key] == ODD
    np.testing.assert_allclose(loaded.vectors, vectors, rtol=1e-6)


def test_the_escape_is_one_rule_and_reversible() -> None:
    assert escape_name("new\nline") == "new\\nline"
    assert escape_name("tab\there") == "tab\\there"
    assert escape_name("back\\slash") == "back\\slash"  # a backslash that begins no escape stays single
    assert escape_name("back\\nslash") == "back\\\\nslash"  # one that would is doubled
    assert escape_name("\\") == "\\"  # BERT's own "\\" piece, as it was
    assert escape_name("two words") == "two words"  # a side file's column holds spaces
    assert escape_name("two words", spaces=True) == "two\\u0020words"
    for name in ODD:
        for spaces in (False, True):
            written = escape_name(name, spaces=spaces)
            assert unescape_name(written) == name
            assert len(written.splitlines()) == 1 and "\t" not in written
            assert not spaces or not any(c.isspace() for c in written)


@pytest.fixture(scope="module")
def odd_model(tmp_path_factory: pytest.TempPathFactory) -> bertscope.Model:
    """A tiny BERT whose added tokens hold a tab, a newline, a space and a backslash."""
    from transformers import AutoModel, AutoTokenizer

    folder = build_tiny_model("bert", tmp_path_factory.mktemp("odd") / "bert")
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder)
    tokenizer.add_tokens(["tab\there", "new\nline", "two words", "back\\slash"])
    model.resize_token_embeddings(len(tokenizer))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    loaded = bertscope.load(folder, device="cpu", backend="torch")
    assert isinstance(loaded, bertscope.Model)
    return loaded


@pytest.mark.parametrize("fmt", list(EXPORTS))
def test_a_static_export_of_odd_added_tokens_keeps_one_line_a_row(
    odd_model: bertscope.Model, tmp_path: Path, fmt: ExportFormat
) -> None:
    count = odd_model.static_shape[0]
    name = "o" + (EXPORTS[fmt].suffixes[0] if EXPORTS[fmt].suffixes else "")
    files = odd_model.export_static(tmp_path / name, format=fmt)
    assert _names(files, fmt, count) == [odd_model.id_to_token[i] for i in range(count)]


# 2. the library's exports refuse an existing file without overwrite=True -----------------------------


def test_model_export_static_refuses_an_existing_file(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    model, path = tiny_models["bert"], tmp_path / "rows.npy"
    model.export_static(path, items=["the"])
    vocab = tmp_path / "rows.vocab.txt"
    with pytest.raises(InvalidInput, match=r"rows\.npy, .*rows\.vocab\.txt exist; pass overwrite=True"):
        model.export_static(path, items=["a"])
    assert vocab.read_text(encoding="utf-8") == "the\n"
    model.export_static(path, items=["a"], overwrite=True)
    assert vocab.read_text(encoding="utf-8") == "a\n"


def test_static_model_export_static_refuses_an_existing_file(static_m2v: Any, tmp_path: Path) -> None:
    path = tmp_path / "rows.vec"
    path.write_text("kept\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"rows\.vec exists; pass overwrite=True"):
        static_m2v.export_static(path)
    assert path.read_text(encoding="utf-8") == "kept\n"
    assert static_m2v.export_static(path, overwrite=True) == [path]


def test_static_export_refuses_by_default(tiny_models: dict[str, bertscope.Model], tmp_path: Path) -> None:
    from bertscope.static import export

    path = tmp_path / "rows.parquet"
    path.write_bytes(b"kept")
    with pytest.raises(InvalidInput, match="pass overwrite=True"):
        export(tiny_models["bert"], path)
    assert path.read_bytes() == b"kept"


# 3. distill saves float32 rows on asking ------------------------------------------------------------


def test_a_float32_folder_keeps_the_rows_as_computed(
    tiny_models: dict[str, bertscope.Model], tmp_path: Path
) -> None:
    """Each row, without PCA or weights, is the mean of [CLS], the piece and [SEP] at the last layer
    (model2vec's mean pooling): a float32 folder keeps it to 1e-5, a float16 one (the default) does not."""
    pytest.importorskip("model2vec")
    import torch

    from bertscope.research.distill import distill

    model = tiny_models["bert"]
    kept = distill(model, tmp_path / "f32", dim=None, sif=None, precision="Float32", progress=False)
    halved = distill(model, tmp_path / "f16", dim=None, sif=None, progress=False)
    assert '"embedding_dtype": "float32"' in (kept / "config.json").read_text()
    assert '"embedding_dtype": "float16"' in (halved / "config.json").read_text()
    pieces = [t for t in ("the", "a", "of", "and") if t in model.vocab]
    tokenizer = model.loaded.tokenizer
    ids = [[tokenizer.cls_token_id, model.vocab[t], tokenizer.sep_token_id] for t in pieces]
    with torch.inference_mode():
        hidden = model.hf_model(input_ids=torch.tensor(ids)).last_hidden_state
    expected = hidden.mean(dim=1).numpy()
    for folder, close in ((kept, True), (halved, False)):
        static = bertscope.load(folder)
        rows = np.asarray(static.static(pieces), dtype=np.float32)
        assert np.allclose(rows, expected, rtol=0, atol=1e-5) is close, np.abs(rows - expected).max()


def test_distill_refuses_another_precision_before_loading(tmp_path: Path) -> None:
    from bertscope.research.distill import distill

    allowed = r"give precision='float16' or precision='float32'"
    with pytest.raises(InvalidInput, match=rf"precision='int8': .* {allowed}"):
        distill("no-such-model", tmp_path / "o", precision="int8")
    ran = run_main("distill", "-m", "no-such-model", "-o", str(tmp_path / "o"), "--precision", "int8")
    assert ran.code != 0 and "--precision int8: " in ran.stderr and "--precision float32" in ran.stderr


def test_distills_dtype_is_precisions_deprecated_name(tmp_path: Path) -> None:
    """It named a storage precision with the compute dtype's name (load(dtype=), --dtype)."""
    from bertscope.research.distill import distill

    with (
        pytest.warns(DeprecationWarning, match=r"distill\(dtype=\.\.\.\) is deprecated; use precision="),
        pytest.raises(InvalidInput, match=r"precision='int8'"),
    ):
        distill("no-such-model", tmp_path / "o", dtype="int8")
    with pytest.raises(InvalidInput, match=r"dtype= is the old name of precision=; give precision= only"):
        distill("no-such-model", tmp_path / "o", precision="float32", dtype="float32")
    ran = run_main("distill", "-m", "no-such-model", "-o", str(tmp_path / "o"), "--dtype", "int8")
    lines = ran.stderr.strip().splitlines()
    assert ran.code == 1 and "distill --dtype is deprecated; use --precision" in lines[0]
    assert "--precision int8: " in lines[1]


# 4. distill loads on torch: the exact default's runtime timing would go unused ----------------------


def test_distill_on_the_command_line_times_no_runtime(
    tiny_dirs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    pytest.importorskip("model2vec")
    import bertscope.backends.exact as exact

    def timed(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("distill timed the exact default's runtimes, which it never uses")

    monkeypatch.setattr(exact, "choose_exact", timed)
    out = tmp_path / "s"
    ran = run_main("distill", "-m", str(tiny_dirs["bert"]), "-o", str(out), "--dim", "4")
    assert ran.code == 0, ran.stderr
    assert '"embedding_dtype": "float16"' in (out / "config.json").read_text()  # model2vec's default
    again = ("--dim", "4", "--precision", "FLOAT32", "--overwrite")
    ran = run_main("distill", "-m", str(tiny_dirs["bert"]), "-o", str(out), *again)
    assert ran.code == 0, ran.stderr
    assert '"embedding_dtype": "float32"' in (out / "config.json").read_text()


# 5. a phrase given to vocab add: the advice reads right in Python and on the command line ------------


def test_several_words_advice_reads_right_on_vocab_add(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    ran = run_main("vocab", "add", "new york", "-m", str(tiny_dirs["bert"]), "-o", str(tmp_path / "v"))
    assert ran.code == 1
    line = next(line for line in ran.stderr.splitlines() if line.startswith("error: "))
    assert "static vector is --as-words" not in line
    assert line.endswith(
        "(a phrase's static vector is the mean of the rows of its words' pieces: static_word in Python, "
        "bertscope static 'new york' --as-words)"
    )


# 6. the npy writer lets each block go once it is written ---------------------------------------------


def test_the_npy_writer_holds_no_earlier_block(tmp_path: Path) -> None:
    """It kept every block, then concatenated them: a whole vocabulary held twice."""
    made: list[weakref.ref[np.ndarray]] = []
    kind = RowKind(columns=(("token", str),), side=("token",))

    def blocks() -> Iterator[Block]:
        for k in range(4):
            if k >= 2:
                gc.collect()
                assert made[k - 2]() is None, f"block {k - 2} is still held while block {k} is made"
            block = np.full((2, 3), k, dtype=np.float32)
            made.append(weakref.ref(block))
            yield {"token": [f"w{k}a", f"w{k}b"]}, block
            del block

    path, vocab = write_rows(tmp_path / "o.npy", None, Rows(kind, 8, 3, blocks()))
    expected = np.repeat(np.arange(4, dtype=np.float32), 2)[:, None].repeat(3, axis=1)
    np.testing.assert_array_equal(np.load(path), expected)
    assert vocab.read_text(encoding="utf-8").split() == [f"w{k}{c}" for k in range(4) for c in "ab"]


def test_an_aggregated_export_refuses_to_replace_a_file_without_overwrite(
    tmp_path: Path, tiny_models: dict[str, bertscope.Model]
) -> None:
    result = tiny_models["bert"].static_from_corpus(["a cat sat", "a dog ran"], progress=False)
    kept = tmp_path / "words.vec"
    kept.write_text("precious\n")
    with pytest.raises(InvalidInput, match=r"words\.vec exists; pass overwrite=True"):
        result.export(kept)
    assert kept.read_text() == "precious\n"
    assert kept in result.export(kept, overwrite=True) and kept.read_text() != "precious\n"
