"""Late chunking vs naive chunking vs whole-document truncation, measured on real news text.

Run: `PYTHONPATH=src .venv/bin/python bench/bench_chunks.py [--model DIR] [--json OUT]`.

Corpus: gensim's bundled Lee corpora (Lee, Pincombe & Welsh 2005; Australian news articles, shipped
in the gensim wheel under gensim/test/test_data). Two tests:

1. Sentence retrieval (lee_background.cor, 300 articles, about a third longer than the bundled model's
   256 tokens): the query is one sentence held out of an article, its first (`lead`: it sums the story
   up) or its last (`last`: it sits where truncation no longer reaches); the index holds every
   article without that sentence. An article's score is its best chunk's cosine (chunk methods) or
   its one vector's cosine (whole document). Reported: recall@1, recall@5 and MRR, over all articles
   and split by the length of the indexed text (fits in one window or not).
2. Document similarity (lee.cor, 50 short articles, 83-rater mean similarity of every pair): an
   article's vector is the mean of its chunk vectors (or its own vector); reported: Pearson and
   Spearman correlation with the human ratings over the 1,225 pairs.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

import bertscope
from bertscope.core.chunking import sentence_spans


def lee_path(name: str) -> Path:
    """A file of gensim's bundled test data."""
    from gensim.test.utils import datapath

    return Path(datapath(name))


def read_docs(name: str) -> list[str]:
    """One article per line (latin-1, as gensim reads them)."""
    return [line.strip() for line in lee_path(name).open(encoding="latin-1") if line.strip()]


def method_vectors(model: bertscope.Model, docs: list[str], method: str) -> list[np.ndarray]:
    """Per document, (chunks, d) unit vectors (one row for the whole-document methods)."""
    if method in ("late", "naive"):
        results = model.embed_chunks(docs, chunks="sentence", late=method == "late", progress=False)
        return [r.vectors for r in results]
    long = "truncate" if method == "truncate" else "window"
    vectors = model.embed(docs, long=long, progress=False).vectors
    return [v[None, :] for v in vectors]


def sentence_retrieval(model: bertscope.Model, methods: list[str], *, held_out: str) -> dict[str, Any]:
    """Recall@1/5 and MRR of finding an article from one of its sentences held out (first or last)."""
    queries, rests = [], []
    for doc in read_docs("lee_background.cor"):
        spans = sentence_spans(doc)
        if len(spans) < 3:
            continue
        if held_out == "lead":
            queries.append(doc[spans[0][0] : spans[0][1]])
            rests.append(doc[spans[1][0] :])
        else:
            queries.append(doc[spans[-1][0] : spans[-1][1]])
            rests.append(doc[: spans[-2][1]])
    long = np.array([len(t) > model.max_tokens for t in model.tokenize(rests, long="window")])
    q = model.embed(queries, progress=False).vectors
    out: dict[str, Any] = {"articles": len(queries), "longer_than_window": int(long.sum())}
    for method in methods:
        start = time.perf_counter()
        per_doc = method_vectors(model, rests, method)
        seconds = time.perf_counter() - start
        scores = np.stack([(v @ q.T).max(axis=0) for v in per_doc], axis=1)  # (queries, docs)
        rank = (scores > scores[np.arange(len(q)), np.arange(len(q))][:, None]).sum(axis=1) + 1
        out[method] = {"seconds": round(seconds, 1), **_ranks(rank)}
        out[method]["fits_window"] = _ranks(rank[~long])
        out[method]["longer_than_window"] = _ranks(rank[long])
    return out


def lee_similarity(model: bertscope.Model, methods: list[str]) -> dict[str, Any]:
    """Pearson and Spearman of document cosines with the Lee human similarity ratings."""
    from scipy.stats import pearsonr, spearmanr

    docs = read_docs("lee.cor")
    human = np.loadtxt(lee_path("similarities0-1.txt"))
    upper = np.triu_indices(len(docs), k=1)
    out: dict[str, Any] = {"articles": len(docs), "pairs": len(upper[0])}
    for method in methods:
        per_doc = method_vectors(model, docs, method)
        means = np.stack([v.mean(axis=0) for v in per_doc])
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        cosine = (means @ means.T)[upper]
        out[method] = {
            "pearson": round(float(pearsonr(cosine, human[upper])[0]), 3),
            "spearman": round(float(spearmanr(cosine, human[upper])[0]), 3),
        }
    return out


def _ranks(rank: np.ndarray) -> dict[str, float]:
    return {
        "n": int(len(rank)),
        "recall@1": round(float((rank == 1).mean()), 3),
        "recall@5": round(float((rank <= 5).mean()), 3),
        "mrr": round(float((1.0 / rank).mean()), 3),
    }


def main() -> None:
    """Run both tests and print (and optionally save) the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--tasks", default="lead,last,lee", help="any of lead, last, lee")
    parser.add_argument("--methods", default="late,naive,truncate,window", help="chunk or document methods")
    args = parser.parse_args()
    model = bertscope.load(args.model, device="cpu")
    methods = args.methods.split(",")
    figures: dict[str, Any] = {
        "model": model.loaded.source,
        "max_tokens": model.max_tokens,
        "machine": platform.processor() or platform.machine(),
    }
    for task in args.tasks.split(","):
        if task == "lee":
            figures["lee_similarity"] = lee_similarity(model, methods)
        else:
            figures[f"{task}_retrieval"] = sentence_retrieval(model, methods, held_out=task)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
