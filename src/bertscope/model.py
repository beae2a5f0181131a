"""Model: the facade over one loaded encoder, a method per feature; `load()` makes one.

Every method's body lives in the module of its concept (static, anatomy, contextual, chunk_embed, encode,
explain, attention, vocab, research/...), each of which takes the `Encoder` (core/encoder.py) this class
extends, so no module below this one imports it. The methods that read what each layer holds (probe,
cka, geometry, ...) come from `research.methods.ResearchMethods`, the Encoder that Model extends.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from . import static as _static
from .backends import light as _light
from .backends import runtimes as _runtimes
from .backends.onnx import resolve_backend
from .core._enums import Backend, DType, LongText, Mode, Quantize, SubwordPooling
from .core.chunking import ChunkBy
from .core.cpu import usable_cpus
from .core.encoder import CPU_TOKEN_BUDGET, CUDA_TOKEN_BUDGET, ModelInfo, cpu_token_budget
from .core.folder import model_name
from .core.given import single
from .core.layers import LayerSpec
from .core.loading import load_parts, resolve_device, resolve_dtype, warn_slow_bfloat16
from .core.spec import whole_number
from .core.tokens import Text, Tokens
from .errors import InvalidSpec
from .research.methods import ResearchMethods
from .static_model import StaticModel, is_model2vec, load_static

if TYPE_CHECKING:
    import torch
    from typing_extensions import Unpack

    from .anatomy import Anatomy
    from .core.forward import ForwardOutput
    from .core.loading import Loaded
    from .core.results import ChunkEmbeddings
    from .core.spec import RecipeKeywords
    from .explain import Explanation
    from .research.aggregate import AggregatedStatic
    from .research.baseline import Baseline
    from .research.static_kinds import DecontextualizedStatic
    from .verify.fingerprint import FingerprintCheck
    from .verify.reference import Verification

__all__ = ["CPU_TOKEN_BUDGET", "CUDA_TOKEN_BUDGET", "Model", "ModelInfo", "cpu_token_budget", "load"]


_DEFAULT_MIN_COSINE = 0.999  # mode="fast"'s drift bound: the least cosine to float32 it keeps


def load(
    name: str | os.PathLike[str] | None = None,
    *,
    device: str | torch.device | None = "auto",
    dtype: DType | str | torch.dtype = DType.FLOAT32,
    threads: int | None = None,
    max_tokens: int | None = None,
    token_budget: int | None = None,
    backend: Backend | str = Backend.AUTO,
    quantize: Quantize | str | None = None,
    calibration: Sequence[str] | None = None,
    mode: Mode | str = Mode.EXACT,
    fast_min_cosine: float | None = None,
    remeasure: bool = False,
    trust_remote_code: bool = False,
) -> Model | StaticModel:
    """Load a model: None (or BERTSCOPE_MODEL) for the bundled all-MiniLM-L6-v2, a folder, or a hub id.

    A model2vec folder (what `bertscope distill` writes) loads as a `StaticModel`: sentence vectors,
    similarity, encode, info and static rows, no layers. Which of the two a name gives is known only when
    its folder is read, so the type is the union; narrow it with `isinstance(m, Model)` before a
    layer-level feature (embed_tokens, hidden_states, anatomy, ...), which a static model refuses.

    `device`: "auto" (CUDA where present, else the CPU), "cpu", "cuda", "cuda:N" or a torch.device.
    `dtype`: "float32" (default), "bfloat16", "float16" (CUDA only) or a torch.dtype. `max_tokens`: the
    tokens a text may take (at least 2; default the model's own limit, max_seq_length where it sets one;
    `long=` in embed says what a longer text does). `token_budget`: padded tokens per forward, the batch
    size in tokens (default 1,024 to 8,192 on a CPU by its threads, 65,536 on CUDA): speed and memory,
    never the vectors. `threads`: CPU threads for the whole process, not this model alone: torch's (or
    OMP_NUM_THREADS before torch loads) and every runtime of every model loaded after, until another
    `load(threads=)`; at most this machine's CPUs; default torch's own (OMP_NUM_THREADS, else the
    physical cores).

    `backend` is "torch", "onnxruntime" (CPU, float32 or int8; exported once and cached), "openvino"
    (below) or "auto": the exact default below for float32, onnxruntime for `quantize="int8"`, torch for
    another dtype. `quantize="int8"` runs ONNX Runtime's int8 with BERT's outlier
    channels spread over extra int8 columns, found on `calibration` texts (default: sentences shipped
    with bertscope). "openvino" runs the same exported graph on OpenVINO: float32, bfloat16 (CPUs with
    it natively), int8 (int8 weights, each activation quantized per group of 64 channels as it runs;
    no calibration) or int8_static (activation scales fitted once on `calibration`, but the feed-forward
    outputs'). `mode="fast"` measures the modes this machine runs and keeps the fastest whose min
    cosine to float32 is >= `fast_min_cosine`, remembered per model and machine (backends/fast.py).
    With no backend, dtype or quantize asked, the exact default runs the fastest runtime equal to torch
    within 1e-5 (torch, ONNX Runtime or OpenVINO float32; measured once, backends/exact.py).
    `info().mode` is "fast" only for a model `mode="fast"` chose; "exact" names the mode that runs what
    was asked (int8 and bfloat16 included: read `quantize` and `dtype` for lossy arithmetic), and is
    kept so stores and resumed jobs compare as before. `remeasure=True` measures either choice again.
    `trust_remote_code=True` runs the model code a folder ships (config.json `auto_map`), as
    transformers' own option does; without it such a folder is refused, never run as another class.
    """
    _check_counts(threads=threads, max_tokens=max_tokens, token_budget=token_budget)
    if threads is not None:
        _check_threads(threads)
    if isinstance(name, str) and not name.strip():
        raise InvalidSpec(
            f"the model name {name!r} is empty: leave it out for the bundled model, or name a folder "
            "(such as '.') or a hub id"
        )
    name = model_name(name)
    if is_model2vec(name):  # a static model (what `bertscope distill` writes): rows, no layers, no forward
        if threads is not None:  # process-wide, as for any other model (its ONNX or OpenVINO runtime)
            from .core.cpu import ask_threads

            ask_threads(threads)
        return load_static(
            name, max_tokens=max_tokens, token_budget=token_budget, device=device, dtype=dtype,
            backend=backend, quantize=quantize, mode=mode, trust_remote_code=trust_remote_code,
            calibration=calibration, fast_min_cosine=fast_min_cosine, remeasure=remeasure,
        )  # fmt: skip
    refuse_unread_options(
        backend=backend, quantize=quantize, mode=mode, calibration=calibration,
        fast_min_cosine=fast_min_cosine, remeasure=remeasure,
    )  # fmt: skip
    if threads is not None:
        from .core.cpu import ask_threads

        ask_threads(threads)
    asked = {"device": device, "dtype": dtype, "backend": backend, "quantize": quantize, "mode": mode}
    precision = None  # OpenVINO's, resolved (and warned of) once, here, on either path
    if _light.opens_light(asked, trust_remote_code, calibration=calibration, remeasure=remeasure):
        if Backend.parse(backend, what="backend") is Backend.OPENVINO:
            from .backends.openvino import resolve_precision

            precision = resolve_precision(dtype, quantize, "cpu")

        def build_light(parts: Loaded) -> Model:
            return Model(parts, device="cpu", max_tokens=max_tokens, token_budget=token_budget)

        light = _light.load_light(
            name, asked, build=build_light, precision=precision, calibration=calibration, remeasure=remeasure,
            record=threads is None,
            min_cosine=_DEFAULT_MIN_COSINE if fast_min_cosine is None else fast_min_cosine,
        )  # fmt: skip
        if light is not None:
            return light
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    torch_device = resolve_device(device)
    if Mode.parse(mode, what="mode") is Mode.FAST:
        from .backends.fast import load_fast

        def build(torch_dtype: torch.dtype) -> Model:
            # A fresh torch Model of the same folder and limits: the fast modes switch its runtime.
            trusted = trust_remote_code
            parts = load_parts(name, dtype=torch_dtype, device=torch_device, trust_remote_code=trusted)
            return Model(parts, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)

        asked = {"dtype": dtype, "backend": backend, "quantize": quantize}
        return load_fast(
            asked, device=torch_device, calibration=calibration,
            min_cosine=_DEFAULT_MIN_COSINE if fast_min_cosine is None else fast_min_cosine,
            remeasure=remeasure, build=build,
        )  # fmt: skip
    if Backend.parse(backend, what="backend") is Backend.OPENVINO:
        from .backends.openvino import resolve_precision

        precision = precision or resolve_precision(dtype, quantize, torch_device)
        loaded = load_parts(
            name, dtype=torch.float32, device=torch_device, trust_remote_code=trust_remote_code
        )
        model = Model(loaded, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)
        model.use_openvino(precision, calibration=calibration)
        return model
    torch_dtype = resolve_dtype(dtype, torch_device, warn=False)
    chosen = resolve_backend(backend, quantize, torch_dtype, torch_device)  # refused: no warning first
    warn_slow_bfloat16(torch_dtype, torch_device)
    loaded = load_parts(name, dtype=torch_dtype, device=torch_device, trust_remote_code=trust_remote_code)
    model = Model(loaded, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)
    if chosen is Backend.ONNXRUNTIME:
        model.use_onnxruntime(quantize=quantize, calibration=calibration)
    elif Backend.parse(backend, what="backend") is Backend.AUTO:
        from .backends.exact import choose_exact

        # only what a plain load would choose is kept for `bertscope info` (no threads, float32 asked)
        choose_exact(model, remeasure=remeasure, record=threads is None and torch_dtype is torch.float32)
    return model


def _check_counts(**counts: int | None) -> None:
    """Refuse a count that is not a whole number of 1 or more (threads=0 would reach torch, or set
    OMP_NUM_THREADS=0; token_budget=0 would mean the default), before anything loads."""
    for name, value in counts.items():
        if value is not None:
            whole_number(value, name)


def _check_threads(threads: int) -> None:
    """Refuse more threads than the CPUs this process may run on, as `--threads` does: more cannot run
    at once, and each new count is a new runtime measurement (minutes at a count in the hundreds; ONNX
    Runtime refuses a count past 2**31 with a traceback), so a typo is refused, not timed."""
    if threads > (cpus := usable_cpus()):
        word = "CPU" if cpus == 1 else "CPUs"
        raise InvalidSpec(f"threads={threads}, but this machine has {cpus} {word}; give at most {cpus}")


def refuse_unread_options(
    *,
    backend: Backend | str,
    quantize: Quantize | str | None,
    mode: Mode | str,
    calibration: Sequence[str] | None = None,
    fast_min_cosine: float | None = None,
    remeasure: bool = False,
) -> None:
    """Refuse an option that the other options asked leave unread: it would be ignored without a word;
    and calibration texts that are not a list of str. `load` checks these before anything loads, and the
    command line before `--remeasure` forgets any measurement."""
    from .backends.quantize import check_calibration

    chosen = Backend.parse(backend, what="backend")
    scheme = Quantize.parse(quantize or Quantize.NONE, what="quantize")
    fast = Mode.parse(mode, what="mode") is Mode.FAST
    if calibration is not None:
        check_calibration(calibration)
    if calibration is not None and chosen is Backend.OPENVINO and scheme is not Quantize.INT8_STATIC:
        raise InvalidSpec(
            "backend='openvino' reads no calibration texts but with quantize='int8_static' (its int8 takes "
            "each activation's scale at run time); leave calibration out, or add quantize='int8_static'"
        )
    if calibration is not None and not fast and scheme is Quantize.NONE:
        raise InvalidSpec(
            "calibration= fits int8's scales and is read only with quantize= (int8, int8_fused, "
            "int8_static) or mode='fast'; leave it out, or add one of them"
        )
    # None is 'not given': any number, the default 0.999 too, is a bound that nothing else reads.
    if fast_min_cosine is not None and not fast:
        raise InvalidSpec(
            f'fast_min_cosine applies to mode="fast" only; fast_min_cosine={fast_min_cosine} is the bound '
            "it chooses within (--fast-min-cosine with --fast on the command line): add mode='fast', or "
            "leave it out"
        )
    if not isinstance(remeasure, bool):  # "yes" or 1 would measure for minutes on a truthy value
        raise InvalidSpec(
            f"remeasure takes True or False, not {remeasure!r}; give remeasure=True or leave it out"
        )
    if remeasure and not fast and (chosen is not Backend.AUTO or scheme is not Quantize.NONE):
        raise InvalidSpec(
            "remeasure=True times the exact default or mode='fast' again, and these options name the "
            "runtime themselves (backend= or quantize=): nothing is measured; leave remeasure out"
        )


class Model(ResearchMethods):
    """A BERT-family encoder and every embedding it makes: static, anatomy, per layer, pooled.

    One Model may serve several threads at once, on any runtime: a forward that stops at an early layer
    runs a view of the PyTorch module and never changes the module, so calls asking different layers
    together get what each would get alone."""

    def use_openvino(self, precision: str = "float32", *, calibration: Sequence[str] | None = None) -> None:
        """Run every forward on OpenVINO from now on: precision float32, bfloat16, int8 or int8_static."""
        _runtimes.use_openvino(self, precision, calibration=calibration)

    def use_onnxruntime(
        self, *, quantize: Quantize | str | None = None, calibration: Sequence[str] | None = None
    ) -> None:
        """Run every forward on ONNX Runtime from now on (float32, or int8 with quantize="int8")."""
        _runtimes.use_onnxruntime(self, quantize=quantize, calibration=calibration)

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
        self, query: str | int | np.ndarray, *, k: int = 10, include_special: bool = False
    ) -> list[_static.Neighbor]:
        """Nearest vocabulary entries by cosine of static rows (special/unused left out by default)."""
        return _static.neighbors(self, query, k=k, include_special=include_special)

    def export_static(
        self, path: str | Path, *, format: str | None = None, items: Sequence[str | int] | None = None
    ) -> list[Path]:
        """Write the static rows of `items` (default: every row) as word2vec, npy, parquet or projector.

        Without `format` the suffix chooses: .npy, .parquet, else word2vec text.
        """
        return _static.export(self, path, format, items=items)

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
        from .research.aggregate import static_from_corpus

        return static_from_corpus(
            self, corpus, layers=layers, min_count=min_count, subword=subword, **options
        )

    def static_decontextualized(
        self, items: str | int | Sequence[str | int], *, layers: LayerSpec = "all", pieces: bool = False
    ) -> DecontextualizedStatic:
        """Words (or pieces) alone, [CLS] w [SEP], through the model: pieces' mean per layer."""
        from .research.static_kinds import static_decontextualized

        return static_decontextualized(self, items, layers=layers, pieces=pieces)

    # What each layer holds (research/probe.py, research/cka.py) ---------------------------------

    @overload
    def anatomy(self, texts: Text) -> Anatomy: ...  # type: ignore[overload-overlap]
    @overload
    def anatomy(self, texts: Sequence[Text]) -> list[Anatomy]: ...

    def anatomy(self, texts: Text | Sequence[Text]) -> Anatomy | list[Anatomy]:
        """The embedding layer taken apart for a text or pair (or a padded batch of them), with its proof."""
        tokens = self.tokenize(texts)
        from . import anatomy as _anatomy

        result = _anatomy.decompose(self, [tokens] if isinstance(tokens, Tokens) else tokens)
        return result[0] if single(texts) else result

    def encode(
        self,
        sentences: str | Sequence[str],
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
        Its other keywords (task, tokenizer_kwargs, pool, chunk_size, ...) are refused by name.
        """
        from .encode import encode

        return encode(
            self, sentences, prompt_name=prompt_name, prompt=prompt, batch_size=batch_size,
            show_progress_bar=show_progress_bar, output_value=output_value, precision=precision,
            convert_to_numpy=convert_to_numpy, convert_to_tensor=convert_to_tensor, device=device,
            normalize_embeddings=normalize_embeddings, truncate_dim=truncate_dim, unsupported=unsupported,
        )  # fmt: skip

    def encode_query(
        self,
        sentences: str | Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        **options: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """sentence-transformers' `encode_query`: `encode` with the model's "query" prompt where none is
        named, and no prompt where the model has none (never its default prompt, as sentence-transformers
        5+ gives it); the other keywords are `encode`'s."""
        from .encode import QUERY_PROMPTS, encode_role

        return encode_role(self, QUERY_PROMPTS, sentences, prompt_name, prompt, options)

    def encode_document(
        self,
        sentences: str | Sequence[str],
        prompt_name: str | None = None,
        prompt: str | None = None,
        **options: Any,
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """sentence-transformers' `encode_document`: `encode` with the model's "document" prompt where none
        is named, and no prompt where the model has none (sentence-transformers 5+ gives every model a
        "document" prompt, "" unless the model sets one, so "passage" or "corpus" are not tried)."""
        from .encode import DOCUMENT_PROMPTS, encode_role

        return encode_role(self, DOCUMENT_PROMPTS, sentences, prompt_name, prompt, options)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """sentence-transformers' `similarity_pairwise`: (n,) cosine of row i with row i of two (n, d)
        arrays (or (d,) for one), as NumPy float32 (sentence-transformers answers a tensor)."""
        from .encode import similarity_pairwise

        return similarity_pairwise(embeddings1, embeddings2)

    @property
    def similarity_fn_name(self) -> str:
        """sentence-transformers' name of what `similarity` computes: always "cosine" here."""
        return "cosine"

    def get_embedding_dimension(self) -> int:
        """sentence-transformers' width of `encode`'s vectors: the hidden size."""
        return int(self.info().hidden_size)

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' older name of `get_embedding_dimension`."""
        return self.get_embedding_dimension()

    @property
    def max_seq_length(self) -> int:
        """sentence-transformers' name for the tokens a text may take (`max_tokens`); set when loading."""
        return int(self.max_tokens)

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        from .encode import max_seq_length_refusal

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
        from .chunk_embed import embed_chunks, refuse_idle_sizes
        from .core.renamed import renamed_keyword

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
        from .vocab import add_tokens

        return add_tokens(self, words, init=init, seed=seed)

    def save(self, folder: str | Path) -> Path:
        """Write a model folder that bertscope.load and plain transformers load."""
        from .vocab import save

        return save(self, folder)

    def explain(
        self, a: str, b: str, *, top: int = 10, exact: bool = False, **options: Unpack[RecipeKeywords]
    ) -> Explanation:
        """Why a and b score what `similarity(a, b, same options)` says: token-pair contributions.

        Exact for mean, mean_sqrt_len, first_last_avg and max (by dimension), with or without
        mask_special, normalize and affine post-processing; cls and pooler get the [CLS] attention row,
        marked as not exact (or refused with `exact=True`). Returns an `Explanation` (bertscope.explain).
        """
        from .explain import explain

        return explain(self, a, b, top=top, exact=exact, **options)

    def baseline(
        self, *, reference: Sequence[str] | None = None, **options: Unpack[RecipeKeywords]
    ) -> Baseline:
        """Cosines of random pairs of a reference corpus (default: the calibration sentences shipped).

        `.percentile(score)` then says where a score sits among unrelated pairs (research/baseline.py).
        """
        from .research.baseline import fit_baseline

        return fit_baseline(self, reference=reference, **options)

    def attentions(self, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
        """(layers, heads, tokens, tokens) attention weights for one text or pair, as output_attentions."""
        from .attention import attentions

        return attentions(self, text, long=long)

    def batch(self, texts: Text | Sequence[Text]) -> dict[str, np.ndarray]:
        """The padded batch as numpy: input_ids, attention_mask, token_type_ids (batch, tokens) int64."""
        from .core.forward import padded_batch

        return padded_batch(self, texts)

    def forward(self, texts: Text | Sequence[Text]) -> ForwardOutput:
        """The plain Hugging Face forward of one padded batch, by the names the tutorials use.

        Returns a `ForwardOutput`: input_ids, attention_mask, token_type_ids (batch, tokens),
        last_hidden_state (batch, tokens, d), hidden_states (L+1 of them), pooler_output (batch, d) or None.
        """
        from .core.forward import forward

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
        and min cosine, settings; a lossy mode held to `min_cosine`, default its fast bound or 0.999);
        with `against` (a fingerprint dict or file from `bertscope.verify.save_fingerprint`), each
        difference from it (a `FingerprintCheck`)."""
        from .verify import verify_model

        return verify_model(self, texts, against=against, min_cosine=min_cosine)
