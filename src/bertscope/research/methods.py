"""The research methods of the facade (`Model` extends `ResearchMethods`): what each layer holds.

Each method's body lives in its research module (probe, structural, cka, geometry, contextuality), which
takes an `Encoder`; this class gives them `Model`'s keyword arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..core._enums import SubwordPooling
from ..core.encoder import Encoder
from ..core.layers import LayerSpec

if TYPE_CHECKING:
    from pathlib import Path

    from .cka import CkaResult
    from .conllu import Tree
    from .contextuality import Contextuality
    from .geometry import GeometryResult
    from .probe_score import ProbeResult
    from .structural import StructuralResult

__all__ = ["ResearchMethods"]


class ResearchMethods(Encoder):
    """An Encoder with the research methods that read layers: probes, structural probes, CKA, geometry
    and contextuality per layer (the static kinds, which run corpus jobs, stay on Model)."""

    def probe(
        self,
        data: str | Path | Sequence[Any],
        *,
        level: str = "words",
        layers: LayerSpec = "all",
        folds: int = 5,
        control: bool = False,
        subword: SubwordPooling | str = "mean",
        label_field: str | None = None,
        seed: int = 0,
        progress: bool | None = None,
        n_jobs: int | None = None,
        test: str | Path | Sequence[Any] | None = None,
        kind: str | None = None,
        sweep: str | None = None,
        per_label: bool = False,
        per_label_layer: int | str | None = None,
        column: str | None = None,
    ) -> ProbeResult:
        """Probes per layer (and `static`) on a labelled file or list, cross-validated by sentence or
        scored on `test` (held out); see `research.probe.probe` (control task and selectivity with
        `control=True`, `kind` linear or mlp, a capacity `sweep`, `per_label` figures, fits on `n_jobs`;
        `label_field` the CoNLL-U field holding the label, `column` its deprecated old name)."""
        from ..core.renamed import renamed_keyword
        from .probe import probe
        from .probe_data import LABEL_FIELD

        label_field = renamed_keyword(
            label_field, column, name="label_field", old="column", caller="probe", meaning=LABEL_FIELD
        )
        return probe(
            self, data, level=level, layers=layers, folds=folds, control=control, subword=subword,
            label_field=label_field, seed=seed, progress=progress, n_jobs=n_jobs, test=test, kind=kind,
            sweep=sweep, per_label=per_label, per_label_layer=per_label_layer,
        )  # fmt: skip

    def structural_probe(
        self,
        train: str | Path | Sequence[Tree],
        test: str | Path | Sequence[Tree] | None = None,
        *,
        task: str = "distance",
        layers: LayerSpec = "all",
        rank: int = 128,
        subword: SubwordPooling | str = "mean",
        epochs: int = 40,
        batch_size: int = 20,
        lr: float = 0.005,
        seed: int = 0,
        progress: bool | None = None,
        punct: str = "upos",
    ) -> StructuralResult:
        """Hewitt & Manning's structural probes (distance: UUAS, DSpr; depth: root accuracy, NSpr) per
        layer on CoNLL-U trees; see `research.structural.structural_probe` (word vectors pooled by
        `subword`, Adam on `batch_size` sentences at learning rate `lr`; punctuation left out of the
        scores by UPOS, or by Hewitt & Manning's Penn Treebank XPOS tags with `punct='xpos'`)."""
        from .structural import structural_probe

        return structural_probe(
            self, train, test, task=task, layers=layers, rank=rank, subword=subword, epochs=epochs,
            batch_size=batch_size, lr=lr, seed=seed, progress=progress, punct=punct,
        )  # fmt: skip

    def cka(
        self,
        texts: Iterable[str] | str,
        other: Encoder | None = None,
        *,
        level: str = "tokens",
        debiased: bool = False,
        progress: bool | None = None,
    ) -> CkaResult:
        """Linear CKA between every pair of layers, or against every layer of `other`; streamed."""
        from .cka import cka

        return cka(self, texts, other, level=level, debiased=debiased, progress=progress)

    def geometry(
        self,
        texts: Iterable[str] | str,
        *,
        layers: LayerSpec = "all",
        top_k: int | None = None,
        max_tokens_sampled: int = 5000,
        seed: int = 0,
        progress: bool | None = None,
        top: int | None = None,
    ) -> GeometryResult:
        """Per layer: IsoScore, rogue dimensions (the `top_k` largest, default 3; `top=` is its older
        spelling, still read) and TwoNN intrinsic dimension of the tokens; streamed."""
        from .geometry import geometry

        return geometry(
            self, texts, layers=layers, top_k=top_k, max_tokens_sampled=max_tokens_sampled, seed=seed,
            progress=progress, top=top,
        )  # fmt: skip

    def contextuality(
        self,
        sentences: Sequence[str],
        *,
        words: Sequence[str] | None = None,
        top_k: int | None = None,
        min_contexts: int | None = None,
        max_contexts: int = 200,
        baseline_pairs: int = 2000,
        seed: int = 0,
        progress: bool | None = None,
        top: int | None = None,
    ) -> Contextuality:
        """How contextual words are per layer (Ethayarajh 2019): self-similarity, intra-sentence
        similarity, the anisotropy baseline (`baseline_pairs` random pairs, drawn with `seed`) and MEV of
        `words` (default: the `top_k` most frequent, default 10, in `min_contexts` sentences or more,
        default 5; `top=` is its older spelling, still read); sentences that tokenize alike (identical, or
        case variants to an uncased model) are one context. See
        `research.contextuality.contextuality`."""
        from .contextuality import contextuality

        return contextuality(
            self, sentences, words=words, top_k=top_k, min_contexts=min_contexts,
            max_contexts=max_contexts, baseline_pairs=baseline_pairs, seed=seed, progress=progress, top=top,
        )  # fmt: skip
