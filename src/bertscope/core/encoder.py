"""Encoder: the loaded model, its tokenizer and the one engine, and the contextual vectors they make.

`bertscope.Model` (model/facade.py, the facade) is an Encoder with a method per feature. Feature and research
modules take an Encoder (tokens, spec, embed, embed_tokens, embed_words, similarity are here, built on
the engine alone), so nothing below the facade needs bertscope.model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np

from ..errors import InvalidSpec, NotPicklable
from ._enums import LongText, Pooling, SubwordPooling
from .cpu import cpu_threads
from .cut_said import say_cut_sums
from .engine import MIN_ROWS, Engine, ModelFacts
from .finite import refuse_non_finite
from .folder import model_name, token_limit
from .given import is_vectors, row_ids, single, vector_cosines
from .hf_tokenizer import gives_token_types
from .loading import Loaded, device_kind, load_parts, resolve_device, resolve_dtype
from .model_info import ModelInfo, hidden_size, model_info
from .pooling import word_embeddings
from .progress import progress_callback
from .prompts import PromptsOfFolder
from .results import SentenceEmbeddings, TokenEmbeddings, WordEmbeddings
from .segments import CALL_COST
from .similarity import cos_sim, unit
from .spec import EmbedOptions, EmbedSpec, Recipe, refuse_sentence_options, resolve, whole_number
from .tokens import (
    Text,
    TextTokenizer,
    Tokens,
    check_texts,
    iter_checked,
    one_text_or_pair,
    pad_batch,
    say_cut,
)

if TYPE_CHECKING:
    from pathlib import Path

    import torch
    from tokenizers import Encoding
    from typing_extensions import Unpack

    from .spec import RecipeKeywords, TokenKeywords

__all__ = [
    "CPU_TOKEN_BUDGET", "CUDA_TOKEN_BUDGET", "Encoder", "ModelInfo", "cpu_token_budget", "finished_stream",
    "open_encoder",
]  # fmt: skip

# Padded tokens per forward on the CPU (at least MIN_ROWS rows whatever their width): 512 a thread, from
# CPU_TOKEN_BUDGET (the base budget, 2 threads' and other non-CUDA devices') to CPU_MAX_TOKEN_BUDGET
# (`cpu_token_budget`). On 2 threads smaller batches keep the activations in cache: on a Zen 5 (AVX-512)
# 1024 ran every runtime 1.06-1.20x faster than 2048 (int8 the most), and on a Zen 3 (AVX2) torch ran 1024
# level with 2048 while 512 lost 5%. On a 16-core Xeon 1024 split each forward too thin: 8192 ran OpenVINO
# bfloat16 1.30-1.34x, OpenVINO float32 1.07-1.10x and torch 1.04-1.08x faster than 1024, and 16384 no
# faster (bench/budget_sweep.py; bench/BENCHMARKS.md).
CPU_TOKEN_BUDGET = 1024
CPU_TOKENS_PER_THREAD = 512
CPU_MAX_TOKEN_BUDGET = 8192
CUDA_TOKEN_BUDGET = 65536


def finished_stream(
    chunks: Iterable[SentenceEmbeddings], recipe: Recipe, max_tokens: int
) -> Iterator[SentenceEmbeddings]:
    """A stream's chunks finished by `recipe`, each refused where its vectors are not finite, and the texts
    cut at `max_tokens` said once from running sums (no per-text record) when the stream ends or its loop
    leaves it early (`break`, `islice`: the generator's close): a Model's and a StaticModel's `iter_embed`."""
    done = cut = tokens = 0
    try:
        for chunk in chunks:
            refuse_non_finite(chunk.vectors, start=done, so_far=True)
            dropped = np.asarray(chunk.n_dropped)  # counted once handed on: a refused chunk is not
            cut, tokens = cut + int(np.count_nonzero(dropped > 0)), tokens + int(dropped.sum())
            done += len(dropped)
            yield recipe.finish(chunk)
    finally:  # a loop that stops early closes the generator: the chunks it read are said too
        say_cut_sums(cut, done, tokens, max_tokens)


def cpu_token_budget(threads: int) -> int:
    """The default padded tokens per forward on a CPU running `threads` threads (1,024 on 2, 8,192 on 16)."""
    return min(CPU_MAX_TOKEN_BUDGET, max(CPU_TOKEN_BUDGET, CPU_TOKENS_PER_THREAD * threads))


def _facts(layers: int, hidden: int, vocab_rows: int, has_pooler: bool, type_vocab_size: Any) -> ModelFacts:
    """The engine's facts, from a folder's config or a loaded module's alike (a type_vocab_size of 0 or none:
    the model reads no segment types)."""
    types = int(type_vocab_size) if isinstance(type_vocab_size, int) and type_vocab_size > 0 else None
    return ModelFacts(int(layers), int(hidden), int(vocab_rows), has_pooler, types)


class Encoder:
    """A loaded BERT-family encoder: weights, tokenizer, family adapter, limits and the batched engine.

    Opened light (`loaded.view`: the folder read without torch), its facts come from the folder and the
    PyTorch module is loaded only when a feature needs it (`hf_model`); tests/test_light.py holds every
    answer equal to the module's.
    """

    def __init__(
        self, loaded: Loaded, *, device: torch.device | str, max_tokens: int | None, token_budget: int | None
    ) -> None:
        self.loaded = loaded
        self.family = loaded.family
        self.device = device
        view = loaded.view
        if view is not None and not loaded.has_torch:
            self.pad_id: int = view.pad_id
            self.max_positions = view.max_positions
            tokenizer_max = view.tokenizer_max_length
            backend = view.tokenizer
            types = gives_token_types(view.config, view.tokenizer_config)
            info = view.info() or {}
            facts = _facts(
                info["n_layers"], info["hidden_size"], info["vocab_size"], view.has_pooler,
                view.config.get("type_vocab_size"),
            )  # fmt: skip
        else:
            hf_model = loaded.model
            pad = loaded.tokenizer.pad_token_id
            self.pad_id = int(pad if pad is not None else hf_model.config.pad_token_id or 0)
            self.max_positions = self._usable_positions()
            tokenizer_max = getattr(loaded.tokenizer, "model_max_length", None)
            backend = loaded.tokenizer.backend_tokenizer
            types = "token_type_ids" in loaded.tokenizer.model_input_names
            word = self.family.parts(hf_model).word
            has_pooler = self.family.pooler(hf_model) is not None
            config = hf_model.config
            facts = _facts(
                self.family.num_layers(hf_model), hidden_size(config), word.num_embeddings, has_pooler,
                getattr(config, "type_vocab_size", None),
            )  # fmt: skip
        self.max_tokens = self._token_limit(max_tokens, tokenizer_max)
        # types False: transformers' tokenizer gives no token_type_ids (its model_input_names leave them
        # out), and the model reads segment 0 for every token, a pair's B too
        self.tokenizer = TextTokenizer(backend, max_tokens=self.max_tokens, token_types=types)
        # The fixed cost of a forward (`call_tokens`) stays the one measured at the base budget: the budget
        # sweeps that chose the thread-scaled CPU budget changed the budget alone (bench/budget_sweep.py).
        base_budget = CUDA_TOKEN_BUDGET if self.device_type == "cuda" else CPU_TOKEN_BUDGET
        device_budget = cpu_token_budget(cpu_threads()) if self.device_type == "cpu" else base_budget
        budget = device_budget if token_budget is None else whole_number(token_budget, "token_budget")
        self.engine = Engine(
            lambda: self.loaded.model,
            facts,
            self.family,
            self.tokenizer,
            pad_id=self.pad_id,
            device=device,
            token_budget=budget,
            min_rows=MIN_ROWS if token_budget is None else 1,
            call_tokens=CALL_COST * base_budget,
            light_pooler=(lambda: view.pooler_weights) if view is not None else None,
        )
        if not self.light:
            self.engine.model  # noqa: B018 - warms the hidden-state hooks now, before any caller's hooks
        self.n_layers = facts.n_layers
        self.backend = "torch"
        self.quantize: str | None = None
        # int8 fitted on the caller's own calibration texts: their digest, stored with every output, since
        # the store's settings alone cannot reload that model (None: the shipped texts, or no int8)
        self.calibration_digest: str | None = None
        self.runtime_dtype: str | None = None
        self.mode = "exact"
        self.fast_choice: dict[str, Any] | None = None
        self.exact_choice: dict[str, Any] | None = None

    @property
    def light(self) -> bool:
        """Whether the PyTorch module is not loaded (the folder was opened without it, and nothing asked)."""
        return self.loaded.view is not None and not self.loaded.has_torch

    @property
    def hf_model(self) -> Any:
        """The PyTorch module (transformers' AutoModel), loaded on first use where opened light."""
        return self.loaded.model

    @property
    def config(self) -> Any:
        """The model's config: transformers' where the module is loaded, else the folder's config.json."""
        if self.light:
            assert self.loaded.view is not None
            return self.loaded.view.config_facts
        return self.hf_model.config

    @property
    def device_type(self) -> str:
        """ "cpu" or "cuda" (read without torch where opened light)."""
        return device_kind(self.device)

    @property
    def torch_dtype_name(self) -> str:
        """The PyTorch module's dtype ("float32" where opened light: only float32 opens light)."""
        if self.light:
            return "float32"
        return str(next(self.hf_model.parameters()).dtype).removeprefix("torch.")

    def __repr__(self) -> str:
        return f"<bertscope.Model {self.loaded.source} ({self.family.name}, {self.n_layers} layers)>"

    def __reduce__(self) -> Any:
        """Refused in one line: pickle and copy.deepcopy (and copy.copy) would reach the module's hooks,
        lambdas and locks; a process loads its own model."""
        raise NotPicklable("a Model is not picklable: load it in each process (bertscope.load(...))")

    def use_torch(self) -> None:
        """Run every forward in torch again (the model's own dtype)."""
        self.engine.runner = None
        self.backend, self.quantize, self.runtime_dtype = "torch", None, None
        self.calibration_digest = None

    def _token_limit(self, asked: int | None, tokenizer_max: Any) -> int:
        """The tokens per text: the model's own limit (`token_limit`), or the one asked (an override, as
        sentence-transformers' max_seq_length, past the tokenizer's limit too) if the positions hold it."""
        if asked is None:
            return token_limit(self.max_positions, tokenizer_max, self.loaded.st_max_seq_length)
        if isinstance(asked, bool) or not isinstance(asked, int) or asked < 2:
            raise InvalidSpec(f"max_tokens={asked!r}: give a whole number of at least 2 ([CLS] and [SEP])")
        if asked > self.max_positions:
            raise InvalidSpec(
                f"max_tokens={asked} is over what {self.loaded.source} can take ({self.max_positions} "
                f"positions); use max_tokens<={self.max_positions} and long='window' for longer texts"
            )
        return asked

    def _usable_positions(self) -> int:
        positions = int(getattr(self.hf_model.config, "max_position_embeddings", 512))
        if self.family.positions_after_padding:  # counted from the config's pad id, as the model counts
            positions -= self.family.position_pad(self.hf_model.config) + 1
        return positions

    @cached_property
    def vocab(self) -> dict[str, int]:
        """Word piece -> id."""
        if self.light:
            assert self.loaded.view is not None
            return dict(self.loaded.view.vocab)
        return dict(self.loaded.tokenizer.get_vocab())

    @cached_property
    def id_to_token(self) -> dict[int, str]:
        """Id -> word piece."""
        return {i: t for t, i in self.vocab.items()}

    @cached_property
    def special_ids(self) -> list[int]:
        """Ids of the special tokens ([CLS], [SEP], [PAD], ... or <s>, </s>, <pad>, ...)."""
        if self.light:
            assert self.loaded.view is not None
            return list(self.loaded.view.special_ids)
        return sorted(set(self.loaded.tokenizer.all_special_ids))

    @property
    def input_embeddings(self) -> torch.Tensor:
        """The word-piece embedding matrix (vocab, embedding width)."""
        return self.hf_model.get_input_embeddings().weight

    @property
    def static_shape(self) -> tuple[int, int]:
        """(rows, width) of the input embedding matrix; rows may outnumber the tokenizer's vocabulary."""
        if self.light:
            assert self.loaded.view is not None
            return self.loaded.view.static_shape
        rows, width = self.input_embeddings.shape
        return int(rows), int(width)

    def embedding_rows(self, ids: int | Sequence[int]) -> np.ndarray:
        """(n, width) float32 rows of the input embedding matrix, by id: each a whole number in
        0..rows-1 (`row_ids`: UnknownToken out of range, negative ones too; InvalidInput for another type)."""
        checked = row_ids(ids, self.static_shape[0], tokens=len(self.vocab))
        if self.light:
            assert self.loaded.view is not None
            return self.loaded.view.embedding_rows(checked)
        return self.input_embeddings[checked].detach().float().cpu().numpy()

    def unit_static_matrix(self) -> np.ndarray:
        """The static matrix with unit rows, for cosine neighbours (cached)."""
        if self.light:
            assert self.loaded.view is not None
            return self.loaded.view.unit_static_matrix()
        if not hasattr(self, "_unit"):
            self._unit = unit(self.input_embeddings.detach().float().cpu().numpy())
        return self._unit

    def pieces(self, text: str) -> Encoding:
        """The tokenizer's `Encoding` of `text` without special tokens: its word pieces and their ids."""
        return self.tokenizer.backend.encode(text, add_special_tokens=False)

    def info(self) -> ModelInfo:
        """Family, layers, sizes, vocabulary, limits, special tokens and pooling config."""
        return model_info(self)

    @overload
    def tokenize(self, texts: str, *, long: LongText | str = ...) -> Tokens: ...  # type: ignore[overload-overlap]
    @overload
    def tokenize(self, texts: Iterable[Text], *, long: LongText | str = ...) -> list[Tokens]: ...

    def tokenize(
        self, texts: str | Iterable[Text], *, long: LongText | str = "truncate"
    ) -> Tokens | list[Tokens]:
        """Tokens of a text (or a list of Tokens of texts and (A, B) pairs): pieces, ids, offsets, word ids,
        specials, and n_dropped: the tokens cut past the model's limit (said by the features that embed).

        A pair, given in a list (`[(A, B)]`), reads [CLS] A [SEP] B [SEP] with token type 1 on B where the
        family has token types; a bare tuple (A, B) is refused, as it reads two ways.

        Not sentence-transformers' `model.tokenize(texts)`, which returns the padded features dict: that is
        `batch(texts)` here (input_ids, attention_mask, token_type_ids).
        """
        policy = LongText.parse(long, what="long-text policy")
        items = check_texts(texts, pairs=True)
        tokens = self.tokenizer.encode_fitted(items, policy)
        return tokens[0] if single(texts) else tokens

    def spec(self, **options: Unpack[RecipeKeywords]) -> EmbedSpec:
        """Resolve user options (auto pooling, first_last_avg, defaults, prompt) into an EmbedSpec.

        `options` are `embed`'s (`RecipeKeywords`); a `post` given is checked against the spec.
        """
        return resolve(self, EmbedOptions.given(**options)).spec

    # The folder's prompts until set (`model.prompts = {...}`, as sentence-transformers')
    prompts = PromptsOfFolder()

    def _settings_folder(self) -> Path | None:
        """The folder whose config_sentence_transformers.json gives the prompts and `similarity_fn_name`."""
        return self.loaded.path

    # Contextual vectors -------------------------------------------------------------------------

    def iter_embed(
        self,
        texts: Iterable[str],
        *,
        progress: bool | None = None,
        total: int | None = None,
        **options: Unpack[RecipeKeywords],
    ) -> Iterator[SentenceEmbeddings]:
        """Sentence vectors (n, d) for a stream of texts, chunk by chunk in input order (bounded memory).

        `options` are `embed`'s (layers, combine, pooling, ... prompt: `RecipeKeywords`). Texts cut at the
        model's limit are said once per call, in one `TruncatedTextsWarning`, when the stream ends or the
        loop leaves it early (`break`, `islice`: the generator's close).
        """
        recipe = resolve(self, EmbedOptions.given(**options))
        with progress_callback(total, enabled=progress) as on_batch:
            chunks = self.engine.sentences(iter_checked(texts, pairs=True), recipe.spec, on_batch=on_batch)
            yield from finished_stream(chunks, recipe, self.max_tokens)

    def embed(
        self, texts: str | Iterable[Text], *, progress: bool | None = None, **options: Unpack[RecipeKeywords]
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) float32 for texts (or (A, B) pairs), any layers, any pooling; see `spec`.

        `texts`: a string, or any iterable of strings and (A, B) pairs (a list, a NumPy array, a pandas
        Series, a generator); a pair sits in the list (`[(A, B)]`): a bare tuple (A, B) is refused, as
        it reads two ways. A text cut at the model's limit (long="truncate") is said with a
        `TruncatedTextsWarning` and counted in `n_dropped`.

        `options` (`RecipeKeywords`): layers, combine, pooling, mask_special, normalize, long, stride,
        post, prompt_name, prompt. `post` is a fitted post-processing (whitening, all-but-the-top, PCA) or
        the path of a saved one; `prompt_name` one of the model's own prompts (default: its default one),
        `prompt` the text.
        """
        found = self.embed_with(texts, resolve(self, EmbedOptions.given(**options)), progress=progress)
        refuse_non_finite(found.vectors)
        say_cut(found.n_dropped, self.max_tokens)
        return found

    def embed_with(
        self, texts: str | Iterable[Text], recipe: Recipe, *, progress: bool | None = None
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) for texts or pairs with a recipe already resolved by `spec.resolve`; a cut
        is counted in `n_dropped`, not said (the callers that report it their own way use this)."""
        items = check_texts(texts, pairs=True)
        with progress_callback(len(items), enabled=progress) as on_batch:
            return recipe.finish(self.engine.sentences_once(items, recipe.spec, on_batch=on_batch))

    def similarity(
        self,
        a: str | Sequence[str] | np.ndarray | Any,
        b: str | Sequence[str] | np.ndarray | Any = None,
        **options: Unpack[RecipeKeywords],
    ) -> np.ndarray:
        """Cosine matrix (len(a), len(b)) of sentence vectors with `embed`'s options; b defaults to a.

        As sentence-transformers' `model.similarity`, `a` and `b` may be vectors already made instead of
        texts: (n, d) and (m, d), or (d,) for one, give their (n, m) cosines. Vectors are any array-like:
        a NumPy array, a torch tensor (`encode(..., convert_to_tensor=True)`; read detached, on the CPU),
        a list of rows or of (d,) tensors, a `SentenceEmbeddings`. The answer is always a NumPy float32
        array, tensors given or not (sentence-transformers answers a tensor: `torch.from_numpy` it).
        """
        if is_vectors(a) or is_vectors(b):
            return vector_cosines(a, b, options)
        recipe = resolve(self, EmbedOptions.given(**options))
        left = self.embed_with(cast("str | Iterable[Text]", a), recipe)
        right = left if b is None else self.embed_with(cast("str | Iterable[Text]", b), recipe)
        refuse_non_finite(left.vectors)
        refuse_non_finite(right.vectors)
        say_cut(np.concatenate([left.n_dropped] + ([] if b is None else [right.n_dropped])), self.max_tokens)
        return cos_sim(left.vectors, right.vectors)

    def embed_tokens(
        self,
        texts: str | Iterable[Text],
        *,
        progress: bool | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        **options: Unpack[TokenKeywords],
    ) -> list[TokenEmbeddings]:
        """A list of TokenEmbeddings, one per text (or pair), a one-item list for a str: tokens, offsets and
        vectors (tokens, d) of the chosen layers, pad trimmed.

        `options` (`TokenKeywords`): layers, combine, long, stride, as `embed`'s; combine="stack" keeps
        each layer apart: vectors (tokens, layers, d), in the order of `layers`. The vectors are those of
        the prompted text, as TEI's /embed_all answers them: `prompt_name` picks one of the model's prompts
        as `embed` takes it (default: its default prompt, if any), or `prompt` gives the text ("" for none,
        the text as given, as a token store keeps it), and the prompt's tokens come first. The options
        that only a sentence vector reads (pooling, mask_special, normalize, post) are refused.
        """
        items = check_texts(texts, pairs=True)
        spec = self._unpooled_spec(options, "token vectors", prompt_name, prompt)
        found = self.token_vectors(items, spec, progress)
        refuse_non_finite([t.vectors for t in found])
        say_cut([t.n_dropped for t in found], self.max_tokens, "long='window' keeps every token")
        return found

    def _unpooled_spec(
        self, options: TokenKeywords, rows: str, prompt_name: str | None = None, prompt: str | None = None
    ) -> EmbedSpec:
        """The spec of vectors that are not pooled into sentences (`rows`): a sentence-only option is
        refused (the rule the tokens and words levels follow), the rest resolved with mean pooling and the
        prompt `prompt_name` names or `prompt` gives (both None: the model's default prompt, if any; "":
        none), which the vectors are of."""
        asked = EmbedOptions.given(**options)
        refuse_sentence_options(asked, rows)
        chosen = replace(asked, pooling=Pooling.MEAN, prompt_name=prompt_name, prompt=prompt)
        return resolve(self, chosen).spec

    def token_vectors(
        self, items: list[Any], spec: EmbedSpec, progress: bool | None = None
    ) -> list[TokenEmbeddings]:
        """Token vectors of checked texts (or pairs, `check_texts`) with a resolved spec, its prompt too."""
        with progress_callback(len(items), enabled=progress) as on_batch:
            found = self.engine.token_matrices(items, spec, on_batch=on_batch)
            return [TokenEmbeddings.of(t, m, spec.as_dict()) for t, m in found]

    def embed_fitted_tokens(self, tokens: Sequence[Tokens], spec: EmbedSpec) -> list[TokenEmbeddings]:
        """`embed_tokens` of Tokens already through `engine.prepare` with `spec` (tokenized once)."""
        found = self.engine.fitted_token_matrices(tokens, spec)
        return [TokenEmbeddings.of(t, m, spec.as_dict()) for t, m in found]

    def embed_words(
        self,
        texts: str | Iterable[str],
        *,
        subword: SubwordPooling | str = "mean",
        progress: bool | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        **options: Unpack[TokenKeywords],
    ) -> list[WordEmbeddings]:
        """A list of WordEmbeddings, one per text, a one-item list for a str: words (from the tokenizer's
        word ids), char spans, and word vectors: their pieces' vectors (`embed_tokens` with `options`,
        `prompt_name` and `prompt`, the prompt's words first) pooled by `subword`. A piece of whitespace
        alone (a byte-level BPE's line break or second space) is no word. `progress` as `embed`'s."""
        how = SubwordPooling.parse(subword, what="subword pooling")
        items = check_texts(texts)  # words index into one text: pairs are not taken here
        spec = self._unpooled_spec(options, "word vectors", prompt_name, prompt)
        found = self.token_vectors(items, spec, progress)
        refuse_non_finite([t.vectors for t in found])
        say_cut([t.n_dropped for t in found], self.max_tokens)
        return [word_embeddings(tok, how) for tok in found]

    def hidden_states(self, text: Text, *, long: LongText | str = "truncate") -> np.ndarray:
        """(L+1, tokens, d) every layer's token vectors for one text or pair: 0 is the embedding output."""
        if not one_text_or_pair(text):
            raise InvalidSpec("hidden_states takes one text (or one (A, B) pair); use embed_tokens for many")
        spec = self._unpooled_spec({"layers": "all", "combine": "concat", "long": long}, "hidden states")
        tok = self.token_vectors(check_texts([text], pairs=True), spec)[0]
        refuse_non_finite([tok.vectors])
        say_cut([tok.n_dropped], self.max_tokens)
        width = tok.vectors.shape[1] // (self.n_layers + 1)
        return tok.vectors.reshape(len(tok.tokens), self.n_layers + 1, width).transpose(1, 0, 2).copy()

    def calibration_batches(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(ids, type_ids, mask) per batch of 8 texts, truncated and padded as the engine does."""
        tokens = self.tokenize(list(texts))
        batches = []
        for start in range(0, len(tokens), 8):
            part = tokens[start : start + 8]
            ids, mask = pad_batch([t.ids for t in part], self.pad_id)
            type_ids, _ = pad_batch([t.token_type_ids for t in part], 0)
            batches.append((ids, type_ids, mask))
        return batches


def stderr(message: str) -> None:
    """One line on stderr, flushed (the backends' build logs)."""
    print(message, file=sys.stderr, flush=True)


def open_encoder(
    name: str | os.PathLike[str] | None = None,
    *,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "float32",
) -> Encoder:
    """The torch Encoder `bertscope.load(name, dtype=dtype, backend="torch")` makes (None: BERTSCOPE_MODEL
    or the bundled model).

    For the modules below the facade that take a model by name (corpus jobs, distillation, the mode
    measurements); `load` adds the backends and modes on top.
    """
    name = model_name(name)
    torch_device = resolve_device(device)
    loaded = load_parts(name, dtype=resolve_dtype(dtype, torch_device), device=torch_device)
    return Encoder(loaded, device=torch_device, max_tokens=None, token_budget=None)
