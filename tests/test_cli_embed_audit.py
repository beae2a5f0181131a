"""`embed` as the CLI audit found it wanting: printed vectors carry their texts and ids, skipped lines
and empty files are said, `-` as a text is refused, options that would be ignored (--layers/--pooling
beside --view, --batch-size without -o) are refused, an output without a suffix is named as such, the
spec line and `info` read as settings, and a cut is said in the one shared wording."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bertscope.cli.embed import plain_value, spec_line
from bertscope.core.spec import EmbedOptions
from bertscope.errors import InvalidSpec
from bertscope.io.formats import open_sink
from bertscope.io.job import JobSummary
from bertscope.io.levels import LevelOptions
from bertscope.io.views import views_level
from console import run_main

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "examples" / "docs.jsonl"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """Four lines, the third blank: a corpus job would store ids 1, 2 and 4."""
    path = tmp_path / "small.txt"
    path.write_text("a cat\na dog\n\nthe car\n")
    return path


@pytest.fixture
def no_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model fails loudly: a refusal must come before any load."""

    def called(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a model was loaded before the options were checked")

    import bertscope.model

    monkeypatch.setattr(bertscope.model, "load", called)


def test_sentence_json_carries_texts_and_line_ids(small: Path) -> None:
    ran = run_main("embed", "-i", str(small), "--json")
    assert ran.code == 0, ran.stderr
    found = json.loads(ran.stdout)
    # additive: the old keys are all still there
    assert {"dimension", "vectors", "n_tokens", "n_dropped", "spec"} <= set(found)
    assert found["texts"] == ["a cat", "a dog", "the car"]
    assert found["ids"] == ["1", "2", "4"]  # the blank third line skipped, the line numbers kept
    assert len(found["vectors"]) == 3
    assert "1 empty line skipped" in ran.stderr


def test_sentence_json_ids_of_arguments_count_from_one() -> None:
    found = json.loads(run_main("embed", "a cat", "a dog", "--json").stdout)
    assert found["texts"] == ["a cat", "a dog"] and found["ids"] == ["1", "2"]


def test_id_field_is_honoured_in_printed_vectors() -> None:
    ran = run_main("embed", "-i", str(DOCS), "--id-field", "id", "--json")
    assert ran.code == 0, ran.stderr
    found = json.loads(ran.stdout)
    wanted = [json.loads(line)["id"] for line in DOCS.read_text().splitlines() if line.strip()]
    assert found["ids"] == [str(i) for i in wanted]
    assert len(found["ids"]) == len(found["vectors"]) == len(found["texts"])


def test_id_field_with_texts_as_arguments_is_refused(no_load: None) -> None:
    ran = run_main("embed", "a cat", "--id-field", "id", "--json")
    assert ran.code == 1 and "--id-field" in ran.stderr and ran.stdout == ""


def test_table_shows_the_line_ids(small: Path) -> None:
    ran = run_main("embed", "-i", str(small))
    assert ran.code == 0
    rows = [line for line in ran.stdout.splitlines() if "the car" in line]
    assert rows and rows[0].split("│")[1].strip() == "4"


def test_token_and_chunk_json_carry_ids(small: Path) -> None:
    tokens = json.loads(run_main("embed", "-i", str(small), "--tokens", "--json").stdout)
    assert [item["id"] for item in tokens["items"]] == ["1", "2", "4"]
    chunks = json.loads(run_main("embed", "-i", str(small), "--chunks", "sentence", "--json").stdout)
    assert [item["id"] for item in chunks] == ["1", "2", "4"]


def test_an_empty_file_is_named(tmp_path: Path, no_load: None) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    for path, said in ((empty, "the corpus is empty (no text in it)"), (blank, "every line is empty")):
        ran = run_main("embed", "-i", str(path))
        assert ran.code == 1
        assert f"{path}: {said}" in ran.stderr
        assert len(ran.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("embed", "-"), "give -i -"),
        (("embed", "a cat", "-"), "give -i -"),
        (("tokens", "-"), "give -i - (cat FILE | bertscope tokens -i -)"),
        (("anatomy", "-"), "anatomy takes its text as an argument"),
        (("similarity", "-", "a cat"), "similarity takes its texts as arguments"),
    ],
)
def test_a_lone_dash_is_refused(args: tuple[str, ...], said: str, no_load: None) -> None:
    ran = run_main(*args)
    assert ran.code == 1 and said in ran.stderr and ran.stdout == ""
    assert len(ran.stderr.strip().splitlines()) == 1


def test_stdin_still_reads_with_dash_i(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a cat\n\na dog\n"))
    found = json.loads(run_main("embed", "-i", "-", "--json").stdout)
    assert found["texts"] == ["a cat", "a dog"] and found["ids"] == ["1", "3"]


@pytest.mark.parametrize(
    ("extra", "drop"),
    [
        (("--layers", "2"), "drop --layers"),
        (("-p", "cls"), "drop --pooling"),
        (("-l", "2", "-p", "cls"), "drop --layers/--pooling"),
    ],
)
def test_view_refuses_job_layers_and_pooling(
    tmp_path: Path, small: Path, extra: tuple[str, ...], drop: str, no_load: None
) -> None:
    out = tmp_path / "v.parquet"
    ran = run_main("embed", "-i", str(small), "-o", str(out), "--view", "a=-1/mean", *extra)
    assert ran.code == 1 and "each --view names its own layers and pooling" in ran.stderr
    assert ran.stderr.rstrip().endswith(drop) and not out.exists()


def test_view_takes_the_jobs_mask_special(tmp_path: Path, small: Path) -> None:
    """What a view leaves out is the job's: --mask-special reaches a view that does not set it."""
    import pyarrow.parquet as pq

    out = tmp_path / "v.parquet"
    ran = run_main("embed", "-i", str(small), "-o", str(out), "--view", "a=-1/mean", "--mask-special", "-q")
    assert ran.code == 0, ran.stderr
    settings = json.loads(pq.read_schema(out).metadata[b"bertscope"])
    assert settings["views"]["a"]["mask_special"] is True


def test_library_views_refuse_a_job_setting_no_view_reads(tmp_path: Path) -> None:
    views = {"a": {"layers": "-1", "pooling": "mean"}, "b": {"layers": "2", "pooling": "cls"}}
    level = LevelOptions(level="sentence")
    with pytest.raises(InvalidSpec, match="every view sets its own layers"):
        views_level(None, views, options=EmbedOptions(layers="3"), asked=level, output=tmp_path / "v.parquet")


def test_batch_size_without_output_is_refused(no_load: None) -> None:
    ran = run_main("embed", "a cat", "--batch-size", "2")
    assert ran.code == 1 and "--batch-size: for corpus jobs only; add -o FILE or leave it out" in ran.stderr


def test_an_output_without_suffix_is_told_to_name_its_type(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="needs a known type") as caught:
        open_sink(tmp_path / "out", settings={})
    assert "Ray" not in str(caught.value) and "out.parquet" in str(caught.value)
    folder = tmp_path / "adir"
    folder.mkdir()
    with pytest.raises(Exception, match="folder output is written by a Ray corpus job"):
        open_sink(folder, settings={})


def test_cli_output_without_suffix(tmp_path: Path, small: Path) -> None:
    ran = run_main("embed", "-i", str(small), "-o", str(tmp_path / "out"))
    assert ran.code == 1 and "needs a known type" in ran.stderr and "Ray" not in ran.stderr


def test_spec_line_reads_as_settings() -> None:
    ran = run_main("embed", "a cat")
    line = next(line for line in ran.stdout.splitlines() if line.startswith("spec:"))
    assert line == "spec: layers 6, pooling mean, normalize on, long truncate"
    spec = {"layers": (0, 6), "combine": "concat", "pooling": "cls", "mask_special": True,
            "normalize": False, "long": "window", "stride": 64}  # fmt: skip
    said = spec_line(spec)
    assert (
        said
        == "layers 0,6, combine concat, pooling cls, mask-special on, normalize off, long window, stride 64"
    )
    for repr_bit in ("(", "[", "{", "None", "True", "False"):
        assert repr_bit not in said


def test_plain_values() -> None:
    assert plain_value(None) == "-" and plain_value(["projection"]) == "projection"
    assert plain_value([]) == "-" and plain_value({"a": None, "b": [1, 2]}) == "a=-, b=1, 2"


def test_info_prints_no_reprs() -> None:
    ran = run_main("info")
    assert ran.code == 0
    pairs = [line.split(None, 1) for line in ran.stdout.splitlines()]
    rows = {pair[0]: pair[1].strip() for pair in pairs if len(pair) == 2}
    assert rows["lacks"] == "projection"
    assert rows["quantize"] == "-" and rows["positions_in_attention"] == "-"
    assert "None" not in ran.stdout and "['" not in ran.stdout


def test_cut_is_said_in_the_shared_wording_and_singular() -> None:
    ran = run_main("embed", "word " * 400)
    assert ran.code == 0
    assert "1 of 1 text(s) ran past the model's 256 tokens and were truncated (" in ran.stderr
    assert "--long window keeps every token" in ran.stderr
    assert JobSummary(output=Path("x.parquet"), embedded=1).line().startswith("1 text embedded,")
    assert JobSummary(output=Path("x.parquet"), embedded=2).line().startswith("2 texts embedded,")


def test_info_lists_the_prompts_prompt_name_takes(bundled_path: Path, tmp_path: Path) -> None:
    """`bertscope info` did not list a model's prompts (/v2/info does): a command-line user learned them
    only from the refusal of an unknown name."""
    from prompted import PROMPTS, with_prompts

    folder = str(with_prompts(bundled_path, tmp_path / "prompted", include_prompt=False, default="query"))
    answer = json.loads(run_main("info", "--model", folder, "--json").stdout)
    assert answer["prompts"] == PROMPTS and answer["default_prompt_name"] == "query"
    ran = run_main("info", "--model", folder)
    assert ran.code == 0 and "query='query: ' (default), passage='passage: '" in ran.stdout
    plain = json.loads(run_main("info", "--json").stdout)
    assert plain["prompts"] == {} and plain["default_prompt_name"] is None
