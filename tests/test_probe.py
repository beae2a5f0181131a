"""Probes per layer: grouped folds, the static row on a sense task, control task, readers, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from bertscope.cli import app, main
from bertscope.core.cpu import usable_cpus
from bertscope.errors import CorpusError, InvalidInput, InvalidSpec
from bertscope.research.probe import control_labels, fold_splits, probe
from bertscope.research.probe_data import read_sentences, read_words
from console import run_main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
runner = CliRunner()


def test_folds_never_split_a_sentence() -> None:
    rng = np.random.default_rng(1)
    groups = [f"s{k}" for k in rng.integers(0, 23, size=200)]
    labels = [str(x) for x in rng.integers(0, 3, size=200)]
    splits = fold_splits(labels, groups, 5, seed=0)
    tested = np.concatenate([test for _, test in splits])
    assert sorted(tested.tolist()) == list(range(200))  # every item tested exactly once
    for train, test in splits:
        assert not {groups[i] for i in train} & {groups[i] for i in test}


def test_static_row_sits_exactly_at_majority_on_the_sense_task(bundled) -> None:
    """One word ("bank"), one input row: the static row cannot beat the majority; layers separate senses."""
    result = probe(bundled, EXAMPLES / "senses.tsv", layers="0,-1", folds=4)
    rows = {r["layer"]: r for r in result.rows}
    assert result.labels == {"money": 22, "river": 18} and result.n_groups == 40
    assert [r["layer"] for r in result.rows] == ["static", 0, 6]
    assert rows["static"]["accuracy"] == result.majority
    assert rows[6]["accuracy"] >= result.majority + 0.3
    assert rows["static"]["control_accuracy"] is None  # no control asked
    low, high = rows[6]["accuracy_ci"]
    assert low <= rows[6]["accuracy"] <= high


def _first_sentences(path: Path, n: int, folder: Path) -> Path:
    """The first `n` sentences of a CoNLL-U file, as a file in `folder` (a smaller probe, the same kind)."""
    sentences = path.read_text(encoding="utf-8").split("\n\n")
    shorter = folder / path.name
    shorter.write_text("\n\n".join(sentences[:n]) + "\n", encoding="utf-8")
    return shorter


def test_each_fit_moves_the_progress_bar_once(bundled, monkeypatch, tmp_path) -> None:
    """Rows x folds x (task, control) fits: the bar is made for that many steps and each one advances it."""
    import contextlib

    from bertscope.research import probe_score as probe_module

    made: list[tuple[int, str, bool | None]] = []
    steps: list[int] = []

    @contextlib.contextmanager
    def counting(total: int, what: str, *, enabled: bool | None = None):  # type: ignore[no-untyped-def]
        made.append((total, what, enabled))
        yield lambda: steps.append(1)

    monkeypatch.setattr(probe_module, "step_progress", counting)
    pos = _first_sentences(EXAMPLES / "pos.conllu", 15, tmp_path)  # the count is the same on any size
    probe(bundled, pos, label_field="upos", layers="0,-1", folds=3, control=True, progress=True)
    assert made == [(3 * 3 * 2, "fitting probes", True)] and len(steps) == 3 * 3 * 2


@pytest.fixture
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """n_jobs is capped at the machine's CPUs: the two-worker tests read two on a one-CPU machine too."""
    import importlib

    for module in ("bertscope.research.probe", "bertscope.cli.app"):  # the package's `app` is the Typer
        monkeypatch.setattr(importlib.import_module(module), "usable_cpus", lambda: max(2, usable_cpus()))


@pytest.mark.usefixtures("two_cpus")
def test_fits_on_worker_processes_equal_the_fits_in_this_process(bundled, tmp_path) -> None:
    pos = _first_sentences(EXAMPLES / "pos.conllu", 15, tmp_path)  # equal fits on any size
    here = probe(bundled, pos, label_field="upos", layers="-1", folds=3, control=True, n_jobs=1)
    spawned = probe(bundled, pos, label_field="upos", layers="-1", folds=3, control=True, n_jobs=2)
    assert spawned.to_dict() == here.to_dict()  # deterministic fits: exactly equal, not close


@pytest.mark.usefixtures("two_cpus")
def test_the_command_line_fits_on_worker_processes(bundled) -> None:
    """`bertscope probe --n-jobs 2 --json`: worker processes, the same rows as one process."""
    topics = str(EXAMPLES / "topics.tsv")
    args = ["-i", topics, "--level", "sentence", "--layers", "-1", "--folds", "3", "--n-jobs", "2", "--json"]
    ran = run_main("probe", *args)
    assert ran.code == 0, ran.stderr
    here = probe(bundled, topics, level="sentence", layers="-1", folds=3, n_jobs=1).to_dict()
    assert json.loads(ran.stdout)["rows"] == here["rows"]


def test_how_many_processes_fit() -> None:
    from joblib import cpu_count

    from bertscope.research.probe_fit import PARALLEL_MIN_ITEMS, fit_workers

    cpus = cpu_count()
    assert fit_workers(None, PARALLEL_MIN_ITEMS - 1, 16) == 1  # small probes stay in this process
    assert fit_workers(None, PARALLEL_MIN_ITEMS, 16) == min(cpus, 16)
    assert fit_workers(-1, 10, 3) == min(cpus, 3) and fit_workers(5, 10, 3) == 3
    assert fit_workers(1, 10**6, 9) == 1


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, True])
def test_a_bad_n_jobs_is_one_clear_error(bundled, n_jobs) -> None:
    with pytest.raises(InvalidInput, match="n_jobs"):
        probe(bundled, EXAMPLES / "senses.tsv", n_jobs=n_jobs)


def test_control_task_is_fixed_per_type_and_seeded() -> None:
    types = ["a", "b", "a", "c", "b", "d"] * 5
    labels = ["x", "y", "x", "y", "z", "x"] * 5
    first = control_labels(types, labels, seed=3)
    assert first == control_labels(types, labels, seed=3)
    by_type: dict[str, set[str]] = {}
    for t, label in zip(types, first, strict=True):
        by_type.setdefault(t, set()).add(label)
    assert all(len(v) == 1 for v in by_type.values()) and set(first) <= set(labels)


def test_word_probe_with_control_on_a_tiny_model(tiny_models, tmp_path) -> None:
    lines = []
    for k in range(10):
        det, noun, verb = (
            ("the", "a", "this", "that")[k % 4],
            ("cat", "dog", "car")[k % 3],
            ("ran", "went")[k % 2],
        )
        lines += [f"{det}\tDET", f"{noun}\tNOUN", f"{verb}\tVERB", ""]
    path = tmp_path / "pos.tsv"
    path.write_text("\n".join(lines))
    result = probe(tiny_models["bert"], path, folds=4, control=True)
    assert result.n_items == 30 and result.n_groups == 10
    assert [r["layer"] for r in result.rows] == ["static", 0, 1, 2]
    for row in result.rows:
        assert row["selectivity"] == pytest.approx(row["accuracy"] - row["control_accuracy"])


def test_sentence_probe_json_from_the_cli(tiny_dirs) -> None:
    done = runner.invoke(
        app, ["probe", "-i", str(EXAMPLES / "topics.tsv"), "--level", "sentence", "--folds", "3",
              "-m", str(tiny_dirs["bert"]), "--json"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["level"] == "sentence" and data["n_items"] == 36
    assert 0 < data["majority"] < 0.5
    assert set(data["rows"][0]) >= {"layer", "accuracy", "macro_f1", "control_accuracy", "selectivity"}


def test_conllu_reader_takes_the_column_and_skips_ranges(tmp_path) -> None:
    text = (
        "# text = Don't go\n1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_\n1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
        "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n2.1\tx\t_\tX\t_\t_\t_\t_\t_\t_\n"
        "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
    )
    path = tmp_path / "a.conllu"
    path.write_text(text)
    (sentence,) = read_words(path)
    assert sentence.words == ("Do", "n't", "go") and sentence.labels == ("AUX", "PART", "VERB")
    assert read_words(path, label_field="deprel")[0].labels == ("aux", "advmod", "root")
    assert read_words(EXAMPLES / "pos.conllu", label_field="upos")[0].labels[:3] == ("PRON", "AUX", "VERB")


@pytest.mark.parametrize(
    ("content", "level", "folds", "message"),
    [
        ("a\tX\nb\tX\n\nc\tX\n", "word", 2, "one label"),
        ("a\t_\nb\t_\n\nc\t_\n", "word", 2, "labels no item"),
        ("a\tX\nb\tY\n\nc\tX\n", "word", 5, "folds=5 needs at least 5"),
        ("a\tX\tY\n", "word", 2, "expected word<TAB>label"),
        ("one text\tX\ntwo texts\tX\n", "sentence", 2, "one label"),
        ("no label here\n", "sentence", 2, "expected text<TAB>label"),
    ],
)
def test_bad_input_is_one_clear_error(bundled, tmp_path, content, level, folds, message) -> None:
    path = tmp_path / "task.tsv"
    path.write_text(content)
    with pytest.raises((InvalidInput, CorpusError), match=message):
        probe(bundled, path, level=level, folds=folds)


def test_control_on_one_word_type_is_refused(bundled) -> None:
    with pytest.raises(InvalidInput, match="every probed item .* is 'bank'"):
        probe(bundled, EXAMPLES / "senses.tsv", layers="-1", folds=2, control=True)


def test_cli_prints_the_error_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "task.tsv"
    path.write_text("a\tX\nb\tX\n")
    monkeypatch.setattr(sys, "argv", ["bertscope", "probe", "-i", str(path)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "one label" in lines[0] and "Traceback" not in lines[0]


def test_sentence_reader(tmp_path) -> None:
    path = tmp_path / "s.tsv"
    path.write_text("# comment\na text\twith\tlast field label\tL\n\nanother\tM\n")
    assert read_sentences(path) == (["a text\twith\tlast field label", "another"], ["L", "M"])


def _mirrored(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Classes a and b mirror each other (features 0 and 1 swapped) and the word row sits on the mirror,
    seen once as a and once as b: the classifier's scores for a and b there are equal but for rounding."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((12, 16)).astype(np.float32)
    a[:, 0] += 2
    b = a.copy()
    b[:, [0, 1]] = a[:, [1, 0]]
    c = rng.standard_normal((12, 16)).astype(np.float32)
    c[:, 0] -= 2
    c[:, 1] = c[:, 0]
    word = rng.standard_normal(16).astype(np.float32)
    word[1] = word[0]
    x = np.vstack([a, b, c, word, word])
    y = np.array(["a"] * 12 + ["b"] * 12 + ["c"] * 12 + ["a", "b"])
    return x, y, word[None]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_tie_on_identical_rows_is_decided_by_rule_not_by_rounding(seed) -> None:
    """The static row's tie (issue 39: 0.759 on AVX2, 0.770 on AVX-512): one word row seen once as a and
    once as b. A 1e-7 change of scale, the size of another CPU's rounding, flipped the classifier's pick;
    the rule gives the same label every time (a and b are as frequent, so the first by name)."""
    from bertscope.research.probe_fit import predict

    x, y, word = _mirrored(seed)
    picks = set()
    for k in range(6):
        scale = 1 + 1e-7 * np.random.default_rng(100 + k).standard_normal(x.shape[1])
        scale[1] = scale[0]  # the mirror stays a mirror
        scale = scale.astype(np.float32)
        picks.add(str(predict(x * scale, y, word * scale)[0]))
    assert picks == {"a"}


def test_a_tie_goes_to_the_label_more_frequent_in_training() -> None:
    from bertscope.research.probe_fit import tie_broken

    word, other, alone = np.ones(3), np.zeros(3), np.full(3, 2.0)
    x_train = np.stack([word, word, other, other, other])
    y_train = np.array(["NOUN", "VERB", "VERB", "VERB", "ADJ"])  # VERB 3, NOUN 1, ADJ 1 in training
    x_test = np.stack([word, word, other, alone])
    got = tie_broken(np.array(["NOUN", "ADJ", "ADJ", "NOUN"]), x_train, y_train, x_test)
    # `word` was seen once as NOUN, once as VERB: a pick of either becomes VERB (more frequent in
    # training); a pick outside the tie (ADJ) stays; at `other` VERB leads (2 to 1), no tie, the pick
    # stays; a row seen nowhere in training stays.
    assert got.tolist() == ["VERB", "ADJ", "ADJ", "NOUN"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "--seed -1: a seed is a whole number from 0 to 4294967295"),
        (["--seed", str(2**32)], "a seed is a whole number"),
    ],
)
def test_a_bad_seed_is_one_line(args, message) -> None:
    ran = run_main("probe", "-i", str(EXAMPLES / "senses.tsv"), *args)
    assert ran.code == 1 and ran.stderr.count("\n") == 1 and message in ran.stderr, ran.stderr


@pytest.mark.parametrize("command", [["probe"], ["probe", "--level", "sentence"], ["eval", "words"]])
def test_a_file_that_is_not_utf8_is_one_line(tmp_path, command) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes("café\tNOUN\n\nthé\tNOUN\t3\n".encode("latin-1"))
    ran = run_main(*command, "-i", str(path))
    assert ran.code == 1 and ran.stderr.count("\n") == 1, ran.stderr
    assert (
        f"{path}" in ran.stderr
        and "not UTF-8 text" in ran.stderr
        and "convert the file to UTF-8" in ran.stderr
    )


def test_a_folder_or_an_empty_file_is_named_as_such(tmp_path) -> None:
    with pytest.raises(CorpusError, match="it is a folder: give a file inside it"):
        read_words(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(
        CorpusError, match="empty.txt is empty: a probe file holds one word<TAB>label per line"
    ):
        read_words(empty)
    with pytest.raises(CorpusError, match="is empty: a probe file holds one text<TAB>label per line"):
        read_sentences(empty)
    ran = run_main("probe", "-i", str(empty))
    assert ran.code == 1 and "is empty" in ran.stderr and "every label is _" not in ran.stderr


def test_repeated_sentences_are_counted_as_distinct_ones(tiny_dirs, tmp_path) -> None:
    """A sentence given twice is one group: the title says "distinct sentences", --json says both counts."""
    sentences = [("the", "cat", "ran"), ("a", "dog", "went"), ("this", "car", "ran"), ("that", "cat", "went")]
    blocks = [f"{d}\tDET\n{n}\tNOUN\n{v}\tVERB\n" for d, n, v in sentences]
    path = tmp_path / "pos.tsv"
    path.write_text("\n".join(blocks + blocks[:2]))  # 6 sentences, 4 distinct
    args = ["probe", "-i", str(path), "--folds", "2", "--layers", "-1", "-m", str(tiny_dirs["bert"])]
    shown = run_main(*args)
    assert shown.code == 0, shown.stderr
    assert "4 distinct sentences" in " ".join(shown.stdout.split())
    data = json.loads(run_main(*args, "--json").stdout)
    assert data["n_sentences"] == 6 and data["n_groups"] == 4
    once = tmp_path / "once.tsv"
    once.write_text("\n".join(blocks))
    assert "distinct" not in run_main(*args[:2], str(once), *args[3:]).stdout


def test_the_fits_write_progress_lines_to_a_log(bundled, capfd, monkeypatch) -> None:
    """stderr a file, not a terminal (CI, nohup): a line every few seconds, none redrawn; the clock is
    stepped by hand (11 s a reading), so every fit is past the interval."""
    from bertscope.core import progress

    readings = iter(range(0, 10**6, 11))
    monkeypatch.setattr(progress, "_clock", lambda: float(next(readings)))
    probe(bundled, EXAMPLES / "senses.tsv", layers="-1", folds=2)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("fitting probes")]
    assert lines[0].startswith("fitting probes: 1/4 (25%), 11 s elapsed, about 33 s left"), lines
    assert lines[-1].startswith("fitting probes: 4/4 (100%), done in") and "\r" not in "".join(lines)


# Held out, per label, capacity (issue 36) -------------------------------------------------------------

TREES, TREES_TEST = EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu"


def _independent_fit(x_train, y_train, x_test):  # type: ignore[no-untyped-def]
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    fitted = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, tol=1e-6))
    # One BLAS thread, as the probe's own fits run (probe_fit.row_scores): on two busy cores OpenBLAS's
    # threads fought each other and this one fit took 10x the CPU (9.6 s against 0.6 s on the EWT slice).
    with threadpool_limits(limits=1):
        fitted.fit(x_train.astype(np.float64), y_train)
        return fitted.predict(x_test.astype(np.float64))


def test_held_out_equals_an_independent_fit_on_train_scored_on_test(bundled) -> None:
    """Trained on trees.conllu, scored on trees-test.conllu: accuracy, macro-F1 and the per-label figures
    are those of a plain scikit-learn fit on the same word vectors, and of sklearn.metrics."""
    from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support

    from bertscope.research.probe import word_features

    result = probe(
        bundled, TREES, test=TREES_TEST, label_field="upos", layers="3,6", per_label=True, per_label_layer=6
    )
    train = word_features(bundled, read_words(TREES, label_field="upos"), layers=[3, 6])
    test = word_features(bundled, read_words(TREES_TEST, label_field="upos"), layers=[3, 6])
    y_train, y_test = np.asarray(train.labels), np.asarray(test.labels)
    assert result.folds == 0 and result.n_items == len(y_train) and result.n_test == len(y_test)
    rows = {r["layer"]: r for r in result.rows}
    independent = {}
    for i, layer in enumerate([3, 6]):
        predicted = independent[layer] = _independent_fit(train.layers[:, i], y_train, test.layers[:, i])
        row = rows[layer]
        assert row["accuracy"] == pytest.approx(np.mean(predicted == y_test), abs=1e-9)
        assert row["macro_f1"] == pytest.approx(f1_score(y_test, predicted, average="macro"), abs=1e-9)
        low, high = row["accuracy_ci"]
        assert low < row["accuracy"] < high and row["macro_f1_ci"] is None
    report = result.per_label
    assert report is not None and report["layer"] == 6 and report["probe"] == "linear"
    predicted = independent[6]  # the fit of layer 6 above
    labels = sorted(set(y_test) | set(predicted))
    p, r, f, s = precision_recall_fscore_support(y_test, predicted, labels=labels, zero_division=0)
    assert report["labels"] == labels and report["support"] == s.tolist()
    np.testing.assert_allclose(report["precision"], p, atol=1e-9)
    np.testing.assert_allclose(report["recall"], r, atol=1e-9)
    np.testing.assert_allclose(report["f1"], f, atol=1e-9)
    assert report["confusion"] == confusion_matrix(y_test, predicted, labels=labels).tolist()
    assert result.to_dict()["evaluation"] == "held_out"


def test_per_label_defaults_to_the_best_row_and_pools_the_folds(bundled) -> None:
    result = probe(bundled, EXAMPLES / "senses.tsv", layers="0,-1", folds=4, per_label=True)
    best = max(result.rows, key=lambda r: r["accuracy"])
    report = result.per_label
    assert report is not None and report["layer"] == best["layer"]
    assert sum(report["support"]) == result.n_items  # every item tested once, over the folds
    assert np.trace(report["confusion"]) / result.n_items == pytest.approx(best["accuracy"], abs=0.03)


def test_the_control_label_of_a_word_type_is_the_same_in_train_and_test() -> None:
    from bertscope.research.probe_eval import control_table

    train_types, labels = ["the", "cat", "ran", "the", "dog"], ["DET", "NOUN", "VERB", "DET", "NOUN"]
    test_types = ["the", "bird", "ran", "flew", "bird"]
    table = control_table(train_types, labels, seed=5, unseen=test_types)
    assert set(table) == set(train_types) | set(test_types) and set(table.values()) <= set(labels)
    # the training types' labels are those of the folds' control task (no test file): unseen types come after
    alone = control_table(train_types, labels, seed=5)
    assert {t: table[t] for t in alone} == alone
    assert control_table(train_types, labels, seed=5, unseen=test_types) == table


def test_held_out_control_labels_agree_across_the_two_files(bundled, monkeypatch) -> None:
    """The labels the control fits see: one per word type, on both sides of the split."""
    from bertscope.research import probe_score as probe_module

    seen: list[np.ndarray] = []
    real = probe_module.scores_of_rows

    def spy(rows, splits, **kw):  # type: ignore[no-untyped-def]
        seen.extend(y for _, y, _ in rows)
        return real(rows, splits, **kw)

    monkeypatch.setattr(probe_module, "scores_of_rows", spy)
    probe(bundled, TREES, test=TREES_TEST, label_field="upos", layers="-1", control=True)
    task, control = seen[0], seen[1]
    types = [w for s in read_words(TREES) + read_words(TREES_TEST) for w in s.words]
    assert len(types) == len(control) and not np.array_equal(task, control)
    by_type: dict[str, set[str]] = {}
    for word, label in zip(types, control, strict=True):
        by_type.setdefault(word, set()).add(str(label))
    assert all(len(v) == 1 for v in by_type.values())


def test_mlp_rows_are_deterministic_and_a_sweep_gives_a_row_per_size(bundled, tmp_path) -> None:
    args = dict(test=TREES_TEST, label_field="upos", layers="-1", control=True)
    # The rows, and that one seed gives the same fits, hold on any size: 15 sentences, not 45.
    shorter = _first_sentences(TREES, 15, tmp_path)
    first = probe(bundled, shorter, sweep="hidden=8,32", seed=3, **args).to_dict()
    again = probe(bundled, shorter, kind="mlp", sweep="hidden=8,32", seed=3, **args).to_dict()
    assert first == again
    assert [(r["probe"], r["capacity"], r["layer"]) for r in first["rows"]] == [
        ("mlp", 8, "static"), ("mlp", 8, 6), ("mlp", 32, "static"), ("mlp", 32, 6)
    ]  # fmt: skip
    for row in first["rows"]:
        assert row["selectivity"] == pytest.approx(row["accuracy"] - row["control_accuracy"])
    ranked = probe(bundled, shorter, sweep="rank=4", **args).to_dict()["rows"]
    assert {(r["probe"], r["capacity"]) for r in ranked} == {("linear", 4)}
    plain = probe(bundled, shorter, **args).to_dict()["rows"]
    assert {(r["probe"], r["capacity"]) for r in plain} == {("linear", None)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--sweep", "depth=3"],
            "--sweep depth=3: give a size and its values, hidden=16,64,256 (--kind mlp)",
        ),
        (["--sweep", "hidden=16,x"], "the hidden values are whole numbers from 1"),
        (["--sweep", "hidden=0"], "whole numbers from 1"),
        (["--sweep", "rank=8", "--kind", "mlp"], "sweeps a linear probe, not --kind mlp"),
        (["--kind", "tree"], "unknown --kind tree; choose one of: linear, mlp"),
        (["--per-label", "--per-label-layer", "9"], "--per-label-layer 9: this probe's rows are static"),
        (["--per-label-layer", "2"], "add --per-label"),
    ],
)
def test_bad_capacity_and_per_label_options_are_one_line(args, message) -> None:
    ran = run_main("probe", "-i", str(EXAMPLES / "senses.tsv"), "--layers", "0,-1", *args)
    assert ran.code == 1 and ran.stderr.count("\n") == 1 and message in ran.stderr, ran.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sweep": "depth=3"}, "sweep='depth=3': give a size and its values, hidden=16,64,256 (kind='mlp')"),
        ({"sweep": "hidden=0"}, "sweep='hidden=0': the hidden values are whole numbers from 1"),
        ({"sweep": "rank=8,8"}, "sweep='rank=8,8': a rank is given twice"),
        ({"sweep": "rank=8", "kind": "mlp"}, "sweeps a linear probe, not kind='mlp': give kind='linear'"),
        ({"kind": "tree"}, "unknown kind='tree'; choose one of: linear, mlp"),
        ({"per_label": True, "per_label_layer": 9}, "per_label_layer=9: this probe's rows are static"),
        ({"seed": -1}, "seed=-1: a seed is a whole number"),
        ({"folds": 1}, "folds=1: cross-validation needs at least 2 folds"),
    ],
)
def test_library_refusals_name_the_keyword_not_the_flag(bundled, options, message) -> None:
    """A Python caller reads kind=, sweep=, seed= ...; the command line reads the same message in its
    flags (cli.wording.as_flags), as the CLI cases above show."""
    with pytest.raises((InvalidInput, InvalidSpec)) as raised:
        probe(bundled, EXAMPLES / "senses.tsv", layers="-1", **options)
    said = str(raised.value)
    assert message in said and "--" not in said and "\n" not in said, said


def test_a_level_reads_in_either_number_and_is_named_as_the_corpus_levels(tiny_models) -> None:
    """probe(level="words") (embed's and the corpus jobs' name) is level="word"; the result names the
    level "words"; Level.WORD is still a name of it; an unknown level is one line with the choices."""
    from bertscope.research.probe_features import Level

    sentences = [
        [("the", "DET"), (noun, "NOUN"), (verb, "VERB")] for noun in ("cat", "dog") for verb in ("ran", "sat")
    ]
    model = tiny_models["bert"]
    plural = probe(model, sentences, level="words", layers="0", folds=2).to_dict()
    singular = probe(model, sentences, level="word", layers="0", folds=2).to_dict()
    assert plural == singular and plural["level"] == "words"
    texts = [("a cat sat", "x"), ("the dog ran", "y"), ("a dog sat", "x"), ("the cat ran", "y")]
    assert probe(model, texts, level="sentences", layers="0", folds=2).level == "sentence"
    assert Level.WORD is Level.WORDS is Level("word") and list(Level) == ["words", "sentence"]
    with pytest.raises(InvalidSpec) as raised:
        probe(model, sentences, level="pages", layers="0", folds=2)
    assert str(raised.value) == "unknown level 'pages'; choose one of: words, sentence"


def test_held_out_per_label_from_the_cli(tmp_path) -> None:
    picture = tmp_path / "p.png"
    shorter = _first_sentences(TREES, 15, tmp_path)  # the report's parts and pictures: the same on any size
    args = ["-i", str(shorter), "--test", str(TREES_TEST), "--column", "upos", "--layers", "-1"]
    ran = run_main("probe", *args, "--per-label", "--json", "-o", str(picture))
    assert ran.code == 0, ran.stderr
    data = json.loads(ran.stdout)
    assert data["evaluation"] == "held_out" and data["folds"] == 0
    assert set(data["per_label"]) == {
        "layer", "probe", "capacity", "labels", "precision", "recall", "f1", "support", "confusion"
    }  # fmt: skip
    assert picture.exists() and (tmp_path / "p-confusion.png").exists()
    shown = run_main("probe", *args, "--per-label", "--sweep", "rank=8")
    assert shown.code == 0 and "confusion matrix" in shown.stdout and "linear rank 8" in shown.stdout


# One MLP probe in a fresh interpreter under the OpenBLAS kernel it is given, printed as JSON with the
# arithmetic of that interpreter and of the pinned worker its fits ran in (the one process of the one
# pinned executor: 4 fits of 569 items take one worker, see probe_fit.fit_workers).
MLP_RUN = """
import json, sys
from bertscope import load
from bertscope.research import probe_fit
from bertscope.research.probe import probe

def arithmetic():
    import importlib
    from threadpoolctl import threadpool_info
    umath = importlib.import_module("numpy._core._multiarray_umath")
    blas = sorted({i["architecture"] for i in threadpool_info() if i["internal_api"] == "openblas"})
    return {"blas": blas, "avx512_loops": bool(umath.__cpu_features__.get("X86_V4"))}

r = probe(load(), sys.argv[1], test=sys.argv[2], label_field="upos", layers="0", control=True,
          sweep="hidden=16")
workers = [executor.submit(arithmetic).result() for executor in probe_fit._PINNED.values()]
print(json.dumps({"parent": arithmetic(), "workers": workers, "result": r.to_dict()}, sort_keys=True))
"""


def _cpu_has(feature: str) -> bool:
    import importlib

    return bool(importlib.import_module("numpy._core._multiarray_umath").__cpu_features__.get(feature))


def test_an_mlp_probe_fits_in_a_pinned_worker_whatever_openblas_kernel_its_caller_runs() -> None:
    """The control row of an MLP once moved by 0.012 between AVX2 and AVX-512 kernels (the static row
    of this very probe: 0.484 and 0.472; unpinned, it still does), so its fits run in a worker whose
    arithmetic is pinned (probe_fit.pinned_env). Callers run under OpenBLAS's Sandybridge, Haswell and
    (where the CPU has it) SkylakeX: each runs the kernel it was given, its fits ran under Haswell with
    no AVX-512 loops, and the JSON is byte-equal. Skipped by the CPU's features, not by pinned_env, so a
    pinned_env that gives up fails here."""
    import os
    import subprocess

    if not (_cpu_has("AVX2") and _cpu_has("FMA3")):
        pytest.skip("pinned arithmetic needs an x86-64 CPU with AVX2 and FMA")
    kernels = ["Sandybridge", "Haswell"] + (["SkylakeX"] if _cpu_has("AVX512F") else [])
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", MLP_RUN, str(TREES), str(TREES_TEST)],
            env={**os.environ, "OPENBLAS_CORETYPE": kernel, "HF_HUB_OFFLINE": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for kernel in kernels
    ]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err.decode()[-2000:] for _, err in outputs]
    ran = [json.loads(out) for out, _ in outputs]
    assert [r["parent"]["blas"] for r in ran] == [[kernel] for kernel in kernels]
    pinned = {"blas": ["Haswell"], "avx512_loops": False}
    assert [r["workers"] for r in ran] == [[pinned]] * len(kernels)
    first = json.dumps(ran[0]["result"], sort_keys=True)
    assert all(json.dumps(r["result"], sort_keys=True) == first for r in ran), (
        "the JSON depends on the caller's BLAS"
    )
    rows = ran[0]["result"]["rows"]
    assert [(r["probe"], r["capacity"], r["layer"]) for r in rows] == [("mlp", 16, "static"), ("mlp", 16, 0)]


def _worker_arithmetic() -> tuple[list[str], bool]:
    import importlib

    from threadpoolctl import threadpool_info

    umath = importlib.import_module("numpy._core._multiarray_umath")
    blas = [i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]
    return blas, bool(umath.__cpu_features__.get("X86_V4"))


def test_the_pinned_worker_runs_haswell_kernels_and_no_avx512_loops() -> None:
    from bertscope.research import probe_fit

    env = probe_fit.pinned_env()
    if env is None:
        pytest.skip("pinned arithmetic needs an x86-64 CPU with AVX2 and FMA")
    blas, avx512_loops = probe_fit._pinned_executor(1, env).submit(_worker_arithmetic).result()
    assert blas and set(blas) == {"Haswell"} and not avx512_loops


EWT_TRAIN, EWT_DEV = EXAMPLES / "ewt" / "train.conllu", EXAMPLES / "ewt" / "dev.conllu"


def test_held_out_upos_on_the_ewt_slice_equals_an_independent_fit(bundled) -> None:
    """UD English EWT (150 training, 60 dev sentences): layer 3's held-out accuracy is a plain
    scikit-learn fit's on the same vectors, above the static row's, and more of it is selective."""
    from bertscope.research.probe import word_features

    result = probe(bundled, EWT_TRAIN, test=EWT_DEV, label_field="upos", layers="3", control=True)
    train = word_features(bundled, read_words(EWT_TRAIN, label_field="upos"), layers=[3])
    test = word_features(bundled, read_words(EWT_DEV, label_field="upos"), layers=[3])
    y_train, y_test = np.asarray(train.labels), np.asarray(test.labels)
    assert (result.n_items, result.n_test) == (len(y_train), len(y_test))
    rows = {r["layer"]: r for r in result.rows}
    predicted = _independent_fit(train.layers[:, 0], y_train, test.layers[:, 0])
    assert rows[3]["accuracy"] == pytest.approx(np.mean(predicted == y_test), abs=1e-9)
    assert rows[3]["accuracy"] > rows["static"]["accuracy"] > result.majority
    assert rows[3]["selectivity"] > rows["static"]["selectivity"] + 0.1
