"""Model: a loaded BERT-family encoder with its tokenizer, family adapter and the one engine."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import anatomy as _anatomy
from . import static as _static
from ._enums import Backend, Combine, DType, LongText, Mode, Pooling, Quantize, SubwordPooling
from .chunking import ChunkBy
from .engine import Engine
from .errors import InvalidInput, InvalidSpec
from .layers import LayerSpec
from .loading import load_parts, resolve_device, resolve_dtype
from .onnx_backend import resolve_backend
from .pooling import word_embeddings
from .progress import progress_callback
from .prompts import Prompts, read_prompts
from .results import SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
from .similarity import cos_sim, unit
from .spec import EmbedOptions, EmbedSpec, PostArg, Recipe, resolve, resolve_spec
from .tokens import Text, TextTokenizer, check_texts, is_pair, iter_checked, pad_batch

__all__ = ["Model", "ModelInfo", "load"]

CPU_TOKEN_BUDGET = 2048
CUDA_TOKEN_BUDGET = 65536


@dataclass
class ModelInfo:
    """What a model is: family, sizes, limits, special tokens and its own sentence pooling."""

    source: str
    path: str | None
    family: str
    model_type: str
    layers: int
    hidden_size: int
    embedding_size: int
    vocab_size: int
    max_positions: int
    max_tokens: int
    special_tokens: dict[str, str]
    pooling: str | None
    normalize: bool
    lacks: list[str]
    device: str
    dtype: str
    backend: str = "torch"
    quantize: str | None = None
    mode: str = "exact"
    fast: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: every field above, by its name."""
        return dict(self.__dict__)


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
    fast_min_cosine: float = 0.999,
) -> Model:
    """Load a model: None (or BERTSCOPE_MODEL) for the bundled all-MiniLM-L6-v2, a folder, or a hub id.

    `backend` is "torch", "onnxruntime" (CPU, float32 or int8; exported once and cached) or "auto"
    (torch, or onnxruntime for int8). `quantize="int8"` runs ONNX Runtime's int8 with BERT's outlier
    channels kept in float32, found on `calibration` texts (default: sentences shipped with bertscope).
    "openvino" runs the same exported graph on OpenVINO: float32, bfloat16 (CPUs with it natively) or
    int8 (NNCF). `mode="fast"` measures the modes this machine runs and keeps the fastest whose min
    cosine to float32 is >= `fast_min_cosine`, remembered per model and machine (backends/fast.py).
    """
    if name is None:
        name = os.environ.get("BERTSCOPE_MODEL") or None
    if threads is not None:
        torch.set_num_threads(threads)
    torch_device = resolve_device(device)
    if Mode.parse(mode, what="mode") is Mode.FAST:
        from .backends.fast import load_fast

        asked = {"dtype": dtype, "backend": backend, "quantize": quantize}
        return load_fast(
            name, asked, device=torch_device, max_tokens=max_tokens, token_budget=token_budget,
            min_cosine=fast_min_cosine, calibration=calibration,
        )  # fmt: skip
    if Backend.parse(backend, what="backend") is Backend.OPENVINO:
        from .backends.openvino import resolve_precision

        precision = resolve_precision(dtype, quantize, torch_device)
        loaded = load_parts(name, dtype=torch.float32, device=torch_device)
        model = Model(loaded, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)
        model.use_openvino(precision, calibration=calibration)
        return model
    torch_dtype = resolve_dtype(dtype, torch_device)
    chosen = resolve_backend(backend, quantize, torch_dtype, torch_device)
    loaded = load_parts(name, dtype=torch_dtype, device=torch_device)
    model = Model(loaded, device=torch_device, max_tokens=max_tokens, token_budget=token_budget)
    if chosen is Backend.ONNXRUNTIME:
        model.use_onnxruntime(quantize=quantize, calibration=calibration)
    return model


class Model:
    """A BERT-family encoder and every embedding it makes: static, anatomy, per layer, pooled."""

    def __init__(
        self, loaded: Any, *, device: torch.device, max_tokens: int | None, token_budget: int | None
    ) -> None:
        self.loaded = loaded
        self.hf_model = loaded.model
        self.family = loaded.family
        self.device = device
        self.config = self.hf_model.config
        pad = loaded.tokenizer.pad_token_id
        self.pad_id: int = int(pad if pad is not None else self.config.pad_token_id or 0)
        self.max_positions = self._usable_positions()
        self.max_tokens = self._token_limit(max_tokens)
        backend = loaded.tokenizer.backend_tokenizer
        self.tokenizer = TextTokenizer(backend, max_tokens=self.max_tokens)
        budget = token_budget or (CUDA_TOKEN_BUDGET if device.type == "cuda" else CPU_TOKEN_BUDGET)
        self.engine = Engine(
            self.hf_model, self.family, self.tokenizer, pad_id=self.pad_id, device=device, token_budget=budget
        )
        self.n_layers = self.family.num_layers(self.hf_model)
        self.backend = "torch"
        self.quantize: str | None = None
        self.runtime_dtype: str | None = None
        self.mode = "exact"
        self.fast_choice: dict[str, Any] | None = None

    def use_torch(self) -> None:
        """Run every forward in torch again (the model's own dtype)."""
        self.engine.runner = None
        self.backend, self.quantize, self.runtime_dtype = "torch", None, None

    def use_openvino(self, precision: str = "float32", *, calibration: Sequence[str] | None = None) -> None:
        """Run every forward on OpenVINO from now on: precision float32, bfloat16 or int8 (NNCF)."""
        from .backends.openvino import OpenVinoRunner

        if next(self.hf_model.parameters()).dtype is not torch.float32 or self.device.type != "cpu":
            raise InvalidSpec(
                "backend='openvino' exports a float32 model on the CPU; load it with dtype='float32'"
            )
        runner = OpenVinoRunner.build(
            self.hf_model,
            self.family,
            precision=precision,
            batches=self._calibration_batches,
            calibration=calibration,
            log=_stderr,
        )
        self.engine.runner = runner
        self.backend = "openvino"
        self.quantize = "int8" if precision == "int8" else None
        self.runtime_dtype = "float32" if precision == "int8" else precision

    def _calibration_batches(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(ids, type_ids, mask) per batch of 8 texts, truncated and padded as the engine does."""
        tokens = self.tokenize(list(texts))
        batches = []
        for start in range(0, len(tokens), 8):
            part = tokens[start : start + 8]
            ids, mask = pad_batch([t.ids for t in part], self.pad_id)
            type_ids, _ = pad_batch([t.type_ids for t in part], 0)
            batches.append((ids, type_ids, mask))
        return batches

    def use_onnxruntime(
        self, *, quantize: Quantize | str | None = None, calibration: Sequence[str] | None = None
    ) -> None:
        """Run every forward on ONNX Runtime from now on (float32, or int8 with quantize="int8")."""
        from .onnx_backend import OnnxRunner, resolve_backend

        mode = Quantize.parse(quantize or Quantize.NONE, what="quantize")
        resolve_backend(Backend.ONNXRUNTIME, mode, next(self.hf_model.parameters()).dtype, self.device)
        self.engine.runner = None  # calibration watches the torch forward
        deepest = EmbedSpec(layers=(self.n_layers,))

        def calibrate(texts: Sequence[str]) -> None:
            self.engine.sentences_once(texts, deepest)

        self.engine.runner = OnnxRunner.build(
            self.hf_model,
            self.family,
            self.n_layers,
            quantize=mode.value,
            calibrate=calibrate,
            calibration=calibration,
            log=_stderr,
        )
        self.backend = "onnxruntime"
        self.runtime_dtype = None
        self.quantize = None if mode is Quantize.NONE else mode.value

    def __repr__(self) -> str:
        return f"<bertscope.Model {self.loaded.source} ({self.family.name}, {self.n_layers} layers)>"

    def _token_limit(self, asked: int | None) -> int:
        """The tokens per text: the model's own limit, or the one asked (an override, as in ST) if it fits."""
        if asked is None:
            return min(int(x) for x in (self.max_positions, self.loaded.st_max_seq_length) if x)
        if isinstance(asked, bool) or not isinstance(asked, int) or asked < 2:
            raise InvalidSpec(f"max_tokens={asked!r}: give a whole number of at least 2 ([CLS] and [SEP])")
        if asked > self.max_positions:
            raise InvalidSpec(
                f"max_tokens={asked} is over what {self.loaded.source} can take ({self.max_positions} "
                f"positions); use max_tokens<={self.max_positions} and long='window' for longer texts"
            )
        return asked

    def _usable_positions(self) -> int:
        positions = int(getattr(self.config, "max_position_embeddings", 512))
        if self.family.positions_after_padding:
            positions -= self.pad_id + 1
        tokenizer_max = int(getattr(self.loaded.tokenizer, "model_max_length", positions) or positions)
        return min(positions, tokenizer_max)

    @cached_property
    def vocab(self) -> dict[str, int]:
        """Word piece -> id."""
        return dict(self.loaded.tokenizer.get_vocab())

    @cached_property
    def id_to_token(self) -> dict[int, str]:
        """Id -> word piece."""
        return {i: t for t, i in self.vocab.items()}

    @cached_property
    def special_ids(self) -> list[int]:
        """Ids of the special tokens ([CLS], [SEP], [PAD], ... or <s>, </s>, <pad>, ...)."""
        return sorted(set(self.loaded.tokenizer.all_special_ids))

    @property
    def input_embeddings(self) -> torch.Tensor:
        """The word-piece embedding matrix (vocab, embedding width)."""
        return self.hf_model.get_input_embeddings().weight

    def unit_static_matrix(self) -> np.ndarray:
        """The static matrix with unit rows, for cosine neighbours (cached)."""
        if not hasattr(self, "_unit"):
            self._unit = unit(_static.matrix(self))
        return self._unit

    def info(self) -> ModelInfo:
        """Family, layers, sizes, vocabulary, limits, special tokens and pooling config."""
        tok = self.loaded.tokenizer
        return ModelInfo(
            source=self.loaded.source,
            path=str(self.loaded.path) if self.loaded.path else None,
            family=self.family.name,
            model_type=self.config.model_type,
            layers=self.n_layers,
            hidden_size=int(
                self.config.hidden_size if hasattr(self.config, "hidden_size") else self.config.dim
            ),
            embedding_size=int(self.input_embeddings.shape[1]),
            vocab_size=int(self.input_embeddings.shape[0]),
            max_positions=self.max_positions,
            max_tokens=self.max_tokens,
            special_tokens={k: str(v) for k, v in tok.special_tokens_map.items()},
            pooling=self.loaded.st_pooling,
            normalize=self.loaded.st_normalize,
            lacks=list(self.family.parts(self.hf_model).lacks),
            device=str(self.device),
            dtype=self.runtime_dtype or str(next(self.hf_model.parameters()).dtype).replace("torch.", ""),
            backend=self.backend,
            quantize=self.quantize,
            mode=self.mode,
            fast=self.fast_choice,
        )

    # Tokens and static vectors ------------------------------------------------------------------

    def tokenize(self, texts: Text | Sequence[Text], *, long: LongText | str = "truncate") -> Any:
        """Tokens of a text or an (A, B) pair (or a list of Tokens): pieces, ids, offsets, word ids, specials.

        A pair reads [CLS] A [SEP] B [SEP] with token type 1 on B where the family has token types.
        """
        policy = LongText.parse(long, what="long-text policy")
        items = check_texts(texts, pairs=True)
        tokens = [self.tokenizer.fit(t, policy, index=i) for i, t in enumerate(self.tokenizer.encode(items))]
        return tokens[0] if _single(texts) else tokens

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
    ) -> Any:
        """Each corpus word's mean vector at `layers` over its occurrences, with counts (AggregatedStatic).

        Streaming and resumable with `checkpoint=FOLDER`; see `bertscope.research.aggregate`.
        """
        from .research.aggregate import static_from_corpus

        return static_from_corpus(
            self, corpus, layers=layers, min_count=min_count, subword=subword, **options
        )

    def static_decontextualized(
        self, items: str | int | Sequence[str | int], *, layers: LayerSpec = "all", pieces: bool = False
    ) -> Any:
        """Words (or pieces) alone, [CLS] w [SEP], through the model: pieces' mean per layer."""
        from .research.static_kinds import static_decontextualized

        return static_decontextualized(self, items, layers=layers, pieces=pieces)

    def anatomy(self, texts: Text | Sequence[Text]) -> Any:
        """The embedding layer taken apart for a text or pair (or a padded batch of them), with its proof."""
        tokens = self.tokenize(texts)
        result = _anatomy.decompose(self, [tokens] if _single(texts) else tokens)
        return result[0] if _single(texts) else result

    # Contextual vectors -------------------------------------------------------------------------

    def spec(
        self,
        *,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str = "truncate",
        stride: int | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> EmbedSpec:
        """Resolve user options (auto pooling, first_last_avg, defaults, prompt) into an EmbedSpec."""
        return resolve_spec(
            self,
            layers=layers,
            combine=combine,
            pooling=pooling,
            mask_special=mask_special,
            normalize=normalize,
            long=long,
            stride=stride,
            prompt_name=prompt_name,
            prompt=prompt,
        )

    @cached_property
    def prompts(self) -> Prompts:
        """The model's own prompts (from config_sentence_transformers.json) and its include_prompt."""
        return read_prompts(self.loaded.path)

    def iter_embed(
        self,
        texts: Iterable[str],
        *,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str = "truncate",
        stride: int | None = None,
        post: PostArg = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        progress: bool | None = None,
        total: int | None = None,
    ) -> Iterator[SentenceEmbeddings]:
        """Sentence vectors (n, d) for a stream of texts, chunk by chunk in input order (bounded memory)."""
        options = EmbedOptions(
            layers, combine, pooling, mask_special, normalize, long, stride, post, prompt_name, prompt
        )
        recipe = resolve(self, options)
        with progress_callback(total, enabled=progress) as on_batch:
            checked = iter_checked(texts, pairs=True)
            for chunk in self.engine.sentences(checked, recipe.spec, on_batch=on_batch):
                yield recipe.finish(chunk)

    def embed(
        self,
        texts: Text | Sequence[Text],
        *,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str = "truncate",
        stride: int | None = None,
        post: PostArg = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        progress: bool | None = None,
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) float32 for texts (or (A, B) pairs), any layers, any pooling; see `spec`.

        `post` is a fitted post-processing (whitening, all-but-the-top, PCA) or the path of a saved one.
        `prompt_name` is one of the model's own prompts (default: its default one), `prompt` the text.
        """
        options = EmbedOptions(
            layers, combine, pooling, mask_special, normalize, long, stride, post, prompt_name, prompt
        )
        return self.embed_with(texts, resolve(self, options), progress=progress)

    def embed_with(
        self, texts: Text | Sequence[Text], recipe: Recipe, *, progress: bool | None = None
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) for texts or pairs with a recipe already resolved by `spec.resolve`."""
        items = check_texts(texts, pairs=True)
        with progress_callback(len(items), enabled=progress) as on_batch:
            return recipe.finish(self.engine.sentences_once(items, recipe.spec, on_batch=on_batch))

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
    ) -> Any:
        """sentence-transformers' `encode`: (d,) for a str, (n, d) for a list, with the model's own pooling.

        `convert_to_tensor` gives a torch tensor, neither it nor numpy a list of (d,) tensors;
        `output_value="token_embeddings"` a list of (tokens, d) last-layer tensors. Positional order and
        defaults are sentence-transformers'; `batch_size` does not change the vectors (see bertscope.encode).
        """
        from .encode import encode

        return encode(
            self, sentences, prompt_name=prompt_name, prompt=prompt, batch_size=batch_size,
            show_progress_bar=show_progress_bar, output_value=output_value, precision=precision,
            convert_to_numpy=convert_to_numpy, convert_to_tensor=convert_to_tensor, device=device,
            normalize_embeddings=normalize_embeddings, truncate_dim=truncate_dim,
        )  # fmt: skip

    def embed_tokens(
        self,
        texts: Text | Sequence[Text],
        *,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        long: LongText | str = "truncate",
        stride: int | None = None,
        progress: bool | None = None,
    ) -> list[TokenEmbeddings]:
        """Per text (or pair): tokens, offsets and vectors (tokens, d) of the chosen layers, pad trimmed.

        combine="stack" keeps each layer apart: vectors (tokens, layers, d), in the order of `layers`.
        """
        items = check_texts(texts, pairs=True)
        spec = self.spec(layers=layers, combine=combine, pooling="mean", long=long, stride=stride)
        with progress_callback(len(items), enabled=progress) as on_batch:
            found = self.engine.token_matrices(items, spec, on_batch=on_batch)
            return [TokenEmbeddings.of(t, m, spec.as_dict()) for t, m in found]

    def embed_fitted_tokens(self, tokens: Sequence[Any], spec: EmbedSpec) -> list[TokenEmbeddings]:
        """`embed_tokens` of Tokens already through `engine.prepare` with `spec` (tokenized once)."""
        found = self.engine.fitted_token_matrices(tokens, spec)
        return [TokenEmbeddings.of(t, m, spec.as_dict()) for t, m in found]

    def embed_words(
        self,
        texts: str | Sequence[str],
        *,
        subword: SubwordPooling | str = "mean",
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        long: LongText | str = "truncate",
        stride: int | None = None,
    ) -> list[WordEmbeddings]:
        """Per text: words (from the tokenizer's word ids), char spans, and pooled word vectors."""
        how = SubwordPooling.parse(subword, what="subword pooling")
        check_texts(texts)  # words index into one text: pairs are not taken here
        tokens = self.embed_tokens(texts, layers=layers, combine=combine, long=long, stride=stride)
        return [word_embeddings(tok, how) for tok in tokens]

    def embed_chunks(
        self,
        docs: str | Sequence[str],
        *,
        chunks: ChunkBy | str | Sequence[tuple[int, int]] = "sentence",
        late: bool = True,
        size: int = 128,
        overlap: int = 0,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str | None = None,
        stride: int | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        progress: bool | None = None,
    ) -> Any:
        """Chunk vectors of a document (ChunkEmbeddings) or of each of a list of documents (a list).

        `chunks`: "sentence", "paragraph", "tokens" (`size` pieces, neighbours sharing `overlap`) or
        (start, end) spans (for a list of documents, one list of spans per document). `late=True` runs
        each document once (windows stitched; `long` defaults to "window") and pools its token vectors
        per span; `late=False` embeds each chunk alone (`long` defaults to "truncate", reported).
        """
        from .chunk_embed import iter_chunk_embeddings, late_spec
        from .chunking import chunk_spans

        items = check_texts(docs)
        spec = self.spec(
            layers=layers, combine=combine, pooling=pooling, mask_special=mask_special, normalize=normalize,
            long=long or ("window" if late else "truncate"), stride=stride, prompt_name=prompt_name,
            prompt=prompt,
        )  # fmt: skip
        if late:
            spec = late_spec(spec)
        per_doc = _spans_per_doc(chunks, items, isinstance(docs, str))
        spans = (
            (text, chunk_spans(text, given, tokenizer=self.tokenizer, size=size, overlap=overlap))
            for text, given in zip(items, per_doc, strict=True)
        )
        settings: dict[str, Any] = {"chunks": _chunks_name(chunks)}
        if settings["chunks"] == ChunkBy.TOKENS.value:
            settings.update(chunk_size=size, chunk_overlap=overlap)
        with progress_callback(len(items), enabled=progress) as on_batch:
            chunked = iter_chunk_embeddings(
                self.engine, spans, spec, late=late, settings=settings, on_batch=on_batch
            )
            results = list(chunked)
        return results[0] if isinstance(docs, str) else results

    def add_tokens(self, words: Sequence[str], *, init: Any = "pieces", seed: int = 0) -> Model:
        """A new Model whose tokenizer keeps each word whole, its rows initialised from `init`."""
        from .vocab import add_tokens

        return add_tokens(self, words, init=init, seed=seed)

    def save(self, folder: str | Path) -> Path:
        """Write a model folder that bertscope.load and plain transformers load."""
        from .vocab import save

        return save(self, folder)

    def hidden_states(self, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
        """(L+1, tokens, d) every layer's token vectors for one text or pair: 0 is the embedding output."""
        if not _single(text):
            raise InvalidSpec("hidden_states takes one text (or one (A, B) pair); use embed_tokens for many")
        tok = self.embed_tokens(text, layers="all", combine="concat", long=long)[0]
        width = tok.vectors.shape[1] // (self.n_layers + 1)
        return tok.vectors.reshape(len(tok.tokens), self.n_layers + 1, width).transpose(1, 0, 2).copy()

    def similarity(
        self,
        a: str | Sequence[str],
        b: str | Sequence[str] | None = None,
        *,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str = "truncate",
        stride: int | None = None,
        post: PostArg = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> np.ndarray:
        """Cosine matrix (len(a), len(b)) of sentence vectors; b defaults to a."""
        options = EmbedOptions(
            layers, combine, pooling, mask_special, normalize, long, stride, post, prompt_name, prompt
        )
        recipe = resolve(self, options)
        left = self.embed_with(a, recipe).vectors
        right = left if b is None else self.embed_with(b, recipe).vectors
        return cos_sim(left, right)

    # Explanations, baselines, attention and the names from the tutorials --------------------------

    def explain(
        self,
        a: str,
        b: str,
        *,
        post: PostArg = None,
        top: int = 10,
        exact: bool = False,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str = "truncate",
        stride: int | None = None,
    ) -> Any:
        """Why a and b score what `similarity(a, b, same options)` says: token-pair contributions.

        Exact for mean, mean_sqrt_len, first_last_avg and max (by dimension), with or without
        mask_special, normalize and affine post-processing; cls and pooler get the [CLS] attention row,
        marked as not exact (or refused with `exact=True`). Returns an `Explanation` (bertscope.explain).
        """
        from .explain import explain

        return explain(
            self, a, b, post=post, top=top, exact=exact, layers=layers, combine=combine, pooling=pooling,
            mask_special=mask_special, normalize=normalize, long=long, stride=stride,
        )  # fmt: skip

    def baseline(
        self,
        *,
        reference: Sequence[str] | None = None,
        post: PostArg = None,
        layers: LayerSpec | None = None,
        combine: Combine | str = "mean",
        pooling: Pooling | str = "auto",
        mask_special: bool = False,
        normalize: bool | None = None,
        long: LongText | str = "truncate",
        stride: int | None = None,
    ) -> Any:
        """Cosines of random pairs of a reference corpus (default: the calibration sentences shipped).

        `.percentile(score)` then says where a score sits among unrelated pairs (see bertscope.baseline).
        """
        from .baseline import fit_baseline

        return fit_baseline(
            self, reference=reference, post=post, layers=layers, combine=combine, pooling=pooling,
            mask_special=mask_special, normalize=normalize, long=long, stride=stride,
        )  # fmt: skip

    def attentions(self, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
        """(layers, heads, tokens, tokens) attention weights for one text or pair, as output_attentions."""
        from .attention import attentions

        return attentions(self, text, long=long)

    def batch(self, texts: Text | Sequence[Text]) -> dict[str, np.ndarray]:
        """The padded batch as numpy: input_ids, attention_mask, token_type_ids (batch, tokens) int64."""
        from .forward import padded_batch

        return padded_batch(self, texts)

    def forward(self, texts: Text | Sequence[Text]) -> Any:
        """The plain Hugging Face forward of one padded batch, by the names the tutorials use.

        Returns a `ForwardOutput`: input_ids, attention_mask, token_type_ids (batch, tokens),
        last_hidden_state (batch, tokens, d), hidden_states (L+1 of them), pooler_output (batch, d) or None.
        """
        from .forward import forward

        return forward(self, texts)


def _single(texts: object) -> bool:
    """Whether `texts` is one text or one (A, B) pair (a tuple), not a list of them."""
    return isinstance(texts, str) or (isinstance(texts, tuple) and is_pair(texts))


def _spans_per_doc(chunks: Any, docs: list[str], single: bool) -> list[Any]:
    """The chunking of each document: one name for all, or the user's spans (one list per document)."""
    if isinstance(chunks, str):
        return [chunks] * len(docs)
    if single:
        return [chunks]
    if not isinstance(chunks, Sequence) or len(chunks) != len(docs):
        raise InvalidInput(
            f"for {len(docs)} documents give one list of (start, end) spans per document, or a chunking name"
        )
    return list(chunks)


def _chunks_name(chunks: Any) -> str:
    return str(ChunkBy.parse(chunks, what="chunking").value) if isinstance(chunks, str) else "spans"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
