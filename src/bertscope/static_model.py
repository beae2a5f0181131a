"""A static model: a model2vec folder (what `bertscope distill` writes) loaded as a sentence embedder.

One vector per word piece and no layers: a text's vector is the mean of its pieces' rows, as
`model2vec.StaticModel.encode` computes it (the same pieces, the same truncation, the same arithmetic in
the folder's own dtype, unit length where its config says `normalize`). `load()` returns a
`StaticModel` for such a folder; it answers the sentence-level surface of `Model` (embed, iter_embed,
similarity, encode, tokenize, info, static rows) through the same spec, recipe and post-processing, and
refuses every layer-level feature in one line. sentence-transformers' names (encode_query,
encode_document, similarity_pairwise, get_embedding_dimension, similarity_fn_name) answer as a
`SentenceTransformer` over a `StaticEmbedding` of the folder does (a prompt is text put before each text,
its pieces counted in the mean, as there), and so do its setters truncate_dim, default_prompt_name,
similarity_fn_name (read from the folder's config_sentence_transformers.json; `similarity` of vectors and
similarity_pairwise follow it, texts are scored by cosine) and prompts (core/st_attributes.py, shared with
`Model`); max_seq_length is the cut model2vec makes. The
refusals are left out of what a type checker sees, so `load(folder).embed_tokens(...)` is flagged before it
runs.
NumPy, tokenizers and safetensors only: no torch.

    folder/config.json         {"model_type": "model2vec", "normalize": ..., "max_length": ...}
    folder/tokenizer.json      the tokenizers' pipeline, used without specials
    folder/model.safetensors   "embeddings" (vocabulary, d); optional "weights" (vocabulary,), "mapping"
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import encode as _st
from . import static as _static
from .core._enums import LongText
from .core.encoder import ModelInfo, finished_stream
from .core.finite import refuse_non_finite
from .core.given import is_vectors, row_ids
from .core.loading import is_model2vec
from .core.progress import progress_callback
from .core.prompts import PromptsOfFolder
from .core.results import SentenceEmbeddings
from .core.similarity import cos_sim, unit
from .core.spec import EmbedOptions, EmbedSpec, Recipe, resolve
from .core.st_attributes import SentenceTransformersAttributes
from .core.texts_given import is_pair, text_items
from .core.tokens import TextTokenizer, check_texts, iter_checked, say_cut
from .errors import InvalidInput, InvalidSpec, ModelLoadError
from .static_engine import StaticEngine

if TYPE_CHECKING:
    from tokenizers import Encoding
    from typing_extensions import Unpack

    from .core.spec import RecipeKeywords
    from .verify.fingerprint import FingerprintCheck

__all__ = ["StaticModel", "is_model2vec", "load_static"]

_DEFAULT_MAX_LENGTH = 512  # model2vec's, where a config names none
_INSTEAD = "embed, similarity, encode or static rows of it, or the model it was distilled from ({origin})"
# What a static model has not got, for `info()`.
_LACKS = ["layers", "position", "token_type", "layernorm", "attention", "contextual token vectors"]
# Load options that choose how a forward runs; a static model runs none. Only the defaults (and the
# values its own stores record) are taken.
_NEUTRAL = {
    "dtype": {"float32", "torch.float32"},
    "backend": {"auto", "numpy"},
    "quantize": {"None", "none"},
    "mode": {"exact"},
    "device": {"auto", "cpu", "None"},
    "calibration": {"None"},
    "fast_min_cosine": {"None"},
    "remeasure": {"False"},
}


def load_static(
    name: str | os.PathLike[str],
    *,
    max_tokens: int | None = None,
    token_budget: int | None = None,
    **options: Any,
) -> StaticModel:
    """The model2vec folder `name` as a StaticModel; `options` (load's dtype, backend, quantize, mode,
    device, calibration, fast_min_cosine, remeasure, trust_remote_code) are refused unless they are the
    defaults: nothing runs a forward."""
    for key, value in options.items():
        shown = str(getattr(value, "value", value))
        if key == "trust_remote_code" and not value or shown in _NEUTRAL.get(key, ()):
            continue
        shown = shown if len(shown) <= 40 else shown[:37] + "..."  # calibration= is a list of texts
        # a text quoted, as Python writes it: the command line then says it as its flag (--dtype bfloat16)
        said = repr(shown) if isinstance(getattr(value, "value", value), str) else shown
        raise InvalidSpec(
            f"{name} is a static model (model2vec): {key}={said} does not apply, there is no forward "
            "to run; leave it out"
        )
    return StaticModel(Path(name), max_tokens=max_tokens, token_budget=token_budget)


def _refused(feature: str, *, plural: bool = False) -> Callable[..., Any]:
    def refuse(self: StaticModel, *args: Any, **options: Any) -> Any:
        raise self.refusal(feature, plural=plural)

    refuse.__doc__ = f"Refused: a static model has no layers ({feature})."
    return refuse


class MissingModule(InvalidSpec, AttributeError):
    """A static model's refusal of its (absent) transformer module: one line, and an AttributeError."""


class StaticModel(SentenceTransformersAttributes):
    """A model2vec folder: (vocabulary, d) rows and a tokenizer; sentence vectors are row means."""

    n_layers = 0
    family_name = "model2vec"
    mode = "exact"  # as `Model.mode`: a static model has no fast mode to choose

    def __init__(
        self, folder: Path, *, max_tokens: int | None = None, token_budget: int | None = None
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.path = folder.resolve()
        self.source = str(folder)
        try:
            self.settings: dict[str, Any] = json.loads((folder / "config.json").read_text("utf-8"))
            tensors = load_file(str(folder / "model.safetensors"))
            backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # noqa: BLE001 - json, safetensors and tokenizers each raise their own kinds
            raise ModelLoadError(
                f"{folder} is a model2vec folder but cannot be read ({type(exc).__name__}: {exc}); "
                "it needs config.json, tokenizer.json and model.safetensors: distil it again"
            ) from None
        if "embeddings" not in tensors:
            raise ModelLoadError(f"{folder}/model.safetensors holds no 'embeddings' matrix: distil it again")
        self.normalize = bool(self.settings.get("normalize", False))
        limit = self.settings.get("max_length", _DEFAULT_MAX_LENGTH)
        max_length: int | None = max_tokens or (None if limit is None else int(limit))
        self.engine = StaticEngine(
            backend, tensors, max_length=max_length, token_budget=token_budget, refusal=self.refusal
        )
        self.rows = self.engine.rows
        self.id_to_token = self.engine.id_to_token
        self.max_tokens = max_length or len(self.id_to_token)
        self.tokenizer = TextTokenizer(backend, max_tokens=self.max_tokens)
        self.loaded = SimpleNamespace(
            source=self.source, path=self.path, st_pooling="mean", st_normalize=self.normalize,
            st_unsupported=None, view=None, has_torch=False,
        )  # fmt: skip
        self.config = SimpleNamespace(model_type="model2vec", num_attention_heads=0)
        self.pad_id = 0
        self._unit: np.ndarray | None = None
        self.device = "cpu"
        # read now, as Model's load and sentence-transformers do: a bad name in the folder is refused here
        self.similarity_fn_name  # noqa: B018

    def __repr__(self) -> str:
        return f"StaticModel({self.source!r}, rows={self.rows.shape}, normalize={self.normalize})"

    # What it is -------------------------------------------------------------------------------------

    @property
    def origin(self) -> str:
        """The model it was distilled from, as its config records it."""
        return str(self.settings.get("tokenizer_name") or "unknown")

    def refusal(self, feature: str, *, plural: bool = False) -> InvalidSpec:
        """The one line for a feature a static model has not got (`plural`: "token vectors need")."""
        verb = "need" if plural else "needs"
        return InvalidSpec(
            f"{self.source} is a static model (model2vec) with no layers: {feature} {verb} a transformer; "
            f"use {_INSTEAD.format(origin=self.origin)}"
        )

    def info(self) -> ModelInfo:
        """family "model2vec", n_layers 0, the rows' width and count, and what a static model lacks."""
        return ModelInfo(
            source=self.source, path=str(self.path), family=self.family_name, model_type="model2vec",
            n_layers=0, hidden_size=int(self.rows.shape[1]), embedding_size=int(self.rows.shape[1]),
            vocab_size=len(self.id_to_token), max_positions=self.max_tokens, max_tokens=self.max_tokens,
            special_tokens={}, pooling="mean", normalize=self.normalize, lacks=list(_LACKS),
            positions_in_attention=None, device="cpu", dtype="float32", backend="numpy",
            exact={"static": True, "distilled_from": self.origin},
        )  # fmt: skip

    # The folder's prompts until set (model2vec folders have none), as Model's
    prompts = PromptsOfFolder()

    @property
    def hf_model(self) -> Any:
        """Refused: there is no transformer module (attention, exports and the anatomy read it).

        The refusal is also an AttributeError, so `hasattr(m, "hf_model")` is False, as for any
        attribute an object has not got."""
        error = self.refusal("the transformer module (attention, anatomy, exports)")
        raise MissingModule(str(error))

    @property
    def input_embeddings(self) -> np.ndarray:
        """(vocabulary rows, d) the static matrix."""
        return self.rows

    # Tokens --------------------------------------------------------------------------------------

    def tokenize(self, texts: str | Sequence[str], *, long: LongText | str = "truncate") -> Any:
        """Tokens (no specials, [UNK] left out) of a text or of each text: the pieces whose rows average."""
        policy = LongText.parse(long, what="long-text policy")
        tokens = self.engine.pieces_of(check_texts(self._unpaired(texts)), whole=policy is LongText.WINDOW)
        return tokens[0] if isinstance(texts, str) else tokens

    def _unpaired(self, texts: object) -> Any:
        """`texts` as given, an (A, B) pair among them refused in the static model's own line as it is
        reached: a mean of rows has no segment for B (without this, "text 0 is a tuple, not a string")."""
        if isinstance(texts, str):
            return texts
        for_each = text_items(texts)  # a set, bytes, a 2-D array ... refused as check_texts refuses them
        return (self._no_pair(text) for text in for_each)

    def _no_pair(self, text: object) -> object:
        if is_pair(text):
            raise InvalidInput(
                f"{self.source} is a static model (model2vec): it takes no text pairs (--pair, (A, B)): its "
                "vector is a mean of rows, with no segment for B; give single texts"
            )
        return text

    # Sentence vectors ----------------------------------------------------------------------------

    def checked_options(self, options: EmbedOptions) -> EmbedOptions:
        """`options` as given; a layer other than the rows refused in the static model's one line, before
        a layer parser that knows only that layers are 0..0 (the command line resolves options itself)."""
        if options.layers not in (None, 0, -1, "0", "-1"):
            raise self.refusal(f"layers={options.layers!r}")
        return options

    def _recipe(self, options: RecipeKeywords) -> Recipe:
        """The options resolved as for a Model; a layer other than the rows is refused in the one line."""
        return resolve(self, self.checked_options(EmbedOptions.given(**options)))

    def pieces(self, text: str) -> Encoding:
        """The tokenizer's `Encoding` of `text` without special tokens, never cut."""
        return self.engine.pieces(text)

    def spec(self, **options: Unpack[RecipeKeywords]) -> EmbedSpec:
        """The options resolved as for `Model.spec` (layers resolve to the rows, layer 0)."""
        spec = self._recipe(options).spec
        self.engine.checked(spec)
        return spec

    def embed(
        self, texts: str | Sequence[str], *, progress: bool | None = None, **options: Unpack[RecipeKeywords]
    ) -> SentenceEmbeddings:
        """(n, d) float32: the mean of each text's rows (unit length if normalize); `Model.embed`'s options
        where they apply (normalize, long, post); other poolings and layers are refused. A text cut at
        max_length (long="truncate") is said with a `TruncatedTextsWarning` and counted in `n_dropped`."""
        found = self.embed_with(texts, self._recipe(options), progress=progress)
        refuse_non_finite(found.vectors)  # rows a float16 folder overflowed, as Model.embed refuses them
        say_cut(found.n_dropped, self.max_tokens)
        return found

    def embed_with(
        self, texts: str | Sequence[str], recipe: Recipe, *, progress: bool | None = None
    ) -> SentenceEmbeddings:
        """Sentence vectors (n, d) with a recipe already resolved; a cut is counted in `n_dropped`, not said
        (the callers that report it their own way use this)."""
        items = check_texts(self._unpaired(texts))
        with progress_callback(len(items), enabled=progress) as on_batch:
            return recipe.finish(self.engine.sentences_once(items, recipe.spec, on_batch=on_batch))

    def iter_embed(
        self,
        texts: Iterable[str],
        *,
        progress: bool | None = None,
        total: int | None = None,
        **options: Unpack[RecipeKeywords],
    ) -> Iterator[SentenceEmbeddings]:
        """Sentence vectors for a stream of texts, chunk by chunk in input order; a cut said once, as
        `Model.iter_embed` says it (when the stream ends or the loop leaves it early)."""
        recipe = self._recipe(options)
        with progress_callback(total, enabled=progress) as on_batch:
            checked = iter_checked(self._unpaired(texts))
            chunks = self.engine.sentences(checked, recipe.spec, on_batch=on_batch)
            yield from finished_stream(chunks, recipe, self.max_tokens)

    def similarity(
        self,
        a: str | Sequence[str] | np.ndarray | None = None,
        b: str | Sequence[str] | np.ndarray | None = None,
        *,
        embeddings1: Any = None,
        embeddings2: Any = None,
        **options: Unpack[RecipeKeywords],
    ) -> np.ndarray:
        """Cosine matrix (len(a), len(b)) of texts' sentence vectors (b defaults to a); of vectors already
        made, sentence-transformers' `similarity`: by the model's function.

        As `Model.similarity` (and sentence-transformers'), `a` and `b` may be vectors already made: float
        arrays (n, d) and (m, d), or (d,) for one, give their (n, m) scores by `similarity_fn_name` (the
        folder's config_sentence_transformers.json: cosine where it names none; dot product, or negative
        euclidean or manhattan distance), as sentence-transformers computes them. Texts are always scored
        by cosine, as `Model.similarity` scores them. `embeddings1=` and `embeddings2=`,
        sentence-transformers' names, are `a` and `b`.
        """
        a, b = _st.similarity_operands(a, b, embeddings1, embeddings2)
        if is_vectors(a) or is_vectors(b):  # torch tensors and other array-likes too, as Model's
            # Model.similarity's own helper, so both refuse a bad array and stray options alike
            return _st.vector_similarity(self.similarity_fn_name, a, b, options)
        recipe = self._recipe(options)
        left = self.embed_with(cast("str | Sequence[str]", a), recipe)
        right = left if b is None else self.embed_with(cast("str | Sequence[str]", b), recipe)
        refuse_non_finite(left.vectors)
        refuse_non_finite(right.vectors)
        say_cut(np.concatenate([left.n_dropped] + ([] if b is None else [right.n_dropped])), self.max_tokens)
        return cos_sim(left.vectors, right.vectors)

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
    ) -> Any:
        """sentence-transformers' `encode` where a static model has it: (d,) for a str, (n, d) float32 for a
        list, as NumPy; `Model.encode`'s checks (bertscope.encode), its keywords of sentence-transformers'
        that bertscope has no use for (task, pool, ...) refused by name. A prompt is put before each text
        and its pieces count in the mean, as in StaticEmbedding. Token embeddings and torch tensors are
        refused in one line."""
        if output_value == "token_embeddings":
            raise self.refusal("encode(output_value='token_embeddings')")
        if convert_to_tensor or not convert_to_numpy:
            raise InvalidSpec(
                f"{self.source} is a static model (model2vec): encode gives NumPy arrays, there is no torch "
                "here; leave convert_to_tensor and convert_to_numpy out (torch.from_numpy converts them)"
            )
        return _st.encode(
            self, sentences, prompt_name=prompt_name, prompt=prompt, batch_size=batch_size,
            show_progress_bar=show_progress_bar, output_value=output_value, precision=precision,
            convert_to_numpy=True, convert_to_tensor=False, device=device,
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
    ) -> Any:
        """sentence-transformers' `encode_query`, as `Model.encode_query`: `encode` with the folder's "query"
        prompt where none is named, else none (never its default prompt); the other arguments are `encode`'s,
        in its order or by name."""
        return _st.encode_role(self, _st.QUERY_PROMPTS, sentences, prompt_name, prompt, options, positional)

    def encode_document(
        self,
        sentences: str | Sequence[str] | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
        *positional: Any,
        **options: Any,
    ) -> Any:
        """sentence-transformers' `encode_document`, as `Model.encode_document`: `encode` with the folder's
        "document" prompt where none is named, else none; the other arguments are `encode`'s, in its order
        or by name."""
        names = _st.DOCUMENT_PROMPTS
        return _st.encode_role(self, names, sentences, prompt_name, prompt, options, positional)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> np.ndarray:
        """sentence-transformers' `similarity_pairwise`: (n,) similarity of row i with row i of two (n, d)
        arrays (or (d,) for one) by `similarity_fn_name`, as NumPy float32 (sentence-transformers answers a
        tensor)."""
        return _st.similarity_pairwise(embeddings1, embeddings2, self.similarity_fn_name)

    def _settings_folder(self) -> Path | None:
        """The folder whose config_sentence_transformers.json gives the prompts and `similarity_fn_name`."""
        return self.path

    @property
    def max_seq_length(self) -> int | float:
        """The pieces a text's mean reads (`max_tokens`: the folder's max_length, as model2vec cuts);
        math.inf where the folder sets none, as sentence-transformers' StaticEmbedding (which never cuts)
        answers. Set when loading."""
        return math.inf if self.engine.max_length is None else int(self.max_tokens)

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        raise _st.max_seq_length_refusal(value)

    # Static rows ---------------------------------------------------------------------------------

    @cached_property
    def vocab(self) -> dict[str, int]:
        """Piece -> id."""
        return {token: i for i, token in self.id_to_token.items()}

    @property
    def static_shape(self) -> tuple[int, int]:
        """(vocabulary, d)."""
        return len(self.id_to_token), int(self.rows.shape[1])

    @cached_property
    def special_ids(self) -> list[int]:
        """Ids of the tokenizer's special tokens ([PAD], [UNK], ...)."""
        added = self.tokenizer.backend.get_added_tokens_decoder()
        return sorted(i for i, token in added.items() if token.special)

    def embedding_rows(self, ids: Sequence[int]) -> np.ndarray:
        """(len(ids), d) float32 rows, mapped and weighted as the means read them; ids checked as
        `Model.embedding_rows` checks them (UnknownToken out of range, never counted from the end)."""
        return self.engine.rows_of(row_ids(ids, len(self.id_to_token))).astype(np.float32)

    def unit_static_matrix(self) -> np.ndarray:
        """(vocabulary, d) every row at unit length (for neighbours), made once."""
        if self._unit is None:
            self._unit = unit(self.embedding_rows(list(self.id_to_token)))
        return self._unit

    def static_ids(self, items: str | int | Sequence[str | int]) -> list[int]:
        """Ids of word pieces or ids, each checked against the vocabulary."""
        return _static.token_ids(self, items)

    def static(self, items: str | int | Sequence[str | int]) -> np.ndarray:
        """(n, d) float32 rows of word pieces or ids."""
        return _static.static_rows(self, items)

    def static_word(self, word: str) -> _static.StaticWord:
        """One vector for a word: the mean of its pieces' rows, with the pieces."""
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
        cosine of rows (special ones left out by default)."""
        return _static.neighbors(self, query, top_k=top_k, include_special=include_special, k=k)

    def export_static(
        self,
        path: str | Path,
        *,
        format: str | None = None,
        items: Sequence[str | int] | None = None,
        overwrite: bool = False,
    ) -> list[Path]:
        """Write the rows of `items` (default: every row) as word2vec, npy, parquet or projector; a file it
        would write that exists is refused unless `overwrite=True`."""
        return _static.export(self, path, format, items=items, overwrite=overwrite)

    def verify(self, *, against: dict[str, Any] | str | Path | None = None) -> FingerprintCheck:
        """Each difference from a fingerprint (a dict or file from `bertscope.verify.save_fingerprint`):
        its files and its rows' canaries. Without `against`, refused in one line: a static model has no
        Hugging Face forward to be compared with."""
        from .verify import check_fingerprint
        from .verify.fingerprint import fingerprint_given
        from .verify.reference import static_refusal

        if against is None:
            raise static_refusal(self)
        fingerprint_given(against, "against")  # named as the caller named it, as Model.verify does
        return check_fingerprint(self, against)

    # Refused: a static model has no layers -------------------------------------------------------
    # Only at run time: a type checker sees no such methods, so `load(...)` (Model | StaticModel) needs
    # narrowing to Model before them.

    if not TYPE_CHECKING:
        embed_tokens = _refused("token vectors (embed_tokens, --tokens)", plural=True)
        embed_fitted_tokens = _refused("token vectors", plural=True)
        embed_words = _refused("word vectors (embed_words, --level words)", plural=True)
        embed_chunks = _refused("chunk vectors (embed_chunks, --chunks)", plural=True)
        hidden_states = _refused("hidden states", plural=True)
        anatomy = _refused("the embedding layer's anatomy")
        attentions = _refused("attention")
        forward = _refused("a forward pass")
        probe = _refused("probing layers")
        cka = _refused("CKA between layers")
        geometry = _refused("layer geometry")
        explain = _refused("explain (token-pair contributions)")
        baseline = _refused("a baseline of random pairs")
        static_from_corpus = _refused("contextual vectors aggregated over a corpus", plural=True)
        static_decontextualized = _refused("decontextualized vectors", plural=True)
        token_vectors = _refused("token vectors", plural=True)
        structural_probe = _refused("structural probes", plural=True)
        batch = _refused("a padded batch for a forward (batch)")
        use_torch = _refused("another runtime (use_torch)")
        use_onnxruntime = _refused("another runtime (use_onnxruntime)")
        use_openvino = _refused("another runtime (use_openvino)")
        add_tokens = _refused("new tokens with rows initialised for a transformer (add_tokens)", plural=True)
        save = _refused("save as a transformers folder (it is a model2vec folder already: copy it)")
