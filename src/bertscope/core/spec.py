"""Options -> a resolved spec with its post-processing and provenance; every entry point resolves here, once.

    EmbedOptions  what a caller asks for (layers, combine, pooling, ..., post), not yet checked
    EmbedSpec     the same resolved against one model: absolute layers, a concrete pooling, a bool normalize
    Recipe        an EmbedSpec with its checked post-processing: applies it and says what to record

The library (`Model.embed`), corpus jobs, the Ray runner, search and the service all call `resolve`;
nothing else turns options into a spec.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np

from ..errors import BertscopeError, InvalidSpec, UnknownOption
from ._enums import Combine, LongText, Pooling
from .layers import LayerSpec, parse_layers
from .post import PostProcessor, apply_post, prepare_post
from .prompts import Prompts, prompt_length
from .results import SentenceEmbeddings

if TYPE_CHECKING:
    from .tokens import TextTokenizer

__all__ = [
    "EmbedOptions",
    "EmbedSpec",
    "Recipe",
    "auto_refusal",
    "PostArg",
    "resolve",
    "resolve_spec",
    "unnormalized_own_pooling",
    "reload_arg",
    "stored_settings",
    "SPEC_KEYS",
    "SENTENCE_OPTIONS",
    "refuse_sentence_options",
    "whole_number",
    "unknown_option",
    "named_elsewhere",
]

# A post-processing as callers give it: a fitted processor, the path of a saved one, or none.
PostArg = PostProcessor | str | Path | None

SPEC_KEYS = ("layers", "combine", "pooling", "mask_special", "normalize", "long", "stride")

# What only a sentence vector reads: its pooling and what pools, its normalisation and post-processing,
# its prompt. Token and word vectors (embed_tokens, embed_words, the tokens and words levels) read none.
SENTENCE_OPTIONS = ("pooling", "mask_special", "normalize", "post", "prompt_name", "prompt")


class Encoder(Protocol):
    """What resolving needs of core/encoder.py's Encoder (typed structurally: the Encoder imports this)."""

    loaded: Any
    engine: Any
    tokenizer: TextTokenizer
    n_layers: int

    @property
    def prompts(self) -> Prompts: ...

    def info(self) -> Any: ...


@dataclass(frozen=True)
class EmbedSpec:
    """A fully resolved request: absolute layers, how they combine, pooling and normalisation."""

    layers: tuple[int, ...]
    combine: Combine = Combine.MEAN
    pooling: Pooling = Pooling.MEAN
    mask_special: bool = False
    normalize: bool = False
    long: LongText = LongText.TRUNCATE
    stride: int | None = None
    # The prompt put before every text, and how many leading tokens ([CLS] + the prompt's pieces) pooling
    # leaves out: 0 where the model's Pooling config includes the prompt.
    prompt_name: str | None = None
    prompt: str = ""
    prompt_length: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able settings for provenance (the prompt keys only where a prompt is used)."""
        plain = {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(self).items()}
        if not self.prompt:
            for key in ("prompt_name", "prompt", "prompt_length"):
                plain.pop(key)
        return plain


@dataclass(frozen=True)
class EmbedOptions:
    """Embedding options as a caller gives them (library, CLI, service, corpus job), before resolution."""

    layers: LayerSpec | None = None
    combine: Combine | str = Combine.MEAN
    pooling: Pooling | str = Pooling.AUTO
    mask_special: bool = False
    normalize: bool | None = None
    long: LongText | str = LongText.TRUNCATE
    stride: int | None = None
    post: PostArg = field(default=None, compare=False)
    prompt_name: str | None = None
    prompt: str | None = None

    def __post_init__(self) -> None:
        # None (`RecipeKeywords` takes it) is the default, as leaving the option out: the model's own
        # pooling, the mean of the layers, truncation
        for name, default in (
            ("pooling", Pooling.AUTO),
            ("combine", Combine.MEAN),
            ("long", LongText.TRUNCATE),
        ):
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)

    @classmethod
    def given(cls, **options: Any) -> EmbedOptions:
        """The options a caller passed as keywords; a name that is none of them is UnknownOption."""
        names = [f.name for f in fields(cls)]
        unknown = [name for name in options if name not in names]
        if unknown:
            raise unknown_option(unknown[0], names)
        return cls(**options)

    @classmethod
    def from_settings(cls, settings: dict[str, Any], *, post: PostArg = None) -> EmbedOptions:
        """The options that reproduce a stored output's settings (its recorded, resolved spec)."""
        given = {key: settings[key] for key in SPEC_KEYS if key in settings}
        if "layers" in given:
            given["layers"] = list(given["layers"])
        if given.get("pooling") == Pooling.FIRST_LAST_AVG.value:
            given.pop("layers", None)  # first_last_avg picks its layers itself
        if len(given.get("layers", ())) == 1 and given.get("combine") in (Combine.SUM, Combine.CONCAT):
            # Recorded before that was refused: summing or joining one layer changed no vector.
            given.pop("combine")
        if given.get("long", LongText.TRUNCATE) != LongText.WINDOW:
            # A stride recorded beside another policy (before that was refused) changed no vector.
            given.pop("stride", None)
        return cls(**given, post=post)

    def with_post(self, post: PostArg) -> EmbedOptions:
        """The same options with another post-processing."""
        return replace(self, post=post)


class TokenKeywords(TypedDict, total=False):
    """The recipe's options for vectors that are not pooled: what `embed_tokens`, `embed_words` and the
    word-row aggregations take as `**options` (pooling, normalisation and prompts are `RecipeKeywords`')."""

    layers: LayerSpec | None
    combine: Combine | str | None
    long: LongText | str | None
    stride: int | None


class QueryKeywords(TypedDict, total=False):
    """The recipe's options a query sets on top of a store's own recipe (`search`): post and prompt."""

    post: PostArg
    prompt_name: str | None
    prompt: str | None


class RecipeKeywords(TokenKeywords, QueryKeywords, total=False):
    """EmbedOptions as keywords: what `Model.embed`, `similarity`, `explain`, ... take as `**options`.

    One type spells the recipe's options out; a signature takes `**options: Unpack[RecipeKeywords]` and
    passes them on (`EmbedOptions(**options)`), so a new option is added here and in EmbedOptions only.
    """

    pooling: Pooling | str | None
    mask_special: bool
    normalize: bool | None


def refuse_sentence_options(options: EmbedOptions, rows: str) -> None:
    """Refuse the sentence-only options `options` gives (any not left at its default: pooling auto,
    normalize None, ...) for vectors that are not pooled into sentences, named by `rows`: they would be
    ignored without a word."""
    unset = EmbedOptions()
    given = [name for name in SENTENCE_OPTIONS if getattr(options, name) != getattr(unset, name)]
    if given:
        asked = ", ".join(given)
        raise InvalidSpec(f"{rows} are not pooled, so {asked} would be ignored: leave {asked} out")


# Hints that several names share: a narrower width, and what a text over the limit does.
_FULL_WIDTH = (
    "load and embed keep the model's full width: slice result.vectors[:, :N], or use "
    "encode(..., truncate_dim=N), or set model.truncate_dim = N after loading for every encode (a PCA "
    "fitted to N dimensions is embed's post=)"
)
_LONG = "long= says what a text over the limit does (truncate, window, error)"

# A chunk's size and overlap: Model.embed_chunks, /v2/embed_chunks and the corpus job name them
# chunk_size and chunk_overlap (size and overlap were embed_chunks' old names). Then the names
# sentence-transformers and transformers users bring, each with what bertscope offers instead: to the
# embed methods and to bertscope.load alike (model/loader.py), so each hint reads true from either.
_MODEL_ARGUMENT = "the model is bertscope.load's first argument, name=: bertscope.load('FOLDER or hub id')"
_NAMED_ELSEWHERE = {
    "chunk_size": "chunks are embed_chunks' (or a corpus job's, with level='chunks')",
    "chunk_overlap": "chunks are embed_chunks' (or a corpus job's, with level='chunks')",
    "size": "embed_chunks and a corpus job call it chunk_size",
    "overlap": "embed_chunks and a corpus job call it chunk_overlap",
    # sentence-transformers' and transformers' names, as users bring them from `model.encode(...)`
    "show_progress_bar": "bertscope calls it progress, given per call (progress=True)",
    "normalize_embeddings": (
        "bertscope calls it normalize, given per call (encode takes normalize_embeddings)"
    ),
    "truncate_dim": _FULL_WIDTH,
    "batch_size": (
        "embed batches by padded tokens, not texts (the vectors are the same either way): set "
        "bertscope.load(..., token_budget=N); encode and embed_corpus take batch_size"
    ),
    "convert_to_numpy": "embed returns NumPy already: result.vectors, or np.asarray(result)",
    "convert_to_tensor": (
        "embed returns NumPy: torch.from_numpy(result.vectors), or encode(..., convert_to_tensor=True)"
    ),
    "output_value": "embed gives sentence vectors; embed_tokens gives token vectors",
    "device": "the device is chosen when loading: bertscope.load(..., device=...)",
    "max_length": "bertscope calls the token limit max_tokens, set when loading: "
    "bertscope.load(..., max_tokens=N); embed's long= says what a longer text does",
    "max_seq_length": "bertscope calls the token limit max_tokens, set when loading: "
    "bertscope.load(..., max_tokens=N)",
    # the model itself, as the command line (-m/--model), the service ("model") and transformers name it
    "model": _MODEL_ARGUMENT,
    "model_name": _MODEL_ARGUMENT,
    "model_name_or_path": _MODEL_ARGUMENT,
    "pretrained_model_name_or_path": _MODEL_ARGUMENT,
    "path": _MODEL_ARGUMENT,
    # transformers' from_pretrained names, as users bring them to bertscope.load
    "torch_dtype": "bertscope calls it dtype: bertscope.load(..., dtype='bfloat16')",
    "device_map": "bertscope calls it device: bertscope.load(..., device='cuda')",
    "truncation": _LONG,
    # TEI's, OpenAI's and a common singular
    "truncate": _LONG,
    "dimensions": _FULL_WIDTH,
    "layer": "layers are chosen per call: embed(..., layers=-1), one layer or several ('-4:', '0,6')",
    # sentence-transformers' constructor keywords, as users bring them to bertscope.load: its settings
    # are the loaded model's attributes, set after loading as in sentence-transformers
    "prompts": "the prompts are the model's: set model.prompts = {'query': 'query: ', ...} after "
    "loading, then prompt_name= picks one per call (prompt= gives a prompt's text itself)",
    "default_prompt_name": "set model.default_prompt_name = NAME (one of model.prompts) after loading, "
    "or give prompt_name= per call",
    "similarity_fn_name": "set model.similarity_fn_name = 'dot' (cosine, dot, euclidean, manhattan) "
    "after loading",
    "model_kwargs": "bertscope.load takes the model's options itself: dtype=, device=, trust_remote_code=",
    "cache_folder": "bertscope.load reads a local folder, or a hub id from the hub's own cache (HF_HOME): "
    "download the model there, or pass the folder's path",
    "revision": "bertscope.load reads a folder as it is: download that revision (hf download NAME "
    "--revision REV --local-dir DIR) and pass DIR",
}


def named_elsewhere(name: str) -> str | None:
    """The hint `unknown_option` gives for a keyword bertscope names otherwise (`normalize_embeddings`:
    "bertscope calls it normalize"), or None where it has none (the service says it in its fields)."""
    return _NAMED_ELSEWHERE.get(name)


def unknown_option(name: str, known: Sequence[str]) -> UnknownOption:
    """The one-line error for a keyword that is none of `known`, with the nearest as a hint."""
    near = difflib.get_close_matches(name, known, n=1)
    hint = (
        f"{_NAMED_ELSEWHERE[name]}; "
        if name in _NAMED_ELSEWHERE
        else f"did you mean {near[0]}? "
        if near
        else ""
    )
    return UnknownOption(f"unknown option {name!r}: {hint}the options are: {', '.join(known)}")


def whole_number(
    value: object,
    name: str,
    *,
    least: int = 1,
    most: int | None = None,
    meaning: str | None = None,
    error: type[BertscopeError] = InvalidSpec,
) -> int:
    """`value` as an int where it is a whole number of at least `least` (and at most `most`, where one is
    given; not a bool, a float or a string of digits), else a one-line `error` naming the option (and what
    it counts, `meaning`): the check every count option shares (a store's search raises its own error
    class, which the service maps)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < least
        or most is not None
        and value > most
    ):
        counts = f" ({meaning})" if meaning else ""
        bound = f"of at least {least}" + ("" if most is None else f" and at most {most}")
        raise error(f"{name} must be a whole number {bound}{counts}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Recipe:
    """A resolved spec and its checked post-processing: what runs, and what gets recorded next to it."""

    spec: EmbedSpec
    post: PostProcessor | None = None

    def finish(self, result: SentenceEmbeddings) -> SentenceEmbeddings:
        """The engine's result with the post-processing applied and recorded in its spec; a non-finite
        vector comes out non-finite (`apply_post`), for the store's or the library's check to name it."""
        return apply_post(result, self.post)

    def provenance(self) -> dict[str, Any]:
        """The spec as a plain dict, with the post-processing's description when there is one."""
        recorded: dict[str, Any] = self.spec.as_dict()
        if self.post is not None:
            recorded["post"] = self.post.describe()
        return recorded

    def settings(self, model: Encoder, model_arg: str | None) -> dict[str, Any]:
        """Everything stored with an output: model, how to reload it, how it ran, and the provenance."""
        return stored_settings(model, self.provenance(), model_arg)


def reloadable(settings: dict[str, Any]) -> None:
    """Refuse to reload a store's model from its settings where they cannot say how it ran: int8 fitted on
    the caller's own calibration texts (a reload would fit it on the shipped ones)."""
    digest = settings.get("calibration")
    if digest:
        raise InvalidSpec(
            f"this store's int8 was fitted on your own calibration texts (digest {digest}), which its "
            "settings cannot reload; load the model with the same calibration=... and pass it (model=...)"
        )


def stored_settings(model: Encoder, recorded: dict[str, Any], model_arg: str | None) -> dict[str, Any]:
    """The settings stored with an output: model, how to reload it, how it ran, what was `recorded`, and
    the model's fingerprint (settings that decide vectors, file hashes: `bertscope verify --store`)."""
    from .fingerprint_facts import store_fingerprint

    info = model.info()
    runtime: dict[str, Any] = {"dtype": info.dtype, "backend": info.backend, "quantize": info.quantize}
    runtime["mode"] = info.mode
    digest = getattr(model, "calibration_digest", None)
    if digest:
        runtime["calibration"] = digest  # the store's settings cannot reload such a model alone
    if info.fast:
        # The choice and its bound, not the measured speeds: a resumed job compares these settings.
        runtime["fast"] = {key: info.fast[key] for key in ("chosen", "min_cosine")}
    if model_arg is not None and Path(model_arg).is_dir():
        # a folder by its full path: the store is read again from any working folder (a hub id stays)
        model_arg = str(Path(model_arg).resolve())
    settings = {"model": info.source, "model_arg": model_arg, **runtime, **recorded}
    settings["fingerprint"] = store_fingerprint(model)
    # The JSON round trip makes what is compared now equal what was stored (tuples become lists).
    return json.loads(json.dumps(settings))  # type: ignore[no-any-return]


def resolve(model: Encoder, options: EmbedOptions | None = None) -> Recipe:
    """Resolve options against a model into a Recipe: the spec, and the post-processing checked against it."""
    options = options or EmbedOptions()
    spec = resolve_spec(
        model,
        layers=options.layers,
        combine=options.combine,
        pooling=options.pooling,
        mask_special=options.mask_special,
        normalize=options.normalize,
        long=options.long,
        stride=options.stride,
        prompt_name=options.prompt_name,
        prompt=options.prompt,
    )
    return Recipe(spec, prepare_post(options.post, spec.as_dict(), model=model))


def resolve_spec(
    model: Encoder,
    *,
    layers: LayerSpec | None = None,
    combine: Combine | str = Combine.MEAN,
    pooling: Pooling | str = Pooling.AUTO,
    mask_special: bool = False,
    normalize: bool | None = None,
    long: LongText | str = LongText.TRUNCATE,
    stride: int | None = None,
    prompt_name: str | None = None,
    prompt: str | None = None,
) -> EmbedSpec:
    """Resolve options (auto pooling, first_last_avg, defaults, prompt) against a model into an EmbedSpec.

    `mask_special` leaves [CLS]/[SEP] (<s>, </s>) out of mean, max and mean_sqrt_len pooling;
    cls and pooler read the first token itself, so with them it is refused (it would do nothing), as are
    combine sum or concat with one layer and any combine but mean with first_last_avg.
    `prompt_name` picks one of the model's own prompts (default: its default prompt, if any);
    `prompt` gives the text itself ("" for none).
    """
    pool = asked = Pooling.parse(pooling, what="pooling")
    policy = LongText.parse(long, what="long-text policy")
    if stride is not None:
        whole_number(stride, "stride")
        if policy is not LongText.WINDOW:
            raise InvalidSpec(
                f"stride applies to long='window' (the step between windows), not long={policy.value!r}; "
                "add long='window', or leave stride out"
            )
        # Checked now, not at the first text long enough to window (a corpus job's, part-way through):
        # a stride past the window was recorded in the spec and refused only there.
        from .tokens import stride_refusal, window_width

        if not 1 <= int(stride) <= (width := window_width(model.tokenizer)):
            raise InvalidSpec(stride_refusal(stride, width))
    _check_flag(mask_special, "mask_special")
    if normalize is not None:
        _check_flag(normalize, "normalize")
    if pool is Pooling.AUTO:
        if model.loaded.st_unsupported:
            raise auto_refusal(
                model.loaded, "pooling='auto'", "name a pooling (e.g. pooling='mean') to get the encoder's "
                "own pooled vectors, or sentence-transformers for the full pipeline",
            )  # fmt: skip
        pool = Pooling(model.loaded.st_pooling or "mean")
        normalize = model.loaded.st_normalize if normalize is None else normalize
    if pool is Pooling.FIRST_LAST_AVG:
        if layers is not None:
            raise InvalidSpec("first_last_avg uses layers 1 and -1 itself; leave layers out")
        layers = "1,-1"
    if pool in (Pooling.CLS, Pooling.POOLER) and mask_special:
        # They read the first token itself: masking specials would change nothing.
        own = " (this model's own pooling)" if asked is Pooling.AUTO else ""
        raise InvalidSpec(
            f"mask_special leaves [CLS]/[SEP] out of mean, max and mean_sqrt_len pooling, but pooling "
            f"{pool.value}{own} reads the first token itself, so it would do nothing: leave mask_special "
            "out, or name a pooling over tokens (e.g. pooling='mean')"
        )
    if pool is Pooling.POOLER and not model.engine.has_pooler:
        raise InvalidSpec(f"{model.loaded.source} has no trained pooler; use pooling='cls' or 'mean'")
    selected = parse_layers("-1" if layers is None else layers, model.n_layers)
    how = Combine.parse(combine, what="combine")
    _check_combine(how, pool, selected)
    if pool is Pooling.POOLER and how is Combine.CONCAT and len(selected) > 1:
        raise InvalidSpec(
            "the pooler takes one hidden-size vector; with several layers use combine='mean' or 'sum'"
        )
    if pool is Pooling.POOLER and selected != (model.n_layers,):
        # The pooler (dense + tanh over [CLS]) was trained on the last layer's output: on any other
        # layer, or a mix with one, it runs but its vector means nothing.
        raise InvalidSpec(
            f"pooling 'pooler' is the model's trained pooler, trained on the last layer ({model.n_layers}) "
            f"only, not on layers {','.join(map(str, selected))}: for [CLS] of other layers use cls pooling "
            "(pooling='cls'; --pooling cls), or leave layers out (layers=...; --layers) for the last"
        )
    return EmbedSpec(
        layers=selected,
        combine=how,
        pooling=pool,
        mask_special=mask_special,
        normalize=bool(normalize),
        long=policy,
        stride=None if stride is None else int(stride),
        **_prompt_fields(model, prompt_name, prompt),
    )


def auto_refusal(loaded: Any, who: str, fix: str) -> InvalidSpec:
    """The one line for `who` (pooling='auto', encode, ...) asked for the sentence pipeline of a folder
    whose pipeline bertscope does not apply (`loaded.st_unsupported`); `fix` is what that caller can do."""
    return InvalidSpec(
        f"{who} cannot reproduce {loaded.source}: {loaded.st_unsupported}, which bertscope does not apply; "
        f"{fix}"
    )


def _check_combine(how: Combine, pool: Pooling, selected: tuple[int, ...]) -> None:
    """Refuse a combine that contradicts the pooling or has nothing to combine. Mean is the default (a
    caller leaving combine out and one naming mean cannot be told apart), and the mean of one layer is that
    layer, so only sum and concat are refused with one layer; stack keeps one layer as its own column."""
    if pool is Pooling.FIRST_LAST_AVG and how is not Combine.MEAN:
        raise InvalidSpec(
            f"pooling first_last_avg is the mean of layers 1 and -1, so combine={how.value!r} would "
            f"contradict it: leave combine out, or use layers='1,-1', combine={how.value!r} and "
            "pooling='mean'"
        )
    if how in (Combine.SUM, Combine.CONCAT) and len(selected) == 1:
        raise InvalidSpec(
            f"combine={how.value!r} joins several layers, but layers selects one ({selected[0]}), so it "
            "would do nothing: leave combine out, or select several layers (e.g. layers='-2,-1')"
        )


def unnormalized_own_pooling(
    model: Encoder, options: EmbedOptions, *, pooling_name: str = "pooling", fix: str = "normalize=True"
) -> str | None:
    """A note when a named pooling is the model's own but its Normalize step is left off, else None.

    Normalize follows the model only with pooling auto (a named pooling is that pooling alone, as
    sentence-transformers' Pooling module gives it); naming the model's own pooling by name is where
    users expect its sentence vectors and get them before normalisation.
    """
    if options.normalize is not None or not model.loaded.st_normalize or not model.loaded.st_pooling:
        return None
    named = Pooling.parse(options.pooling, what="pooling")
    if named is Pooling.AUTO or named.value != model.loaded.st_pooling or options.mask_special:
        return None
    if options.layers is not None and parse_layers(options.layers, model.n_layers) != (model.n_layers,):
        return None  # other layers are not the model's own vectors, normalised or not
    return (
        f"{pooling_name} {named.value} is this model's own pooling, but its Normalize step applies only "
        f"with {pooling_name} auto: these vectors are not unit length; add {fix} for the model's own"
    )


def _prompt_fields(model: Encoder, prompt_name: str | None, prompt: str | None) -> dict[str, Any]:
    chosen = model.prompts.resolve(prompt_name=prompt_name, prompt=prompt)
    if chosen is None:
        return {}
    skipped = 0 if chosen.include else prompt_length(model.tokenizer, chosen.text)
    return {"prompt_name": chosen.name, "prompt": chosen.text, "prompt_length": skipped}


def _check_flag(value: object, name: str) -> None:
    """Refuse a non-boolean flag: "no" or 0.5 are truthy, and a silent normalize would be wrong."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidSpec(f"{name} must be True or False, not {value!r}")


def reload_arg(model: Encoder) -> str | None:
    """How to load a loaded model again: None for the bundled default, else its source."""
    from .loading import DEFAULT_MODEL

    return None if model.loaded.source == DEFAULT_MODEL else str(model.loaded.source)
