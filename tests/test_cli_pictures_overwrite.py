"""Nothing lost: every command that draws a picture refuses a file that is already there, in one line and
before any model loads, unless --overwrite; the library functions that save pictures take overwrite=."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bertscope
from bertscope.errors import InvalidInput
from console import Ran, run_main

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "examples"
REFUSAL = "exists; pass --overwrite to replace it, or choose another name"
OLD = b"\x89PNG an older picture, kept"

# Every picture-writing command, with {P} where its picture goes (inputs that exist, options that work).
COMMANDS = {
    "explain": ["explain", "a cat", "a dog", "-p", "mean", "-o", "{P}"],
    "plot static": ["plot", "static", "king", "queen", "man", "-o", "{P}"],
    "plot words": ["plot", "words", "bank,river", "-i", f"{DATA / 'contexts.txt'}", "-o", "{P}"],
    "plot layers": ["plot", "layers", "a cat sat", "-o", "{P}"],
    "eval pairs": ["eval", "pairs", "-i", f"{DATA / 'pairs.tsv'}", "-o", "{P}"],
    "eval words": ["eval", "words", "--dataset", "simlex999", "-o", "{P}"],
    "contextuality": ["contextuality", "-i", f"{DATA / 'contexts.txt'}", "-w", "bank", "-o", "{P}"],
    "probe": ["probe", "-i", f"{EXAMPLES / 'senses.tsv'}", "-o", "{P}"],
    "probe --task distance": [
        "probe",
        "-i",
        f"{EXAMPLES / 'trees.conllu'}",
        "--task",
        "distance",
        "-o",
        "{P}",
    ],  # fmt: skip
    "cka": ["cka", "-i", f"{EXAMPLES / 'news.txt'}", "-o", "{P}"],
    "compare": ["compare", "bundled", "bundled", "-i", f"{EXAMPLES / 'news.txt'}", "-o", "{P}"],
    "senses": ["senses", "bank", "--in", "{DIR}/tokens.parquet", "-o", "{P}"],
}
# The commands that draw without -o, and the name they draw to.
DEFAULTS = {
    "plot static": "static.png",
    "plot words": "words.png",
    "plot layers": "layers.png",
}


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a model, reading a word dataset or clustering a store fails loudly: a refusal that comes
    after any of them is a multi-line traceback or another message, not the one line asserted."""

    def called(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the work started before the picture was checked")

    import bertscope.model
    import bertscope.research.analysis
    import bertscope.research.senses

    monkeypatch.setattr(bertscope.model, "load", called)
    monkeypatch.setattr(bertscope.research.analysis, "word_dataset", called)
    monkeypatch.setattr(bertscope.research.senses, "word_senses", called)


def _args(name: str, picture: Path | None, folder: Path) -> list[str]:
    args = [a.replace("{DIR}", str(folder)) for a in COMMANDS[name]]
    if picture is None:  # the command's default name: no -o
        at = args.index("-o")
        return args[:at] + args[at + 2 :]
    return [a.replace("{P}", str(picture)) for a in args]


def _refused(ran: Ran, picture: Path) -> None:
    assert ran.code == 1, ran
    lines = ran.stderr.splitlines()
    assert lines == [f"error: {picture} {REFUSAL}"] or (
        len(lines) == 1 and lines[0].startswith(f"error: {picture} {REFUSAL} with -o FILE")
    ), ran.stderr
    assert ran.stdout == "" and picture.read_bytes() == OLD


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_existing_picture_is_refused_before_the_work(name: str, tmp_path: Path) -> None:
    picture = tmp_path / "old.png"
    picture.write_bytes(OLD)
    ran = run_main(*_args(name, picture, tmp_path))
    _refused(ran, picture)
    assert ran.stderr == f"error: {picture} {REFUSAL}\n"  # a name the user typed: nothing more to say


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_a_second_run_with_the_default_name_is_refused_and_says_it_is_the_default(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    picture = Path(DEFAULTS[name])
    picture.write_bytes(OLD)
    ran = run_main(*_args(name, None, tmp_path))
    _refused(ran, picture)
    assert f"({picture} is where this command draws by default)" in ran.stderr


def test_a_measurement_draws_only_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """eval and contextuality draw with -o only, as probe, cka and explain: a --json run or a second run
    leaves no file it was not asked for, and a picture already there under the old default name stays."""
    monkeypatch.chdir(tmp_path)
    Path("sweep.png").write_bytes(OLD)
    for _ in range(2):
        ran = run_main(
            "eval", "pairs", "-i", str(DATA / "pairs.tsv"), "--layers", "6", "-p", "mean", "--json"
        )
        assert ran.code == 0, ran.stderr
        assert json.loads(ran.stdout)["records"]
    assert (
        sorted(p.name for p in tmp_path.iterdir()) == ["sweep.png"] and Path("sweep.png").read_bytes() == OLD
    )


@pytest.mark.usefixtures("no_work")
def test_the_confusion_matrix_beside_a_probe_picture_is_checked_too(tmp_path: Path) -> None:
    """`probe --per-label -o P.png` also draws P-confusion.png: an existing one is refused up front."""
    beside = tmp_path / "probe-confusion.png"
    beside.write_bytes(OLD)
    args = ["probe", "-i", str(EXAMPLES / "senses.tsv"), "--per-label", "-o", str(tmp_path / "probe.png")]
    _refused(run_main(*args), beside)
    assert not (tmp_path / "probe.png").exists()


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["explain", "a", "b", "--overwrite"], "--overwrite replaces an existing picture: add -o FILE.png"),
        (["cka", "-i", str(EXAMPLES / "news.txt"), "--overwrite"], "add -o FILE.png, or drop it"),
        (
            ["eval", "pairs", "-i", str(DATA / "pairs.tsv"), "--no-plot", "-o", "x.png"],
            "-o/--output names a picture, and --no-plot writes none",
        ),
        (
            ["contextuality", "-i", str(DATA / "contexts.txt"), "--no-plot", "--overwrite"],
            "--overwrite names a picture, and --no-plot writes none",
        ),
    ],
)
def test_overwrite_with_no_picture_to_replace_is_refused(args: list[str], needle: str) -> None:
    ran = run_main(*args)
    assert ran.code == 1 and ran.stderr.count("\n") == 1 and needle in ran.stderr, ran


def test_overwrite_replaces_the_picture(
    bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bertscope.cli import explain as cli_explain

    monkeypatch.setattr(cli_explain, "load_model", lambda *a, **k: bundled)
    picture = tmp_path / "static.png"
    picture.write_bytes(OLD)
    ran = run_main("plot", "static", "king", "queen", "man", "woman", "-o", str(picture), "--overwrite")
    assert ran.code == 0 and ran.stderr == f"wrote {picture}\n", ran
    drawn = picture.read_bytes()
    assert drawn.startswith(b"\x89PNG\r\n\x1a\n") and len(drawn) > 5000
    again = run_main("plot", "static", "king", "queen", "man", "woman", "-o", str(picture))
    assert again.code == 1 and again.stderr == f"error: {picture} {REFUSAL}\n"
    assert picture.read_bytes() == drawn


def test_library_writers_refuse_an_existing_file_unless_overwrite(tmp_path: Path) -> None:
    """The library says it in its own words (overwrite=True); the command line reads --overwrite."""
    from bertscope.research.contextuality import Contextuality
    from bertscope.research.plots import picture_file, plot_contextuality

    rows = [
        {"layer": k, "self_similarity": 0.9 - i / 20, "intra_sentence": 0.5, "baseline": 0.3,
         "self_adjusted": 0.6, "intra_adjusted": 0.2, "mev": 0.1}
        for i, k in enumerate(("static", 0, 1, 2))
    ]  # fmt: skip
    result = Contextuality(rows, {}, {"bank": 12})
    picture = tmp_path / "ctx.png"
    picture.write_bytes(OLD)
    message = f"{picture} exists; pass overwrite=True to replace it, or choose another name"
    with pytest.raises(InvalidInput, match="pass overwrite=True to replace it") as refused:
        plot_contextuality(result, picture)
    assert str(refused.value) == message and picture.read_bytes() == OLD
    with pytest.raises(InvalidInput, match="exists"):
        picture_file(picture)
    assert plot_contextuality(result, picture, overwrite=True) == picture
    assert picture.read_bytes().startswith(b"\x89PNG") and picture.read_bytes() != OLD
    assert picture_file(tmp_path / "new.png") == tmp_path / "new.png"


@pytest.mark.parametrize("name", ["pictures.png", "pictures"])
def test_a_folder_given_as_the_picture_is_named_a_folder_first(name: str, tmp_path: Path) -> None:
    """A folder named like a picture was refused as an existing file ('pass --overwrite', which then met
    the folder), and one without a suffix was refused for its suffix."""
    folder = tmp_path / name
    folder.mkdir()
    for extra in ([], ["--overwrite"]):
        ran = run_main("plot", "layers", "a cat", "-o", str(folder), *extra)
        assert ran.code == 1 and ran.stderr == (
            f"error: {folder} is a folder, not a file: give a picture's file name (inside it, or beside it)\n"
        ), ran.stderr
    assert folder.is_dir() and not any(folder.iterdir())


def test_a_layer_the_model_has_not_is_said_before_an_existing_picture(tmp_path: Path) -> None:
    """plot layers -l 9 over an existing layers.png said 'exists; pass --overwrite' first, and the bad layer
    only after the user had fixed that (audit 18i)."""
    picture = tmp_path / "layers.png"
    picture.write_bytes(b"an earlier picture")
    ran = run_main("plot", "layers", "a cat", "-l", "9", "-o", str(picture))
    assert ran.code != 0 and "layer 9 does not exist; layers are 0..6" in ran.stderr, ran.stderr
    assert picture.read_bytes() == b"an earlier picture"
