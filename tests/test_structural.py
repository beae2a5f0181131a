"""Structural probes: tree reading, the metrics against direct computations on hand-built trees, the
gradients against PyTorch's autograd, a probe on the bundled model above the linear chain, the CLI."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from bertscope.cli import app
from bertscope.errors import CorpusError, InvalidInput, InvalidSpec
from bertscope.research.conllu import Tree, read_trees, tree_depths, tree_distances
from bertscope.research.structural import structural_probe
from bertscope.research.structural_fit import SMOOTH, gradient
from bertscope.research.structural_metrics import (
    chain_depths,
    chain_distances,
    depth_scores,
    distance_scores,
    mst_edges,
    row_spearman,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
runner = CliRunner()

# "The old cat sleeps here ." : sleeps is the root; cat <- The, old; here -> sleeps; . -> sleeps
SLEEPS = Tree(
    ("The", "old", "cat", "sleeps", "here", "."),
    ("DET", "ADJ", "NOUN", "VERB", "ADV", "PUNCT"),
    (2, 2, 3, -1, 3, 3),
)


def _bfs_distances(heads: tuple[int, ...]) -> np.ndarray:
    n = len(heads)
    adjacent = {i: set() for i in range(n)}
    for i, h in enumerate(heads):
        if h >= 0:
            adjacent[i].add(h)
            adjacent[h].add(i)
    out = np.zeros((n, n))
    for start in range(n):
        seen, frontier, depth = {start}, [start], 0
        while frontier:
            for node in frontier:
                out[start, node] = depth
            frontier = [m for node in frontier for m in adjacent[node] if m not in seen]
            seen.update(frontier)
            depth += 1
    return out


def test_tree_distances_and_depths_are_path_lengths() -> None:
    assert tree_distances(SLEEPS.heads).tolist() == _bfs_distances(SLEEPS.heads).tolist()
    assert tree_distances(SLEEPS.heads)[0, 4] == 3  # The -> cat -> sleeps -> here
    assert tree_depths(SLEEPS.heads).tolist() == [2, 2, 1, 0, 1, 1]
    for tree in read_trees(EXAMPLES / "trees-test.conllu"):
        assert np.array_equal(tree_distances(tree.heads), _bfs_distances(tree.heads))
        assert np.array_equal(tree_depths(tree.heads), tree_distances(tree.heads)[tree.root])


def test_gold_distances_score_perfectly_and_the_chain_as_counted_by_hand() -> None:
    gold = distance_scores([SLEEPS], [tree_distances(SLEEPS.heads)])
    assert gold == {"uuas": 1.0, "dspr": 1.0}
    # Chain over the 5 words that are not punctuation: The-old, old-cat, cat-sleeps, sleeps-here.
    # Gold edges between them: The-cat, old-cat, cat-sleeps, sleeps-here: 3 of 4 found.
    chain = distance_scores([SLEEPS], [chain_distances(len(SLEEPS))])
    assert chain["uuas"] == 0.75
    expected = np.mean(
        [
            np.corrcoef(_ranks(chain_distances(6)[i]), _ranks(tree_distances(SLEEPS.heads)[i]))[0, 1]
            for i in range(6)
        ]
    )
    assert chain["dspr"] == pytest.approx(expected, abs=1e-12)


def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(values)


def test_uuas_counts_over_the_test_set_and_leaves_punctuation_out() -> None:
    """UUAS is found edges / gold edges summed over sentences; a punctuation word's edges never count,
    whatever its predicted distances."""
    twisted = tree_distances(SLEEPS.heads)
    twisted[5, :] = twisted[:, 5] = 0.0  # the full stop predicted next to every word
    assert distance_scores([SLEEPS], [twisted])["uuas"] == 1.0
    short = Tree(("Dogs", "bark", "loudly"), ("NOUN", "VERB", "ADV"), (1, -1, 1))
    chain = [chain_distances(len(SLEEPS)), chain_distances(3)]
    assert distance_scores([SLEEPS, short], chain)["uuas"] == (3 + 2) / (4 + 2)


def test_mst_edges_equal_a_brute_force_minimum() -> None:
    rng = np.random.default_rng(0)
    points = rng.normal(size=(6, 3))
    distances = ((points[:, None] - points[None]) ** 2).sum(-1)
    pairs = list(itertools.combinations(range(6), 2))
    best = min(
        (sum(distances[i, j] for i, j in edges), set(edges))
        for edges in itertools.combinations(pairs, 5)
        if len(_connected(edges)) == 6
    )
    assert mst_edges(distances) == best[1]
    assert mst_edges(np.zeros((3, 3))) and len(mst_edges(np.zeros((3, 3)))) == 2  # zeros are still edges


def _connected(edges: tuple[tuple[int, int], ...]) -> set[int]:
    reached, grew = {0}, True
    while grew:
        grew = False
        for i, j in edges:
            if (i in reached) != (j in reached):
                reached |= {i, j}
                grew = True
    return reached


def test_depth_scores_on_a_known_tree() -> None:
    assert depth_scores([SLEEPS], [tree_depths(SLEEPS.heads)]) == {"root_acc": 1.0, "nspr": 1.0}
    # The chain's root is the first word (The), not sleeps.
    chain = depth_scores([SLEEPS], [chain_depths(len(SLEEPS))])
    assert chain["root_acc"] == 0.0
    from scipy.stats import spearmanr

    assert chain["nspr"] == pytest.approx(spearmanr(np.arange(6), tree_depths(SLEEPS.heads))[0], abs=1e-12)
    # The least deep word is punctuation: it is passed over, the next least deep word counts.
    predicted = tree_depths(SLEEPS.heads)
    predicted[5] = -1.0
    assert depth_scores([SLEEPS], [predicted])["root_acc"] == 1.0


def test_spearman_is_averaged_over_lengths_5_to_50_only() -> None:
    short = Tree(("Dogs", "bark", "loudly"), ("NOUN", "VERB", "ADV"), (1, -1, 1))
    # A 3-word sentence is left out of DSpr and NSpr (but counted in UUAS and root accuracy).
    assert distance_scores([short], [chain_distances(3)])["dspr"] is None
    assert depth_scores([short], [chain_depths(3)])["nspr"] is None


def test_row_spearman_equals_scipy() -> None:
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, size=(5, 9)).astype(float), rng.normal(size=(5, 9))
    ours = row_spearman(a, b)
    for i in range(5):
        assert ours[i] == pytest.approx(spearmanr(a[i], b[i])[0], abs=1e-12)


@pytest.mark.parametrize("distance", [True, False])
def test_gradients_equal_torch_autograd(distance: bool) -> None:
    import torch

    rng = np.random.default_rng(1)
    b = rng.normal(size=(4, 6))
    trees = [SLEEPS, Tree(("a", "b", "c"), ("X", "X", "X"), (-1, 0, 1))]
    vectors = [rng.normal(size=(len(t), 6)) for t in trees]
    golds = [tree_distances(t.heads) if distance else tree_depths(t.heads) for t in trees]
    loss, grad = gradient(b, vectors, golds, distance=distance)
    bt = torch.tensor(b, requires_grad=True)
    losses = []
    for h, gold in zip(vectors, golds, strict=True):
        u = torch.tensor(h) @ bt.T
        if distance:
            predicted = ((u[:, None] - u[None]) ** 2).sum(-1)
        else:
            predicted = (u * u).sum(-1)
        error = predicted - torch.tensor(gold)
        smoothed = torch.sqrt(error * error + SMOOTH**2) - SMOOTH  # the paper's |error|, smooth near 0
        losses.append(smoothed.sum() / len(h) ** (2 if distance else 1))
    total = torch.stack(losses).mean()
    total.backward()
    assert loss == pytest.approx(float(total.detach()), rel=1e-12)
    assert np.allclose(grad, bt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_reader_refuses_files_without_trees(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="has no HEAD"):
        read_trees(EXAMPLES / "pos.conllu")
    path = tmp_path / "two.conllu"
    path.write_text("1\tA\t_\tX\t_\t_\t0\troot\t_\t_\n2\tB\t_\tX\t_\t_\t0\troot\t_\t_\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="2 roots"):
        read_trees(path)
    path.write_text("1\tA\t_\tX\t_\t_\t2\tdep\t_\t_\n2\tB\t_\tX\t_\t_\t1\tdep\t_\t_\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="0 roots"):
        read_trees(path)
    path.write_text("# one\n1\tA\t_\tX\t_\t_\t0\troot\t_\t_\n\n# two\n1\tB\t_\tX\t_\t_\t0\troot\t_\t_\n")
    assert [t.source for t in read_trees(path)] == [f"{path}:2", f"{path}:5"]
    blank = "\t".join("_" * 8)
    text = f"# c\n1-2\tAB\t{blank}\n1\tA\t_\tX\t_\t_\t0\troot\t_\t_\n1.1\tE\t{blank}\n"
    path.write_text(text + "2\tB\t_\tPUNCT\t_\t_\t1\tpunct\t_\t_\n", encoding="utf-8")
    (tree,) = read_trees(path)
    assert tree == Tree(("A", "B"), ("X", "PUNCT"), (-1, 0))


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():  # type: ignore[no-untyped-def]
    """The probes' fits multiply small NumPy matrices (a sentence's words by the rank): OpenBLAS's
    threads on two busy cores made the EWT probes take 24 s, not 9, for the same rows (checked equal)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def distance_result(bundled):  # type: ignore[no-untyped-def]
    return structural_probe(
        bundled, EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu", layers="2,3,4", epochs=100
    )


def test_a_middle_layer_beats_the_linear_chain_and_static_does_not(distance_result) -> None:  # type: ignore[no-untyped-def]
    rows = {r["layer"]: r for r in distance_result.rows}
    chain = distance_result.baseline
    assert [r["layer"] for r in distance_result.rows] == ["static", 2, 3, 4]
    assert distance_result.n_train == 46 and distance_result.n_test == 20
    assert max(rows[k]["uuas"] for k in (2, 3, 4)) > chain["uuas"]
    assert max(rows[k]["dspr"] for k in (2, 3, 4)) > chain["dspr"] + 0.05
    assert rows["static"]["uuas"] < chain["uuas"]


def test_the_probe_is_the_same_for_the_same_seed(bundled) -> None:  # type: ignore[no-untyped-def]
    # Same seed, same rows (and losses) at any epoch count or layer choice: one layer, 20 epochs.
    train, test = EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu"
    first = structural_probe(bundled, train, test, layers="3", epochs=20)
    again = structural_probe(bundled, train, test, layers="3", epochs=20)
    assert again.to_dict() == first.to_dict()
    other = structural_probe(bundled, train, test, layers="3", epochs=20, seed=1)
    assert other.rows[1] != first.rows[1]


def test_depth_probe_holds_out_every_fifth_sentence_without_test(bundled) -> None:  # type: ignore[no-untyped-def]
    result = structural_probe(bundled, EXAMPLES / "trees.conllu", task="depth", layers="3", epochs=20)
    assert (result.n_train, result.n_test) == (37, 9)
    assert result.settings["test"] == "every 5th"
    assert set(result.rows[1]) == {"layer", "root_acc", "nspr"}
    assert result.rows[1]["root_acc"] > result.baseline["root_acc"]


def test_tiny_model_with_a_narrow_width_cuts_the_rank(tiny_models) -> None:  # type: ignore[no-untyped-def]
    model = next(iter(tiny_models.values()))
    trees = read_trees(EXAMPLES / "trees.conllu")[:10]
    result = structural_probe(model, trees, trees[:3], layers="-1", rank=4096, epochs=2)
    assert all(0 < k <= 4096 for k in result.settings["rank"].values())
    assert result.settings["rank"]["static"] < 4096
    assert 0.0 <= result.rows[-1]["uuas"] <= 1.0


def test_cli_json_and_table(tmp_path: Path) -> None:
    args = ["probe", "-i", str(EXAMPLES / "trees.conllu"), "--test", str(EXAMPLES / "trees-test.conllu")]
    got = runner.invoke(app, [*args, "--task", "distance", "--layers", "3", "--epochs", "5", "--json"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.stdout)
    assert [set(r) for r in data["rows"]] == [{"layer", "uuas", "dspr"}] * 2
    assert data["baseline"]["name"] == "linear chain"
    picture = tmp_path / "depth.png"
    got = runner.invoke(app, [*args, "--task", "depth", "--layers", "3", "--epochs", "5", "-o", str(picture)])
    assert got.exit_code == 0, got.output
    assert "root acc." in got.stdout and "chain" in got.stdout and picture.stat().st_size > 0


def test_cli_refuses_an_unknown_task_and_a_file_without_trees() -> None:
    got = runner.invoke(app, ["probe", "-i", str(EXAMPLES / "trees.conllu"), "--task", "tree"])
    assert got.exit_code != 0 and isinstance(got.exception, (InvalidSpec, SystemExit))
    got = runner.invoke(app, ["probe", "-i", str(EXAMPLES / "pos.conllu"), "--task", "depth"])
    assert got.exit_code != 0


@pytest.mark.parametrize(
    ("given", "told"),
    [
        ({"rank": 0}, "rank=0: give a whole number of 1 or more"),
        ({"epochs": 0}, "epochs=0: give a whole number of 1 or more"),
        ({"batch_size": True}, "batch_size=True: give a whole number of 1 or more"),
        ({"lr": 0.0}, "lr=0.0: a learning rate is a number above 0 (e.g. 0.005)"),
        ({"seed": -1}, "seed=-1: a seed is a whole number from 0 to 4294967295"),
    ],
)
def test_library_refusals_name_the_keyword_not_a_flag(bundled, given, told) -> None:  # type: ignore[no-untyped-def]
    """A Python caller typed keywords: the refusal names them (rank=, lr=), never a CLI flag."""
    with pytest.raises(InvalidInput) as got:
        structural_probe(bundled, EXAMPLES / "trees.conllu", **given)
    assert str(got.value) == told


def test_too_few_sentences_name_test_as_each_caller_gives_it(bundled, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The library says test='TEST.conllu'; the command line, where the user typed flags, --test."""
    few = tmp_path / "few.conllu"
    few.write_text((EXAMPLES / "trees.conllu").read_text(encoding="utf-8").split("\n\n")[0] + "\n\n")
    with pytest.raises(InvalidInput) as got:
        structural_probe(bundled, few, epochs=1, progress=False)
    assert "give test='TEST.conllu' (held-out trees)" in str(got.value) and "--" not in str(got.value)
    from console import run_main

    ran = run_main("probe", "-i", str(few), "--task", "depth", "--epochs", "1")
    assert ran.code != 0
    assert "give --test TEST.conllu (held-out trees), or at least 5 sentences" in " ".join(ran.stderr.split())


def test_cli_refuses_structural_options_without_a_structural_task() -> None:
    """--rank and --epochs belong to --task distance|depth: on a label probe they are refused before
    loading (a label probe takes --test for held-out scoring: tests/test_probe.py)."""
    got = runner.invoke(app, ["probe", "-i", str(EXAMPLES / "pos.conllu"), "--rank", "8"])
    assert got.exit_code != 0


def test_the_model_facade_runs_the_same_probe(tiny_models: dict[str, Any]) -> None:
    """`Model.structural_probe` is `structural_probe` on that model, option for option."""
    from bertscope.research.structural import structural_probe

    model = tiny_models["bert"]
    train, test = EXAMPLES / "trees.conllu", EXAMPLES / "trees-test.conllu"
    options = {
        "task": "depth", "layers": "1", "epochs": 2, "rank": 4, "seed": 3, "subword": "first_last",
        "batch_size": 7, "lr": 0.01, "progress": False,
    }  # fmt: skip
    facade = model.structural_probe(train, test, **options)
    direct = structural_probe(model, train, test, **options)
    assert facade.to_dict() == direct.to_dict()


# UD English EWT (CC BY-SA 4.0): 150 training and 60 dev sentences shipped in examples/ewt/.
EWT_TRAIN, EWT_DEV = EXAMPLES / "ewt" / "train.conllu", EXAMPLES / "ewt" / "dev.conllu"


def test_the_ewt_slice_names_its_source_and_licence_and_reads_as_trees() -> None:
    for path, count in ((EWT_TRAIN, 150), (EWT_DEV, 60)):
        header = path.read_text(encoding="utf-8").splitlines()[:3]
        assert "CC BY-SA 4.0" in header[0] and "UD_English-EWT" in header[1] and "commit" in header[2]
        trees = read_trees(path)
        assert len(trees) == count and all(5 <= len(t) <= 40 for t in trees)
        for tree in trees:
            assert np.array_equal(tree_distances(tree.heads), _bfs_distances(tree.heads))
            assert np.array_equal(tree_depths(tree.heads), tree_distances(tree.heads)[tree.root])
    readme = (EXAMPLES / "ewt" / "README.md").read_text(encoding="utf-8")
    assert "CC BY-SA 4.0" in readme and "UniversalDependencies/UD_English-EWT" in readme
    # the shortest trees (two words, one word) take scipy's dense path, which once refused the graph
    assert tree_distances((1, -1)).tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert tree_distances((-1,)).tolist() == [[0.0]]


def _prim(distances: np.ndarray) -> set[tuple[int, int]]:
    """The minimum spanning tree's (i, j), i < j, edges, by Prim's algorithm in plain Python."""
    n = len(distances)
    inside, edges = {0}, set()
    while len(inside) < n:
        i, j = min(((a, b) for a in inside for b in range(n) if b not in inside), key=lambda e: distances[e])
        inside.add(j)
        edges.add((min(i, j), max(i, j)))
    return edges


def _uuas_by_hand(trees: list[Tree], predicted: list[np.ndarray]) -> float:
    found = total = 0
    for tree, pred in zip(trees, predicted, strict=True):
        kept = [i for i, tag in enumerate(tree.upos) if tag != "PUNCT"]
        gold = {
            (min(i, h), max(i, h))
            for i, h in enumerate(tree.heads)
            if h >= 0 and tree.upos[i] != "PUNCT" and tree.upos[h] != "PUNCT"
        }
        mst = {(kept[a], kept[b]) for a, b in _prim(pred[np.ix_(kept, kept)])}
        found += len(gold & mst)
        total += len(gold)
    return found / total


def _dspr_by_hand(trees: list[Tree], predicted: list[np.ndarray]) -> float:
    from scipy.stats import spearmanr

    per_length: dict[int, list[float]] = {}
    for tree, pred in zip(trees, predicted, strict=True):
        gold = tree_distances(tree.heads)
        rho = [spearmanr(pred[i], gold[i]).statistic for i in range(len(tree))]
        if 5 <= len(tree) <= 50:
            per_length.setdefault(len(tree), []).append(float(np.mean(rho)))
    return float(np.mean([np.mean(v) for v in per_length.values()]))


def test_uuas_and_dspr_on_ewt_equal_a_count_by_hand() -> None:
    """Noisy distances on the EWT dev slice: UUAS and DSpr equal Prim's tree counted by hand and
    scipy's spearmanr; the gold distances score 1."""
    trees = read_trees(EWT_DEV)
    rng = np.random.default_rng(0)
    noisy = []
    for tree in trees:
        noise = rng.normal(scale=1.5, size=(len(tree), len(tree)))
        noisy.append(tree_distances(tree.heads) + noise + noise.T)  # symmetric, ties impossible
    scores = distance_scores(trees, noisy)
    assert scores["uuas"] == pytest.approx(_uuas_by_hand(trees, noisy), abs=1e-12)
    assert scores["dspr"] == pytest.approx(_dspr_by_hand(trees, noisy), abs=1e-12)
    assert 0.2 < scores["uuas"] < 0.95  # the noise moved some edges, not all
    assert distance_scores(trees, [tree_distances(t.heads) for t in trees]) == {"uuas": 1.0, "dspr": 1.0}


@pytest.fixture(scope="module")
def ewt_results(bundled):  # type: ignore[no-untyped-def]
    return {
        # layers 3 and 6 (and the static row) are the ones checked; each row's fit is its own
        task: structural_probe(bundled, EWT_TRAIN, EWT_DEV, task=task, layers="3,6", epochs=10)
        for task in ("distance", "depth")
    }


def test_the_chain_baseline_on_ewt_equals_a_direct_computation(ewt_results) -> None:  # type: ignore[no-untyped-def]
    """The chain links each word that is not punctuation to the next such word: its UUAS is the share
    of gold edges between neighbours; its DSpr is spearmanr of |i - j| with the tree distances; its root
    is the first word that is not punctuation."""
    trees = read_trees(EWT_DEV)
    neighbours = gold = 0
    for tree in trees:
        kept = [i for i, tag in enumerate(tree.upos) if tag != "PUNCT"]
        edges = {(min(i, h), max(i, h)) for i, h in enumerate(tree.heads) if h in kept and i in kept}
        neighbours += len(edges & set(itertools.pairwise(kept)))
        gold += len(edges)
    chain = [chain_distances(len(t)) for t in trees]
    distance = ewt_results["distance"].baseline
    assert distance["uuas"] == pytest.approx(neighbours / gold, abs=1e-12)
    assert distance["dspr"] == pytest.approx(_dspr_by_hand(trees, chain), abs=1e-12)
    first_is_root = [next(i for i, t in enumerate(tree.upos) if t != "PUNCT") == tree.root for tree in trees]
    assert ewt_results["depth"].baseline["root_acc"] == pytest.approx(np.mean(first_is_root), abs=1e-12)


def test_on_ewt_a_middle_layer_beats_the_chain_and_static_and_the_last_layer_do_not(ewt_results) -> None:  # type: ignore[no-untyped-def]
    distance, depth = ewt_results["distance"], ewt_results["depth"]
    assert (distance.n_train, distance.n_test) == (150, 60)
    rows = {r["layer"]: r for r in distance.rows}
    chain = distance.baseline
    assert rows[3]["uuas"] > chain["uuas"] + 0.05 and rows[3]["dspr"] > chain["dspr"] + 0.05
    assert rows["static"]["uuas"] < chain["uuas"] and rows[6]["uuas"] < chain["uuas"]
    deep = {r["layer"]: r for r in depth.rows}
    assert deep[3]["root_acc"] > depth.baseline["root_acc"] + 0.2
    assert deep[3]["nspr"] > max(depth.baseline["nspr"], deep["static"]["nspr"]) + 0.1


def test_row_file_reads_back_what_was_appended(tmp_path: Path) -> None:
    """The word vectors' store: appended blocks come back as runs of rows, float32, from the file."""
    from bertscope.research.row_file import RowFile

    rng = np.random.default_rng(0)
    blocks = [rng.normal(size=(n, 5)) for n in (3, 1, 4)]
    with RowFile(tmp_path / "rows.f32", 5) as rows:
        for block in blocks:
            rows.append(block)
        rows.finish()
        whole = np.concatenate(blocks).astype(np.float32)
        assert rows.shape == (8, 5) and len(rows) == 8
        assert np.array_equal(rows[0:8], whole) and np.array_equal(rows[3:4], whole[3:4])
        assert rows[8:8].shape == (0, 5)
        with pytest.raises(IndexError):
            rows[0:8:2]
    assert (tmp_path / "rows.f32").stat().st_size == whole.nbytes


def test_row_file_refuses_rows_of_another_width(tmp_path: Path) -> None:
    """A (n, 2w) block is refused, not read as (2n, w) rows that would shift every later sentence."""
    from bertscope.research.row_file import RowFile

    with RowFile(tmp_path / "rows.f32", 4) as rows:
        with pytest.raises(ValueError, match="width 4.*shape \\(3, 8\\)"):
            rows.append(np.zeros((3, 8)))
        with pytest.raises(ValueError, match="width 4"):
            rows.append(np.zeros(4))
        assert len(rows) == 0


def test_first_last_word_rows_are_the_first_and_last_piece_vectors(tiny_models, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--subword first_last gives 2d per word: each sentence's rows are its words' [first; last] piece
    vectors (static and layer rows alike), at the offsets the probe reads."""
    from bertscope.core._enums import SubwordPooling
    from bertscope.research.states import layer_states, static_rows
    from bertscope.research.structural import _word_pieces, tree_word_vectors

    model = tiny_models["bert"]
    trees = read_trees(EXAMPLES / "trees.conllu")[:4]
    static, (layer,), offsets = tree_word_vectors(
        model, trees, tmp_path, layers=[1], subword=SubwordPooling.FIRST_LAST
    )
    with static, layer:
        encoded = layer_states(model, [t.text for t in trees])
        for s, (tree, (tok, states)) in enumerate(zip(trees, encoded, strict=True)):
            groups = _word_pieces(tok, tree, s, "given")
            pieces = static_rows(model, list(tok.ids))
            first_last = [np.concatenate([states[1][g[0]], states[1][g[-1]]]) for g in groups]
            rows = [np.concatenate([pieces[g[0]], pieces[g[-1]]]) for g in groups]
            assert layer.shape[1] == 2 * states.shape[-1] and static.shape[1] == 2 * pieces.shape[1]
            np.testing.assert_allclose(layer[offsets[s] : offsets[s + 1]], np.array(first_last), atol=1e-6)
            np.testing.assert_allclose(static[offsets[s] : offsets[s + 1]], np.array(rows), atol=1e-6)
        assert len(layer) == len(static) == offsets[-1] == sum(len(t) for t in trees)


def _direct_distances(b: np.ndarray, h: np.ndarray) -> np.ndarray:
    u = h @ b.T
    diff = u[:, None, :] - u[None, :, :]
    return (diff * diff).sum(-1)


def test_predicted_distances_equal_the_definition_without_an_n_n_rank_array() -> None:
    """||B(h_i - h_j)||^2 from the Gram form equals the definition within the 6 decimals it is rounded
    to; scoring one long sentence holds (n, n), not the (n, n, rank) differences."""
    import tracemalloc

    from bertscope.research.structural_fit import predict_distances

    rng = np.random.default_rng(0)
    b = rng.normal(scale=0.3, size=(16, 48))
    h = rng.normal(size=(60, 48)) / np.sqrt(48)
    got = predict_distances(b, h)
    np.testing.assert_allclose(got, _direct_distances(b, h), rtol=0, atol=1e-6)
    assert np.array_equal(got, got.T) and np.all(np.diag(got) == 0) and got.min() >= 0
    twins = np.vstack([h, h[:5]])  # equal words: distance exactly 0, never below
    assert np.all(predict_distances(b, twins)[60:, :5][np.eye(5, dtype=bool)] == 0)
    n, k = 400, 32
    b, h = rng.normal(size=(k, k)), rng.normal(size=(n, k)).astype(np.float32)
    tracemalloc.start()
    try:
        predict_distances(b, h)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * n * n * 8 + 8 * n * k * 8 < n * n * k * 8 / 10


def test_errors_name_the_source_of_the_trees(bundled, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Too few trees for the hold-out name a list briefly (not its repr); a word giving no word piece is
    named at path:line of its sentence, or by its 1-based number among trees built in code."""
    trees = read_trees(EXAMPLES / "trees.conllu")[:3]
    with pytest.raises(
        InvalidInput, match=r"^the training list of Tree has 3 sentence\(s\): give test"
    ) as got:
        structural_probe(bundled, trees, epochs=1, progress=False)
    assert "Tree(" not in str(got.value)
    path = tmp_path / "zw.conllu"
    path.write_text(
        "1\tHi\t_\tINTJ\t_\t_\t0\troot\t_\t_\n\n# text = Hi \u200b\n"
        "1\tHi\t_\tINTJ\t_\t_\t0\troot\t_\t_\n2\t\u200b\t_\tPUNCT\t_\t_\t1\tpunct\t_\t_\n",
        encoding="utf-8",
    )
    told = re.escape(f"{path}:4: word 2 of this sentence, '\\u200b', gives no word pieces")
    with pytest.raises(InvalidInput, match=f"^{told}"):
        structural_probe(bundled, EXAMPLES / "trees-test.conllu", path, layers="0", epochs=1)
    built = [*trees, Tree(("Hi", "\u200b"), ("INTJ", "PUNCT"), (-1, 0))]
    with pytest.raises(
        InvalidInput,
        match="^" + re.escape("sentence 4 of the training trees: word 2 of this sentence, '\\u200b'"),
    ):
        structural_probe(bundled, built, trees, layers="0", epochs=1)


@pytest.mark.parametrize(
    "args",
    [
        ["--control"], ["--column", "upos"], ["--level", "sentence"], ["--folds", "3"], ["--probe", "mlp"],
        ["--sweep", "hidden=16"], ["--per-label"], ["--per-label-layer", "3"], ["--n-jobs", "2"],
    ],
)  # fmt: skip
def test_a_structural_task_refuses_the_label_probe_options(args: list[str]) -> None:
    """Each label-probe option given to --task distance|depth is one line naming it, before any work."""
    from console import run_main

    for task in ("distance", "depth"):
        ran = run_main("probe", "-i", str(EXAMPLES / "trees.conllu"), "--task", task, *args)
        assert ran.code == 1 and ran.stderr.count("\n") == 1, ran.stderr
        assert f"{args[0]}: for label probes (--task label) only" in ran.stderr
    both = run_main(
        "probe", "-i", str(EXAMPLES / "trees.conllu"), "--task", "depth", "--control", "--folds", "3"
    )
    assert "--control, --folds: for label probes" in both.stderr
