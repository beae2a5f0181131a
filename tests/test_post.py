"""Post-processing: whitening gives identity covariance, abtt removes the top directions, files round-trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import bertscope
from bertscope.cli import app
from bertscope.cli import research as cli_research
from bertscope.core.post import PCA, AllButTheTop, Whitening, as_post, fit_post, fit_post_on_texts, load_post
from bertscope.errors import InvalidInput, InvalidSpec

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def corpus_vectors(tiny_models: dict[str, bertscope.Model]) -> np.ndarray:
    """Sentence vectors (n > d) of the tiny BERT for a fitting corpus."""
    texts = [
        f"{a} {b} the {c}"
        for a in ("i like", "we eat", "they hate", "you love")
        for b in ("bread", "apple", "banana", "food", "water")
        for c in ("cat", "dog", "car", "house", "tree")
    ]
    return tiny_models["bert"].embed(texts, pooling="mean").vectors


def test_whitened_fitting_vectors_have_identity_covariance(corpus_vectors: np.ndarray) -> None:
    # The random tiny model's last LayerNorm (gain 1, bias 0) makes every vector sum to 0: 31 directions.
    # Without dim, whitening keeps those 31 and says so (issue 13: it used to refuse, advising more texts).
    with pytest.warns(UserWarning, match="whitening to 31 dimensions"):
        default = Whitening.fit(corpus_vectors)
    with pytest.raises(InvalidInput, match="only 31.*more texts will not help"):
        Whitening.fit(corpus_vectors, dim=32)
    z = Whitening.fit(corpus_vectors, dim=31).apply(corpus_vectors)
    np.testing.assert_allclose(default.apply(corpus_vectors), z, atol=1e-9)
    assert z.shape == (len(corpus_vectors), 31)
    np.testing.assert_allclose(z.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(z.T @ z / len(z), np.eye(z.shape[1]), atol=1e-3)


def test_whitening_to_k_dimensions(corpus_vectors: np.ndarray) -> None:
    z = fit_post(corpus_vectors, "whitening", dim=8).apply(corpus_vectors)
    assert z.shape == (len(corpus_vectors), 8)
    np.testing.assert_allclose(z.T @ z / len(z), np.eye(8), atol=1e-3)


def test_whitening_refuses_fewer_vectors_than_dimensions(corpus_vectors: np.ndarray) -> None:
    with pytest.raises(InvalidInput, match="fewer than"):
        Whitening.fit(corpus_vectors[:10], dim=10)


def test_abtt_removes_mean_and_top_directions(corpus_vectors: np.ndarray) -> None:
    post = AllButTheTop.fit(corpus_vectors, remove=3)
    out = post.apply(corpus_vectors)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-4)
    assert np.abs(out @ post.matrix).max() < 1e-4
    centred = corpus_vectors - corpus_vectors.mean(axis=0)
    assert np.linalg.norm(out) < np.linalg.norm(centred)


def test_pca_matches_sklearn_up_to_sign(corpus_vectors: np.ndarray) -> None:
    from sklearn.decomposition import PCA as SkPCA

    ours = PCA.fit(corpus_vectors, dim=5).apply(corpus_vectors)
    theirs = SkPCA(n_components=5).fit_transform(corpus_vectors)
    np.testing.assert_allclose(np.abs(ours), np.abs(theirs), atol=1e-4)


@pytest.mark.parametrize("name", ["white.txt", "white", "white.NPZ"])
def test_save_refuses_a_name_load_post_would_not_read_back(
    corpus_vectors: np.ndarray, tmp_path: Path, name: str
) -> None:
    post = fit_post(corpus_vectors, "whitening", dim=6)
    with pytest.raises(InvalidInput, match=r"\.safetensors or \.npz"):
        post.save(tmp_path / name)
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_saved_file_round_trips(corpus_vectors: np.ndarray, tmp_path: Path, suffix: str) -> None:
    post = fit_post(corpus_vectors, "whitening", dim=6, spec={"layers": [2], "pooling": "mean"})
    path = post.save(tmp_path / f"white{suffix}")
    again = load_post(path)
    assert isinstance(again, Whitening)
    assert again.settings == {
        "dim": 6,
        "n_fit": len(corpus_vectors),
        "spec": {"layers": [2], "pooling": "mean"},
    }
    np.testing.assert_allclose(again.apply(corpus_vectors), post.apply(corpus_vectors), atol=1e-5)


def test_wrong_width_and_bad_file_are_clear_errors(corpus_vectors: np.ndarray, tmp_path: Path) -> None:
    post = fit_post(corpus_vectors, "abtt")
    with pytest.raises(InvalidInput, match="fitted on 32-wide"):
        post.apply(np.zeros((2, 7)))
    junk = tmp_path / "junk.npz"
    np.savez(junk, a=np.zeros(3))
    with pytest.raises(InvalidInput, match="not a bertscope post-processing file"):
        load_post(junk)


def test_fit_on_texts_records_the_spec(tiny_models: dict[str, bertscope.Model]) -> None:
    texts = [f"the {w} is good" for w in ("cat", "dog", "car", "tree", "house", "bread", "apple", "water")]
    post = fit_post_on_texts(tiny_models["bert"], texts, "pca", dim=3, layers="-2", pooling="mean")
    assert post.settings["spec"]["layers"] == (1,) and post.settings["spec"]["pooling"] == "mean"
    assert post.dim_out == 3


def test_fit_post_command_writes_a_loadable_file(
    bundled: bertscope.Model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_research, "load_model", lambda *a, **k: bundled)
    target = tmp_path / "white.safetensors"
    result = CliRunner().invoke(
        app, ["fit-post", str(DATA / "contexts.txt"), "--kind", "whitening", "--dim", "16", "-o", str(target)]
    )
    assert result.exit_code == 0, result.output
    post = load_post(target)
    assert post.dim_in == 384 and post.dim_out == 16 and post.settings["n_fit"] == 60


def test_as_post_describe_and_spec_check(corpus_vectors: np.ndarray, tmp_path: Path) -> None:
    spec = {"layers": (2,), "combine": "mean", "pooling": "mean", "mask_special": False, "normalize": False}
    post = fit_post(corpus_vectors, "pca", dim=4, spec=spec)
    path = post.save(tmp_path / "p.safetensors")
    assert as_post(None) is None and as_post(post) is post
    again = as_post(str(path))
    assert (
        again is not None and again.describe()["dim_out"] == 4 and again.describe()["spec"]["layers"] == [2]
    )
    again.check(dict(spec))
    with pytest.raises(InvalidSpec, match="fitted on"):
        again.check({**spec, "layers": (1,)})
