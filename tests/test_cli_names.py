"""One concept, one name on the command line, and errors that name the flags typed.

`static` writes with -o/--output as every other command does (--export: its old spelling, hidden); the
nearest-neighbour count is --top-k/-k wherever it is asked (static's --neighbors: its old spelling); a
library error printed by the command line says `--dtype bfloat16`, not `dtype='bfloat16'`
(`bertscope.cli.wording.as_flags`), while the library keeps its Python words for Python callers.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

import bertscope
from bertscope.cli import app
from bertscope.cli.wording import FLAGS, MODES, SWITCHES, as_flags
from console import run_main

SRC = Path(bertscope.__file__).resolve().parent


def _ok(*args: str) -> str:
    ran = run_main(*args)
    assert ran.code == 0, ran
    return ran.stdout


def _refusal(*args: str) -> str:
    """The one error line of a refused command (no traceback, nothing on stdout)."""
    ran = run_main(*args)
    assert ran.code != 0 and ran.stdout == "", ran
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), ran.stderr
    return lines[0]


# Cached: typer builds the click command tree in ~0.5 s a call, and the tests read it ~40 times (never
# changing what it returns).
@functools.cache
def _options() -> dict[str, set[str]]:
    """Every command's option names (subcommands as `eval pairs`)."""
    found: dict[str, set[str]] = {}

    def walk(command: object, name: str) -> None:
        for sub_name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{name} {sub_name}".strip())
        params = [p for p in getattr(command, "params", []) if p.param_type_name == "option"]
        if not hasattr(command, "commands"):
            found[name] = {o for p in params for o in (*p.opts, *p.secondary_opts)}

    root = typer.main.get_command(app)
    walk(root, "")
    found[""] = {o for p in root.params for o in (*p.opts, *p.secondary_opts)}
    return found


# static: -o, --output and the old --export ----------------------------------------------------------------


def test_static_writes_with_o_output_and_the_old_export(tmp_path: Path) -> None:
    written = {}
    for flag in ("-o", "--output", "--export"):
        target = tmp_path / f"rows{flag.strip('-')}.vec"
        _ok("static", "bread", "cake", flag, str(target))
        written[flag] = target.read_text()
    assert written["-o"] == written["--output"] == written["--export"]
    assert written["-o"].splitlines()[0] == "2 384" and written["-o"].splitlines()[1].startswith("bread ")


def test_static_refuses_both_spellings_and_says_output(tmp_path: Path) -> None:
    both = _refusal("static", "bread", "-o", str(tmp_path / "a.vec"), "--export", str(tmp_path / "b.vec"))
    assert "--export is the old spelling of --output" in both
    assert not (tmp_path / "a.vec").exists() and not (tmp_path / "b.vec").exists()
    assert "--output" in _refusal("static", "bread", "--overwrite")
    corpus = tmp_path / "c.txt"
    corpus.write_text("a bank\n")
    assert "add -o OUT" in _refusal("static", "--from-corpus", str(corpus))
    assert "--output writes word-piece rows" in _refusal(
        "static", "bread", "--word", "-o", str(tmp_path / "w.vec")
    )


def test_static_help_names_output_and_top_k_only() -> None:
    shown = _ok("static", "--help")
    assert "--output" in shown and "--top-k" in shown
    assert "--export" not in shown and "--neighbors" not in shown


# the nearest-neighbour count: --top-k / -k -------------------------------------------------------------


def test_static_neighbour_count_spellings() -> None:
    found = {
        spelling: json.loads(_ok("static", "bread", spelling, "3", "--json"))["items"][0]["neighbors"]
        for spelling in ("-k", "--top-k", "--neighbors")
    }
    assert found["-k"] == found["--top-k"] == found["--neighbors"]
    assert [n["token"] for n in found["-k"]][:2] == ["loaf", "dough"] and len(found["-k"]) == 3


def test_static_refuses_two_neighbour_counts() -> None:
    assert "--neighbors is the old spelling of --top-k" in _refusal(
        "static", "bread", "-k", "2", "--neighbors", "3"
    )


def test_similar_neighbour_count_spellings(tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    corpus = tmp_path / "c.txt"
    corpus.write_text("a cat sat\na dog ran\nthe stock fell\nrain again\n")
    _ok("embed", "-i", str(corpus), "-o", str(store), "-q")
    hits = {
        flag: json.loads(_ok("similar", "a kitten", "--in", str(store), flag, "2", "--json"))
        for flag in ("-k", "--top-k")
    }
    assert hits["-k"] == hits["--top-k"]
    assert len(hits["-k"]) == 2 and hits["-k"][0]["text"] == "a cat sat"


def test_the_neighbour_count_has_one_name_wherever_it_is_asked() -> None:
    """static and similar count nearest neighbours; both call it --top-k/-k (senses -k counts clusters,
    explain's --top/-k token pairs: other concepts, left as they are)."""
    options = _options()
    for command in ("static", "similar"):
        assert {"--top-k", "-k"} <= options[command], command
    assert not any("--neighbors" in names and command != "static" for command, names in options.items())


# library errors in flag form ----------------------------------------------------------------------------

ERRORS = [
    (["embed", "x", "--dtype", "float16", "--device", "cpu"], "use --dtype bfloat16 or float32"),
    (["embed", "x", "--backend", "openvino", "--quantize", "int8_fused"],
     "--quantize int8_fused is an ONNX Runtime graph; OpenVINO's are --quantize int8 or int8_static"),
    (["embed", "x", "--quantize", "int8", "--backend", "torch"], "use --backend onnxruntime (or auto)"),
    (["embed", "x", "--backend", "onnxruntime", "--dtype", "bfloat16"],
     "--dtype bfloat16 needs --backend torch"),
    (["embed", "x", "--fast", "--dtype", "bfloat16"], "--fast picks the backend, dtype and quantize itself"),
    (["embed", "x", "--fast-min-cosine", "0.5"], "--fast-min-cosine 0.5 is the bound"),
    (["verify", "--fast-min-cosine", "0.99"], "add --fast, or leave it out"),
    (["embed", "x", "--stride", "3"],
     "stride applies to --long window (the step between windows), not --long truncate"),
    (["embed", "x", "--pooling", "pooler", "--layers", "3"],
     "(--pooling cls), or leave layers out (--layers)"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "says"), ERRORS, ids=[" ".join(a[1:]) for a, _ in ERRORS])
def test_library_errors_name_the_flags_typed(args: list[str], says: str) -> None:
    line = _refusal(*args)
    assert says in line, line
    assert "='" not in line and '="' not in line, line


def test_a_search_count_and_an_export_suffix_name_their_flags(tmp_path: Path) -> None:
    store = tmp_path / "v.npy"
    np.save(store, np.ones((3, 384), dtype=np.float32))
    said = _refusal("similar", "x", "--in", str(store), "-k", "0")  # click's range error, as every -k
    assert said.startswith("error: Invalid value for '--top-k' / '-k': Input should be greater than or equal")
    weird = _refusal("static", "bread", "-o", str(tmp_path / "o.weird"))
    assert "name the format (--format)" in weird and "format=" not in weird


def test_the_library_keeps_its_python_words() -> None:
    with pytest.raises(bertscope.InvalidSpec, match="use dtype='bfloat16' or 'float32'"):
        bertscope.load(device="cpu", dtype="float16")


# the rewrite itself ------------------------------------------------------------------------------------


def test_every_mapped_keyword_is_a_flag_of_the_command_line() -> None:
    every = set().union(*_options().values())
    flags = {*FLAGS.values(), *MODES.values(), *(f for pair in SWITCHES.values() for f in pair if f)}
    assert flags <= every, flags - every


def _stand_in(part: ast.expr) -> str:
    """An f-string's part as text: its literal, or a value in its place ('int8' where it is a repr)."""
    if isinstance(part, ast.Constant):
        return str(part.value)
    return "'int8'" if isinstance(part, ast.FormattedValue) and part.conversion == ord("r") else "int8"


def _messages() -> list[str]:
    """The library's string literals (f-strings with a stand-in for each value) naming a mapped keyword
    as `kw='...'` or `kw="..."`: the messages a command may print."""
    keyword = re.compile(rf"\b({'|'.join(FLAGS)}|mode)=['\"]")
    found = []
    for path in SRC.rglob("*.py"):
        if {"cli", "server"} & set(path.relative_to(SRC).parts):
            continue
        tree = ast.parse(path.read_text())
        parts = {
            id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(_stand_in(part) for part in node.values)
            else:
                continue
            if keyword.search(text):
                found.append(text)
    return found


def test_no_keyword_form_survives_in_the_real_messages() -> None:
    messages = _messages()
    assert len(messages) > 30  # the grep found the library's messages, not nothing
    survivors = re.compile(rf"(?<![-\w.'\"])({'|'.join(FLAGS)})=['\"]|(?<![-\w.'\"])mode=['\"]fast")
    for message in messages:
        # Python advice inside a call (`model.embed(texts, long='window')`) stays as written
        outside_calls = re.sub(r"[\w.]+\([^()]*\)", "CALL", as_flags(message))
        assert not survivors.search(outside_calls), (message, as_flags(message))


@pytest.mark.parametrize(
    ("message", "reads"),
    [
        ("float16 runs on CUDA only; on CPU use dtype='bfloat16' or 'float32'",
         "float16 runs on CUDA only; on CPU use --dtype bfloat16 or float32"),
        ("attention is within one window: use long='truncate' or 'error', not 'window'",
         "attention is within one window: use --long truncate or error, not window"),
        ("quantize='int8_fused' is an ONNX Runtime graph", "--quantize int8_fused is an ONNX Runtime graph"),
        ("fast_min_cosine=0.99 is the bound", "--fast-min-cosine 0.99 is the bound"),
        ("give the text with prompt=", "give the text with --prompt"),
        ("name one with column='layer_6' (--column layer_6)", "name one with --column layer_6"),
        ("a CoNLL-U file needs label_field= (--label-field), e.g. upos",
         "a CoNLL-U file needs --label-field, e.g. upos"),
        ("column= is the old name of label_field=", "--column is the old name of --label-field"),
        ("replace it with overwrite=True (--overwrite)", "replace it with --overwrite"),
        ("(or late=False); normalize=False", "(or --naive); --no-normalize"),
        ("ask for no prompt (prompt='')", 'ask for no prompt (--prompt "")'),
        ("level='tokens' or 'words'", "--level tokens or words"),
        # left as written: no flag says it, a Python call, a text the user gave, mode='exact'
        ("calibration= fits int8's scales", "calibration= fits int8's scales"),
        ("bertscope.load(..., mode=...) yourself", "bertscope.load(..., mode=...) yourself"),
        ("view 'layers=-1/mean': write NAME=...", "view 'layers=-1/mean': write NAME=..."),
        ("mode='exact' runs float32", "mode='exact' runs float32"),
        ("--dtype bfloat16 or float32", "--dtype bfloat16 or float32"),
    ],
)  # fmt: skip
def test_as_flags(message: str, reads: str) -> None:
    assert as_flags(message) == reads


# one concept, one name ----------------------------------------------------------------------------------
# The first N of an input is --limit (bench, eval words, senses; verify's --lines); a corpus file is
# --corpus (eval words, verify --store, the library's corpus=; static's --from-corpus); the word level of
# embed is --level words (its --words switch: --words lists words in contextuality, the library's words=);
# probe's CoNLL-U label field is --label-field (its --column: a vector column in `index`); the store a
# command reads is --store (verify, serve; similar's and senses' --in); static reads its items as words with
# --as-words (its --word switch: `similar --word bank` takes the word).

RENAMED = [  # command, the name shown, the old name (hidden, still read)
    ("verify", "--limit", "--lines"),
    ("static", "--corpus", "--from-corpus"),
    ("embed", "--level", "--words"),
    ("probe", "--label-field", "--column"),
    ("similar", "--store", "--in"),
    ("senses", "--store", "--in"),
    ("static", "--as-words", "--word"),
    ("embed", "--text-field", "--text-column"),
    ("embed", "--id-field", "--id-column"),
    ("verify", "--text-field", "--text-column"),
    ("verify", "--id-field", "--id-column"),
    ("probe", "--kind", "--probe"),
]


@functools.cache
def _hidden() -> dict[str, set[str]]:
    """Every command's hidden option names (cached as _options is)."""
    found: dict[str, set[str]] = {}
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        hidden = [p for p in command.params if p.param_type_name == "option" and p.hidden]
        found[name] = {o for p in hidden for o in (*p.opts, *p.secondary_opts)}
    return found


@pytest.mark.parametrize(("command", "new", "old"), RENAMED, ids=[f"{r[0]} {r[1]}" for r in RENAMED])
def test_the_new_name_is_shown_and_the_old_one_hidden(command: str, new: str, old: str) -> None:
    shown = _ok(command, "--help")
    assert re.search(rf"{re.escape(new)}(?![\w-])", shown), shown
    assert not re.search(rf"{re.escape(old)}(?![\w-])", shown), shown
    assert old in _hidden()[command] and old in _options()[command]


def test_a_shown_option_name_is_a_switch_everywhere_or_takes_a_value_everywhere() -> None:
    """`embed --words` (a switch) beside `contextuality --words bank,bread` (a list) was one name for two
    things, and static's --word switch beside `similar --word bank` (static says --as-words now, as the
    library's `lookup(as_words=True)` and the service's /static `"as_words": true`; `word` stays, hidden
    or deprecated, as their old spelling)."""
    kinds: dict[str, dict[str, set[str]]] = {}

    def walk(command: object, name: str) -> None:
        for sub_name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{name} {sub_name}".strip())
        for p in getattr(command, "params", []):
            if p.param_type_name == "option" and not p.hidden and not hasattr(command, "commands"):
                for option in (*p.opts, *p.secondary_opts):
                    kind = "switch" if p.is_flag else "value"
                    kinds.setdefault(option, {}).setdefault(kind, set()).add(name)

    walk(typer.main.get_command(app), "")
    both = {option: k for option, k in kinds.items() if len(k) > 1}
    assert both == {}
    assert kinds["--words"] == {"value": {"contextuality"}}
    assert kinds["--word"] == {"value": {"similar"}} and kinds["--as-words"] == {"switch": {"static"}}


def test_verify_limit_and_the_old_lines(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    sample = tmp_path / "sample.txt"
    sample.write_text("a cat sat\na dog ran\nthe stock fell\n")
    model = ["-m", str(tiny_dirs["bert"]), "-i", str(sample), "--json"]

    def texts(flag: str, count: str) -> int:
        return int(json.loads(_ok("verify", *model, flag, count))["n_texts"])

    assert texts("--limit", "1") == texts("--lines", "1") == texts("--limit", "3") - 2
    for flag in ("--limit", "--lines"):
        assert _refusal("verify", flag, "5") == (
            "error: --limit counts the lines of --input; add -i FILE or leave --limit out"
        )
    assert "--lines is the old spelling of --limit" in _refusal("verify", "--limit", "5", "--lines", "4")
    stored = _refusal(
        "verify", "--store", str(tmp_path / "s.parquet"), "--sample", str(sample), "--lines", "2"
    )
    assert "--sample, --limit: for the check against the reference forward" in stored


def test_static_corpus_and_the_old_from_corpus(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the bank raised rates\nwe sat on the bank\nthe river bank\n")
    written = {}
    for flag in ("--corpus", "--from-corpus"):
        target = tmp_path / f"agg{flag.strip('-')}.vec"
        _ok(
            "static",
            flag,
            str(corpus),
            "-m",
            str(tiny_dirs["bert"]),
            "--layers",
            "1",
            "-o",
            str(target),
            "-q",
        )
        written[flag] = target.read_text()
    assert written["--corpus"] == written["--from-corpus"]
    assert any(line.startswith("bank ") for line in written["--corpus"].splitlines())
    assert _refusal("static", "bread", "--min-count", "2") == (
        "error: --min-count: for --corpus only; leave it out here"
    )
    assert "add -o OUT" in _refusal("static", "--corpus", str(corpus))
    assert "--from-corpus is the old spelling of --corpus" in _refusal(
        "static", "--corpus", str(corpus), "--from-corpus", str(corpus)
    )


def test_embed_level_words_and_the_old_words_switch() -> None:
    by_level = json.loads(_ok("embed", "tokenization rocks", "--level", "words", "--json"))
    assert json.loads(_ok("embed", "tokenization rocks", "--words", "--json")) == by_level
    assert by_level["items"][0]["words"] == ["tokenization", "rocks"]
    assert _refusal("embed", "a b", "--words", "--tokens") == (
        "error: choose one of --tokens, --chunks and --level (--tokens, --words given)"
    )
    assert _refusal("embed", "a b", "--level", "words", "--tokens") == (
        "error: choose one of --tokens, --chunks and --level (--tokens, --level words given)"
    )


def test_probe_label_field_and_the_old_column(tmp_path: Path, tiny_dirs: dict[str, Path]) -> None:
    pos = Path(__file__).resolve().parents[1] / "examples" / "pos.conllu"
    few = str(_first_sentences(5, tmp_path))  # the two spellings' rows are equal on any size
    args = ["probe", "-i", few, "-m", str(tiny_dirs["bert"]), "--layers", "0", "--folds", "2", "--json"]
    rows = {flag: json.loads(_ok(*args, flag, "upos"))["rows"] for flag in ("--label-field", "--column")}
    assert rows["--label-field"] == rows["--column"] and len(rows["--label-field"]) == 2  # static, layer 0
    assert "--column is the old spelling of --label-field" in _refusal(
        "probe", "-i", str(pos), "--label-field", "upos", "--column", "upos"
    )
    # a CoNLL-U file under another suffix is told the flag, and a structural probe names the one typed
    as_text = tmp_path / "pos.txt"
    as_text.write_text(pos.read_text())
    assert "a CoNLL-U file needs --label-field, e.g. upos" in _refusal("probe", "-i", str(as_text))
    for flag in ("--label-field", "--column"):
        said = _refusal("probe", "-i", str(pos), "--task", "depth", flag, "upos")
        assert said.startswith(f"error: {flag}: for label probes (--task label) only"), said


def test_the_store_a_command_reads_is_store_everywhere() -> None:
    """verify and serve said --store, similar and senses --in, for the same file (the library's and the
    service's `store`): --store is shown everywhere a store is read, --in nowhere."""
    options = _options()
    for command in ("similar", "senses", "verify", "serve"):
        assert "--store" in options[command], command
    shown = {name: names - _hidden().get(name, set()) for name, names in options.items()}
    assert not any("--in" in names for names in shown.values())


def test_similar_store_and_the_old_in(tmp_path: Path) -> None:
    store = tmp_path / "s.parquet"
    corpus = tmp_path / "c.txt"
    corpus.write_text("a cat sat\na dog ran\nthe stock fell\n")
    _ok("embed", "-i", str(corpus), "-o", str(store), "-q")
    hits = {flag: json.loads(_ok("similar", "a kitten", flag, str(store), "-k", "2", "--json")) for flag in
            ("--store", "--in")}  # fmt: skip
    assert hits["--store"] == hits["--in"] and hits["--store"][0]["text"] == "a cat sat"
    assert _refusal("similar", "a kitten", "--store", str(store), "--in", str(store)) == (
        "error: --in is the old spelling of --store; give --store only"
    )
    assert _refusal("similar", "a kitten") == (
        "error: name the store to search with --store FILE (.db, .parquet or .npy); see `bertscope similar "
        "--help`"
    )


def test_a_ray_folder_is_refused_in_the_flag_typed(tmp_path: Path) -> None:
    """The shard to give instead is named under the flag the user typed (--in still reads)."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "part-000000.parquet").write_bytes(b"")
    for flag in ("--store", "--in"):
        said = _refusal("similar", "a cat", flag, str(folder))
        assert said.endswith(f"give a shard ({flag} {folder / 'part-000000.parquet'})"), said


def test_senses_store_and_the_old_in(tmp_path: Path) -> None:
    store = tmp_path / "tokens.parquet"
    corpus = tmp_path / "c.txt"
    corpus.write_text("we sat on the bank\nthe bank raised rates\nthe river bank flooded\nbank loans rose\n")
    _ok("embed", "-i", str(corpus), "-o", str(store), "--tokens", "-q")
    found = {flag: json.loads(_ok("senses", "bank", flag, str(store), "-k", "2", "--json")) for flag in
             ("--store", "--in")}  # fmt: skip
    assert found["--store"] == found["--in"] and sum(s["size"] for s in found["--store"]["senses"]) == 4
    assert "--in is the old spelling of --store" in _refusal(
        "senses", "bank", "--store", str(store), "--in", str(store)
    )
    assert _refusal("senses", "bank").startswith("error: name the token or word store with --store FILE")


def test_static_as_words_and_the_old_word(tmp_path: Path) -> None:
    by_new = json.loads(_ok("static", "breadmaker", "--as-words", "-k", "2", "--json"))
    assert json.loads(_ok("static", "breadmaker", "--word", "-k", "2", "--json")) == by_new
    assert by_new["items"][0]["pieces"] == ["bread", "##maker"]
    assert _refusal("static", "breadmaker", "--as-words", "--word") == (
        "error: --word is the old spelling of --as-words; give --as-words only"
    )
    for flag in ("--as-words", "--word"):  # a refusal names the spelling typed
        assert f"--ids reads token ids and {flag} reads words" in _refusal("static", "7852", "--ids", flag)
        said = _refusal("static", "bread", flag, "-o", str(tmp_path / "w.vec"))
        assert said.endswith(f"not {flag} words"), said


def test_probe_label_field_in_the_library(tiny_models: dict[str, bertscope.Model], tmp_path: Path) -> None:
    """probe(label_field=) names the CoNLL-U field; column=, its old name (a vector column in
    build_index), still reads with a DeprecationWarning, and both at once are refused."""
    from bertscope.research.probe import probe
    from bertscope.research.probe_data import read_words

    pos = Path(__file__).resolve().parents[1] / "examples" / "pos.conllu"
    moved = tmp_path / "xpos.conllu"  # the tags in XPOS, UPOS left empty: only the field asked finds them
    lines = [line.split("\t") for line in pos.read_text().splitlines()]
    moved.write_text(
        "\n".join("\t".join(f[:3] + ["_", f[3]] + f[5:]) if len(f) == 10 else f[0] for f in lines)
    )
    assert read_words(moved, label_field="xpos") == read_words(pos)
    with pytest.warns(DeprecationWarning, match=r"read_words\(column=...\) is deprecated; use label_field="):
        assert read_words(moved, column="xpos") == read_words(pos)
    model = tiny_models["bert"]
    options: dict[str, Any] = {"layers": "0", "folds": 2, "n_jobs": 1}
    new = probe(model, moved, label_field="xpos", **options)
    with pytest.warns(DeprecationWarning, match=r"probe\(column=...\) is deprecated") as caught:
        old = model.probe(moved, column="xpos", **options)
    said = [w.filename for w in caught if "column=" in str(w.message)]
    assert said == [__file__]  # once, pointing at the caller's line
    assert old.rows == new.rows and len(new.rows) == 2  # static, layer 0
    assert new.labels == probe(model, pos, **options).labels
    with pytest.raises(bertscope.InvalidInput, match="column= is the old name of label_field="):
        probe(model, pos, label_field="upos", column="upos", **options)


def test_record_fields_and_the_old_column_spellings(tmp_path: Path) -> None:
    """--text-field/--id-field (the library's text_field=/id_field=) are shown; --text-column/--id-column,
    their old spellings, still read; both given refused, and a refusal names the spelling typed."""
    docs = Path(__file__).resolve().parents[1] / "examples" / "docs.jsonl"
    renamed = tmp_path / "docs.jsonl"
    renamed.write_text(docs.read_text().replace('"text":', '"body":').replace('"id":', '"key":'))
    base = ["embed", "-i", str(renamed), "--json"]
    new = json.loads(_ok(*base, "--text-field", "body", "--id-field", "key"))
    old = json.loads(_ok(*base, "--text-column", "body", "--id-column", "key"))
    assert new == old and len(new["vectors"]) == 3
    # the old spellings name the fields read (not the defaults text/id, which this file lacks)
    assert _refusal(*base, "--text-field", "body", "--id-column", "id").endswith(
        "no id field 'id'; the fields are: key, body"
    )
    assert _refusal(*base, "--text-column", "text").endswith(
        "no field 'text'; the fields are: key, body; name the text's field, such as --text-field body"
    )
    assert _refusal(*base, "--text-field", "body", "--text-column", "body") == (
        "error: --text-column is the old spelling of --text-field; give --text-field only"
    )
    assert _refusal(*base, "--id-field", "key", "--id-column", "key") == (
        "error: --id-column is the old spelling of --id-field; give --id-field only"
    )
    said = _refusal("embed", "a b", "--id-column", "key")
    assert said.startswith("error: --id-column names a field of -i FILE records"), said
    said = _refusal("verify", "--text-column", "body")
    assert "--text-column" in said and "--text-field" not in said, said


def test_calibrate_input_and_the_older_positional(tmp_path: Path) -> None:
    """calibrate reads its pairs with -i/--input, as `eval pairs` reads the same kind of file; a file as
    an argument, the older form, still works (hidden from --help); both at once refused."""
    pairs = str(Path(__file__).parent / "data" / "labelled_pairs.tsv")
    made = {}
    for how, args in (("input", ["-i", pairs]), ("positional", [pairs])):
        out = tmp_path / f"{how}.json"
        _ok("calibrate", *args, "-p", "mean", "-o", str(out), "--json")
        made[how] = json.loads(out.read_text())
    assert made["input"] == made["positional"] and made["input"]["n_positives"] > 0
    shown = _ok("calibrate", "--help")
    assert "--input" in shown and "calibrate -i pairs.tsv" in shown
    said = _refusal("calibrate", pairs, "-i", pairs, "-o", str(tmp_path / "both.json"))
    assert (
        said == "error: give the pairs file once: -i/--input FILE (a file as an argument is its older form)"
    )
    assert _refusal("calibrate").startswith("error: name the pairs file with -i/--input FILE")
    assert not (tmp_path / "both.json").exists()


def test_a_level_singular_and_plural_are_one_name() -> None:
    """embed and the corpus jobs say tokens/words, probe and cka said word/token: every --level reads
    both, in the command's own spelling; an unknown one lists the names as embed spells them."""
    from bertscope.cli.app import level_help, level_option

    for given, probe_level in (
        ("words", "word"),
        ("word", "word"),
        ("sentences", "sentence"),
        ("Sentence", "sentence"),
    ):
        assert level_option(given, ["word", "sentence"]) == probe_level
    assert level_option("tokens", ["token", "sentence"]) == "token"
    assert level_option("word", ["sentence", "tokens", "words", "chunks"]) == "words"
    assert level_option("chunk", ["sentence", "tokens", "words", "chunks"]) == "chunks"
    assert level_help(["word", "sentence"]) == "words, sentence"
    with pytest.raises(bertscope.errors.InvalidSpec, match=r"choose one of: words, sentence$"):
        level_option("wordz", ["word", "sentence"])
    for command, shown in (("probe", "words"), ("cka", "tokens")):
        assert re.search(rf"--level\s.*\b{shown}\b", _ok(command, "--help")), command
    assert _refusal("probe", "-i", "x.tsv", "--level", "pages") == (
        "error: unknown level 'pages'; choose one of: words, sentence"
    )
    assert _refusal("cka", "-i", "x.txt", "--level", "pages") == (
        "error: unknown level 'pages'; choose one of: tokens, sentence"
    )


def test_embed_level_word_is_level_words() -> None:
    words = json.loads(_ok("embed", "tokenization rocks", "--level", "words", "--json"))
    assert json.loads(_ok("embed", "tokenization rocks", "--level", "word", "--json")) == words
    assert json.loads(_ok("embed", "tokenization rocks", "--level", "word", "--words", "--json")) == words
    tokens = json.loads(_ok("embed", "a cat", "--level", "tokens", "--json"))
    assert json.loads(_ok("embed", "a cat", "--level", "token", "--json")) == tokens


def _first_sentences(n: int, folder: Path) -> Path:
    """The first `n` sentences of examples/pos.conllu, as a file in `folder`: the same kind of probe,
    smaller (the checks below compare two spellings' rows, equal on any size)."""
    pos = Path(__file__).resolve().parents[1] / "examples" / "pos.conllu"
    shorter = folder / pos.name
    shorter.write_text(
        "\n\n".join(pos.read_text(encoding="utf-8").split("\n\n")[:n]) + "\n", encoding="utf-8"
    )
    return shorter


def test_probe_and_cka_read_a_level_in_either_number(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[1] / "examples"
    tiny = ["-m", str(tiny_dirs["bert"]), "--json"]
    probe = [
        "probe",
        "-i",
        str(_first_sentences(5, tmp_path)),
        "--label-field",
        "upos",
        "--layers",
        "0",
        "--folds",
        "2",
    ]
    rows = {level: json.loads(_ok(*probe, *tiny, "--level", level))["rows"] for level in ("word", "words")}
    assert rows["word"] == rows["words"] and len(rows["word"]) == 2
    cka = ["cka", "-i", str(examples / "news.txt"), *tiny]
    by = {level: json.loads(_ok(*cka, "--level", level)) for level in ("token", "tokens")}
    assert by["token"] == by["tokens"] and by["token"]["settings"]["level"] == "tokens"


def test_probe_kind_and_the_old_probe(tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    """probe --kind linear|mlp (the library's kind=); --probe, its old spelling, still read and hidden;
    both refused; a structural task's refusal names the flag typed."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    pos = ["probe", "-i", str(_first_sentences(5, tmp_path)), "--label-field", "upos"]
    args = [*pos, "-m", str(tiny_dirs["bert"]), "--layers", "0", "--folds", "2", "--json"]
    rows = {flag: json.loads(_ok(*args, flag, "mlp"))["rows"] for flag in ("--kind", "--probe")}
    assert rows["--kind"] == rows["--probe"] and {row["probe"] for row in rows["--kind"]} == {"mlp"}
    assert _refusal(*pos, "--kind", "mlp", "--probe", "mlp") == (
        "error: --probe is the old spelling of --kind; give --kind only"
    )
    assert _refusal(*pos, "--kind", "tree") == "error: unknown --kind tree; choose one of: linear, mlp"
    trees = ["probe", "-i", str(examples / "trees.conllu"), "--task", "depth"]
    for flag in ("--kind", "--probe"):
        said = _refusal(*trees, flag, "mlp")
        assert said.startswith(f"error: {flag}: for label probes (--task label) only"), said


def test_contextuality_names_a_word_given_beside_its_input(tmp_path: Path) -> None:
    """`contextuality bank -i FILE` read `bank` as a second input file and said only 'give the sentences
    once': the refusal names the argument and where a word goes."""
    texts = tmp_path / "texts.txt"
    texts.write_text("The bank raised rates.\nShe sat by the river bank.\n")
    said = _refusal("contextuality", "bank", "-i", str(texts))
    assert said.startswith("error: give the sentences once: -i/--input FILE ('bank', an argument, ")
    assert said.endswith("words to measure go with --words bank)")
