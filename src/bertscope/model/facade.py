"""Model: the facade over one loaded encoder, a method per feature (`load()` in model/loader.py makes one).

Every method's body lives in the module of its concept (static, anatomy, contextual, chunk_embed, encode,
explain, attention, vocab, research/...), each of which takes the `Encoder` (core/encoder.py) this class
extends, so no module below this one imports it. The methods that read what each layer holds (probe,
cka, geometry, ...) come from `research.methods.ResearchMethods`, the Encoder that Model extends.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from .. import static as _static
from ..backends import runtimes as _runtimes
from ..core._enums import DType, LongText, Quantize, SubwordPooling
from ..core.chunking import ChunkBy
from ..core.given import single
from ..core.layers import LayerSpec
from ..core.loading import require_torch
from ..core.spec import unknown_option
from ..core.st_attributes import SentenceTransformersAttributes
from ..core.tokens import Text, check_texts
from ..errors import UnknownOption
from ..research.methods import ResearchMethods

if TYPE_CHECKING:
    import torch
    from typing_extensions import Unpack

    from ..anatomy import Anatomy
    from ..core.forward import ForwardOutput
    from ..core.results import ChunkEmbeddings
    from ..core.spec import RecipeKeywords
    from ..explain import Explanation
    from ..research.aggregate import AggregatedStatic
    from ..research.baseline import Baseline
    from ..research.static_kinds import DecontextualizedStatic
    from ..verify.fingerprint import FingerprintCheck
    from ..verify.reference import Verification

__all__ = ["Model"]


class Model(ResearchMethods, SentenceTransformersAttributes):
    """A BERT-family encoder and every embedding it makes: static, anatomy, per layer, pooled.

    One Model may serve several threads at once, on any runtime: a forward that stops at an early layer
    runs a view of the PyTorch module and never changes the module, so calls asking different layers
    together get what each would get alone."""

    def use_openvino(
        self,
        precision: str | None = None,
        *,
        dtype: DType | str | None = None,
        quantize: Quantize | str | None = None,
        calibration: Sequence[str] | None = None,
    ) -> None:
        """Run every forward on OpenVINO from now on, with `load(backend="openvino")`'s `dtype` (float32,
        the default, or bfloat16) and `quantize` (int8 or int8_static), read and refused as load reads them.

        `precision=` (float32, bfloat16, int8 or int8_static: both in one word) is their old name, still
        read with a DeprecationWarning."""
        from ..backends.openvino import resolve_precision
        from ..core.renamed import renamed_keyword

        if precision is not None:
            renamed_keyword(
                dtype if quantize is None else quantize, precision, name="dtype= or quantize",
                old="precision", caller="Model.use_openvino",
                meaning="as load(backend='openvino') takes them ('bfloat16' is dtype=, 'int8' quantize=)",
            )  # fmt: skip
            dtype, quantize = _runtimes.openvino_options(precision)
        way = resolve_precision(dtype or "float32", quantize, self.device)
        _runtimes.use_openvino(self, way, calibration=calibration)

    def use_onnxruntime(
        self, *, quantize: Quantize | str | None = None, calibration: Sequence[str] | None = None
    ) -> None:
        """Run every forward on ONNX Runtime from now on (float32, or int8 with quantize="int8")."""
        _runtimes.use_onnxruntime(self, quantize=quantize, calibration=calibration)

    def use_torch(self) -> None:
        """Run every forward in torch again (the model's own dtype); `info()` then says torch, with no
        runtime choice of load's left beside it. Refused in one line where torch is not installed (an
        install that answers from exported graphs only), not at the next forward."""
        require_torch("use_torch()")
        super().use_torch()
        _runtimes.runs_as_asked(self)

    # Tokens and static vectors ------------------------------------------------------------------

    def static(self, items: str | int | Sequence[str | int]) -> np.ndarray:
        """(n, d) static rows of word pieces or ids: no position, no segment."""
        return _static.static_rows(self, items)

    def static_ids(self, items: str | int | Sequence[str | int]) -> list[int]:
        """Ids of word pieces or ids, each checked against the vocabulary."""
        return _static.token_ids(self, items)

    def static_word(self, word: str) -> _static.StaticWord:
        """One static vector for a word: the mean of its pieces' rows, with the pieces."""
        return _static.static_word(self, word)

    def static_neighbors(
        self,
        query: str | int | np.ndarray,
        *,
        top_k: int | None = None,
        include_special: bool = False,
        k: int | None = None,
    ) -> list[_static.Neighbor]:
        """The `top_k` (default 10; `k=` is its older spelling, still read) nearest vocabulary entries by
        cosine of static rows (special/unused left out by default)."""
        return _static.neighbors(self, query, top_k=top_k, include_special=include_special, k=k)

    def export_static(
        self,
        path: str | Path,
        *,
        format: str | None = None,
        items: Sequence[str | int] | None = None,
        overwrite: bool = False,
    ) -> list[Path]:
        """Write the static rows of `items` (default: every row) as word2vec, npy, parquet or projector.

        Without `format` the suffix chooses: .vec, .txt or .w2v word2vec text, .npy, .parquet; any other
        suffix is refused. A file the export would write that exists is refused unless `overwrite=True`.
        """
        return _static.export(self, path, format, items=items, overwrite=overwrite)

    def static_from_corpus(
        self,
        corpus: str | Path | list[str],
        *,
        layers: LayerSpec = 1,
        min_count: int = 1,
        subword: SubwordPooling | str = "mean",
        **options: Any,
    ) -> AggregatedStatic:
        """Each corpus word's mean vector at `layers` over its occurrences, with counts (AggregatedStatic).

        Streaming and resumable with `checkpoint=FOLDER`; see `bertscope.research.aggregate`.
        """
        from ..research.aggregate import static_from_corpus

        return static_from_corpus(
            self, corpus, layers=layers, min_count=min_count, subword=subword, **options
        )

    def static_decontextualized(
        self, items: str | int | Sequence[str | int], *, layers: LayerSpec = "all", pieces: bool = False
    ) -> DecontextualizedStatic:
        """Words (or pieces) alone, [CLS] w [SEP], through the model: pieces' mean per layer."""
        from ..research.static_kinds import static_decontextualized

        return static_decontextualized(self, items, layers=layers, pieces=pieces)

    # What each layer holds (research/probe.py, research/cka.py) ---------------------------------

    @overload
    def anatomy(self, texts: str, *, long: LongText | str = ...) -> Anatomy: ...  # type: ignore[overload-overlap]
    @overload
    def anatomy(self, texts: Sequence[Text], *, long: LongText | str = ...) -> list[Anatomy]: ...

    def anatomy(
        self, texts: Text | Sequence[Text], *, long: LongText | str = "truncate"
    ) -> Anatomy | list[Anatomy]:
        """The embedding layer taken apart for a text, or a list of texts and (A, B) pairs (a padded batch:
        `anatomy([("A", "B")])` for one pair, as a bare tuple reads two ways), with its proof.

        `long`: a text over the model's limit is cut (`truncate`, said with a `TruncatedTextsWarning`) or
        refused (`error`), as /anatomy's `long`; the anatomy is of one window, so `window` is refused.
        """
        items = check_texts(texts, pairs=True)
        tokens = self.tokenizer.encode_one_window(items, long, what="the anatomy")
        from .. import anatomy as _anatomy

        result = _anatomy.decompose(self, tokens)
        return result[0] if single(texts) else result

    def encode(
        self,
        sentences: str | Sequence[str] | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        output_value: str | None = "sentence_embedding",
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        device: str | None = None,
        normalize_embeddings: bool = False,
        truncate_dim: int | None = None,
        **unsupported: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """sentence-transformers' `encode`: (d,) for a str, (n, d) for a list, with the model's own pooling.

        A NumPy float32 array by default; `convert_to_tensor` gives a torch tensor, neither it nor numpy a
        list of (d,) tensors; `output_value="token_embeddings"` a list of (tokens, d) last-layer tensors
        (one tensor for a str). Positional order and
        defaults are sentence-transformers'; `batch_size` does not change the vectors (see bertscope.encode).
        The texts may be given as `inputs=`, sentence-transformers 6's name; `truncate_dim` defaults to
        the model's `truncate_dim`. Its other keywords (task, tokenizer_kwargs, pool, chunk_size, ...)
        are refused by name.
        """
        from ..encode import encode

        return encode(
            self, sentences, prompt_name=prompt_name, prompt=prompt, batch_size=batch_size,
            show_progress_bar=show_progress_bar, output_value=output_value, precision=precision,
            convert_to_numpy=convert_to_numpy, convert_to_tensor=convert_to_tensor, device=device,
            normalize_embeddings=normalize_embeddings, unsupported=unsupported,
            truncate_dim=self.truncate_dim if truncate_dim is None else truncate_dim,
        )  # fmt: skip

    def encode_query(
        self,
        sentences: str | Sequence[str] | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        *positional: Any,
        **options: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """sentence-transformers' `encode_query`: `encode` with the model's "query" prompt where none is
        named, and no prompt where the model has none (never its default prompt, as sentence-transformers
        5+ gives it); the other arguments are `encode`'s, in its order (batch_size, ...) or by name."""
        from ..encode import QUERY_PROMPTS, encode_role

        return encode_role(self, QUERY_PROMPTS, sentences, prompt_name, prompt, options, positional)

    def encode_document(
        self,
        sentences: str | Sequence[str] | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        *positional: Any,
        **options: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """sentence-transformers' `encode_document`: `encode` with the model's "document" prompt where none
        is named, and no prompt where the model has none (sentence-transformers 5+ gives every model a
        "document" prompt, "" unless the model sets one, so "passage" or "corpus" are not tried); the other
        arguments are `encode`'s, in its order (batch_size, ...) or by name."""
        from ..encode import DOCUMENT_PROMPTS, encode_role

        return encode_role(self, DOCUMENT_PROMPTS, sentences, prompt_name, prompt, options, positional)

    def similarity(
        self,
        a: str | Sequence[str] | np.ndarray | Any = None,
        b: str | Sequence[str] | np.ndarray | Any = None,
        *,
        embeddings1: Any = None,
        embeddings2: Any = None,
        **options: Unpack[RecipeKeywords],
    ) -> np.ndarray:
        """Cosine matrix (len(a), len(b)) of texts' sentence vectors with `embed`'s options (b defaults to
        a); of vectors already made, sentence-transformers' `similarity`: by the model's function.

        As sentence-transformers' `model.similarity`, `a` and `b` may be vectors already made instead of
        texts: (n, d) and (m, d), or (d,) for one, give their (n, m) scores by `similarity_fn_name` (the
        folder's config_sentence_transformers.json: cosine where it names none; dot product, or negative
        euclidean or manhattan distance), as sentence-transformers computes them. Vectors are any
        array-like: a NumPy array, a torch tensor (`encode(..., convert_to_tensor=True)`; read detached, on
        the CPU), a list of rows or of (d,) tensors, a `SentenceEmbeddings`. Texts are always scored by
        cosine, as bertscope's own similarity (the command line, /v2/similarity, search) scores them. The
        answer is a NumPy float32 array, tensors given or not (sentence-transformers answers a tensor:
        `torch.from_numpy` it). `embeddings1=` and `embeddings2=`, sentence-transformers' names, are `a`
        and `b`.
        """
        from ..core.given import is_vectors
        from ..encode import similarity_operands

        a, b = similarity_operands(a, b, embeddings1, embeddings2)

        if is_vectors(a) or is_vectors(b):
            from ..encode import vector_similarity

            return vector_similarity(self.similarity_fn_name, a, b, options)
        return super().similarity(a, b, **options)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """sentence-transformers' `similarity_pairwise`: (n,) similarity of row i with row i of two (n, d)
        arrays (or (d,) for one) by `similarity_fn_name`, as NumPy float32 (sentence-transformers answers a
        tensor)."""
        from ..encode import similarity_pairwise

        return similarity_pairwise(embeddings1, embeddings2, self.similarity_fn_name)

    @property
    def max_seq_length(self) -> int:
        """sentence-transformers' name for the tokens a text may take (`max_tokens`); set when loading."""
        return int(self.max_tokens)

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        from ..encode import max_seq_length_refusal

        raise max_seq_length_refusal(value)

    @overload
    def embed_chunks(  # type: ignore[overload-overlap]
        self,
        docs: str,
        *,
        chunks: ChunkBy | str | Sequence[tuple[int, int]] = ...,
        late: bool = ...,
        chunk_size: int | None = ...,
        chunk_overlap: int | None = ...,
        progress: bool | None = ...,
        size: int | None = ...,
        overlap: int | None = ...,
        **options: Unpack[RecipeKeywords],
    ) -> ChunkEmbeddings: ...
    @overload
    def embed_chunks(
        self,
        docs: Sequence[str],
        *,
        chunks: ChunkBy | str | Sequence[Any] = ...,
        late: bool = ...,
        chunk_size: int | None = ...,
        chunk_overlap: int | None = ...,
        progress: bool | None = ...,
        size: int | None = ...,
        overlap: int | None = ...,
        **options: Unpack[RecipeKeywords],
    ) -> list[ChunkEmbeddings]: ...

    def embed_chunks(
        self,
        docs: str | Sequence[str],
        *,
        chunks: ChunkBy | str | Sequence[Any] = "sentence",
        late: bool = True,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        progress: bool | None = None,
        size: int | None = None,
        overlap: int | None = None,
        **options: Unpack[RecipeKeywords],
    ) -> ChunkEmbeddings | list[ChunkEmbeddings]:
        """Chunk vectors of a document (ChunkEmbeddings) or of each of a list of documents (a list).

        `chunks`: "sentence", "paragraph", "tokens" (`chunk_size` pieces, default 128, neighbours sharing
        `chunk_overlap`, default 0: the corpus jobs' and LangChain's names, `--chunk-size`) or (start, end)
        spans (for a list of documents, one list of spans per document). `late=True` runs each document
        once (windows stitched; `long` defaults to "window") and pools its token vectors per span;
        `late=False` embeds each chunk alone (`long` defaults to "truncate", reported). `size` and
        `overlap` are the deprecated old names of `chunk_size` and `chunk_overlap`.
        """
        from ..chunk_embed import embed_chunks, refuse_idle_sizes
        from ..core.renamed import renamed_keyword

        chunk_size = renamed_keyword(chunk_size, size, name="chunk_size", old="size", caller="embed_chunks")
        chunk_overlap = renamed_keyword(
            chunk_overlap, overlap, name="chunk_overlap", old="overlap", caller="embed_chunks"
        )
        refuse_idle_sizes(chunks, chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        return embed_chunks(
            self, docs, chunks=chunks, late=late, progress=progress, **options,
            chunk_size=128 if chunk_size is None else chunk_size,
            chunk_overlap=0 if chunk_overlap is None else chunk_overlap,
        )  # fmt: skip

    def add_tokens(self, words: Sequence[str], *, init: Any = "pieces", seed: int = 0) -> Model:
        """A new Model whose tokenizer keeps each word whole, its rows initialised from `init`."""
        require_torch("add_tokens")  # it edits the PyTorch module's embedding rows
        from ..vocab import add_tokens

        return add_tokens(self, words, init=init, seed=seed)

    def save(self, folder: str | Path, *, overwrite: bool = False) -> Path:
        """Write a model folder that bertscope.load and plain transformers load (`overwrite`: replace
        an earlier save's folder)."""
        require_torch("save")  # it writes the PyTorch module's weights
        from ..vocab import save

        return save(self, folder, overwrite=overwrite)

    def explain(
        self,
        a: str,
        b: str,
        *,
        top_k: int | None = None,
        exact: bool = False,
        top: int | None = None,
        **options: Unpack[RecipeKeywords],
    ) -> Explanation:
        """Why a and b score what `similarity(a, b, same options)` says: token-pair contributions, the
        `top_k` largest listed (default 10; `top=` is its older spelling, still read).

        Exact for mean, mean_sqrt_len, first_last_avg and max (by dimension), with or without
        mask_special, normalize and affine post-processing; cls and pooler get the first token's ([CLS],
        <s>) attention row, marked as not exact (or refused with `exact=True`). Returns an `Explanation`
        (bertscope.explain).
        """
        from ..explain import explain

        return explain(self, a, b, top_k=top_k, exact=exact, top=top, **options)

    def baseline(
        self, *, reference: Sequence[str] | None = None, **options: Unpack[RecipeKeywords]
    ) -> Baseline:
        """Cosines of random pairs of a reference corpus (default: the calibration sentences shipped).

        `.percentile(score)` then says where a score sits among unrelated pairs (research/baseline.py).
        """
        from ..research.baseline import fit_baseline

        return fit_baseline(self, reference=reference, **options)

    def attentions(self, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
        """(layers, heads, tokens, tokens) attention weights for one text or pair, as output_attentions."""
        from ..attention import attentions

        return attentions(self, text, long=long)

    def batch(self, texts: Text | Sequence[Text]) -> dict[str, np.ndarray]:
        """The padded batch as numpy: input_ids, attention_mask, token_type_ids (batch, tokens) int64."""
        from ..core.forward import padded_batch

        return padded_batch(self, texts)

    def forward(self, texts: Text | Sequence[Text], **hf_options: Any) -> ForwardOutput:
        """The plain Hugging Face forward of one padded batch, by the names the tutorials use.

        Returns a `ForwardOutput`: input_ids, attention_mask, token_type_ids (batch, tokens),
        last_hidden_state (batch, tokens, d), hidden_states (L+1 of them), pooler_output (batch, d) or None.
        transformers' `output_hidden_states=True` is read (the hidden states are always there); its
        `output_attentions` is refused, pointing at `attentions(text)`.
        """
        _refuse_forward_options(hf_options)
        require_torch("forward")  # transformers' forward on the PyTorch module
        from ..core.forward import forward

        return forward(self, texts)

    def verify(
        self,
        texts: Sequence[str] | str | None = None,
        *,
        against: dict[str, Any] | str | Path | None = None,
        min_cosine: float | None = None,
    ) -> Verification | FingerprintCheck:
        """This model as set up against the plain Hugging Face float32 forward, every layer, on the
        calibration sentences, a text over the limit and `texts` (a `Verification`: ok, per-layer max abs
        and min cosine, settings; a lossy mode held to `min_cosine`, default its fast bound, else its
        precision's floor: 0.98 for int8, 0.999 for bfloat16 and float16, `verify.settings.lossy_floor`);
        with `against` (a fingerprint dict or file from `bertscope.verify.save_fingerprint`), each
        difference from it (a `FingerprintCheck`)."""
        if against is None:  # the reference is the PyTorch module's forward; a fingerprint needs no torch
            require_torch("verify against the Hugging Face forward")
        from ..verify import verify_model

        return verify_model(self, texts, against=against, min_cosine=min_cosine)


# transformers' forward keywords, each with what `Model.forward` does about it.
_FORWARD_OPTIONS = {
    "output_attentions": "forward gives no attentions: model.attentions(text) gives one text's (layers, "
    "heads, tokens, tokens) weights, as output_attentions",
    "output_hidden_states": "forward always gives every layer's hidden_states (L+1 of them); leave "
    "output_hidden_states out",
}


def _refuse_forward_options(options: dict[str, Any]) -> None:
    """Refuse a keyword `Model.forward` does not read, in one line with what to do; transformers'
    `output_hidden_states=True` asks for what forward gives anyway, so it is read."""
    for name, value in options.items():
        if name == "output_hidden_states" and value is True:
            continue
        if name in _FORWARD_OPTIONS:
            raise UnknownOption(f"forward does not take {name}={value!r}: {_FORWARD_OPTIONS[name]}")
        raise UnknownOption(f"forward: {unknown_option(name, ['texts'])}")
