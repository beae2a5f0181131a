"""A sentence-transformers folder's own sentence pipeline, read from its files without torch.

modules.json names the modules; a Pooling module's config.json says its mode (`pooling_mode` from v5, the
legacy `pooling_mode_*` booleans before); sentence_bert_config.json the max length (`max_seq_length`, or
`processing_kwargs`' text `max_length`, which wins, from v6) and whether texts are
lowercased before tokenizing (`do_lower_case`, done by `lowercase_first` as sentence-transformers does it);
config_sentence_transformers.json the similarity function `Model.similarity` computes on vectors
(`similarity_fn_name`: cosine where it names none or names a multi-vector one such as maxsim, as
sentence-transformers 6 loads it; any other name it cannot compute is refused at load, never read as
cosine) and the width encode keeps (`truncate_dim`, the model's until set).
Which of those modes bertscope can redo is the pooling table's fact (`PoolingRule.st_mode`,
core/pooling.py), not this file's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidSpec, ModelLoadError
from .pooling import POOLING_RULES

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "MULTI_VECTOR_FUNCTIONS",
    "SIMILARITY_FUNCTIONS",
    "ST_POOLING_MODES",
    "SentenceTransformersSettings",
    "folder_similarity_fn_name",
    "folder_truncate_dim",
    "lowercase_first",
    "pooling_config",
    "pooling_modes",
    "role_refusal",
    "sentence_transformers_settings",
    "similarity_function",
]

# sentence-transformers' pooling mode names -> ours, from the pooling table. weightedmean and lasttoken
# have no bertscope equivalent.
ST_POOLING_MODES = {rule.st_mode: p.value for p, rule in POOLING_RULES.items() if rule.st_mode}
# The legacy booleans of a Pooling config.json (every sentence-transformers version reads them).
_ST_LEGACY_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_ST_MODULES_AUTO_APPLIES = ("Transformer", "Pooling", "Normalize")
# The feature a Normalize module works on by default, the pooled sentence vector: the one bertscope
# normalizes.
_SENTENCE_VECTOR = "sentence_embedding"
# The similarity functions a SentenceTransformer computes (its SUPPORTED_SIMILARITY_FN_NAMES: the values of
# sentence-transformers' SimilarityFunction but the multi-vector maxsim ones), the first its default.
SIMILARITY_FUNCTIONS = ("cosine", "dot", "euclidean", "manhattan")
# SimilarityFunction's multi-vector (late-interaction) values: a SentenceTransformer loading a folder that
# names one keeps its own default, cosine, on its one vector per text (its `_parse_model_config` inherits
# only the names it computes), so bertscope loads it so too; any other name is refused at load.
MULTI_VECTOR_FUNCTIONS = ("maxsim", "meanmaxsim")


@dataclass(frozen=True)
class SentenceTransformersSettings:
    """The sentence pipeline a sentence-transformers folder ships, as far as pooling='auto' can redo it."""

    pooling: str | None = None
    normalize: bool = False
    max_seq_length: int | None = None
    unsupported: str | None = None  # why pooling='auto' cannot reproduce the folder's pipeline
    lower_case: bool = False  # sentence_bert_config.json's do_lower_case: lowercase every text first
    similarity_fn_name: str = "cosine"  # config_sentence_transformers.json's, one of SIMILARITY_FUNCTIONS
    # sentence_bert_config.json's query_length / document_length: where encode_query / encode_document cut
    # (a processing_kwargs text max_length wins over them, as there); query_expansion: queries padded out
    query_length: int | None = None
    document_length: int | None = None
    query_expansion: bool = False
    truncate_dim: int | None = None  # config_sentence_transformers.json's: encode's width until set


def lowercase_first(backend: Tokenizer) -> None:
    """Lowercase every text before `backend`'s own normalizer, in place, as sentence-transformers' Transformer
    module does for `do_lower_case` (a Lowercase normalizer put first, unless one is there already): the
    offsets still point into the text as given."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    normalizer = backend.normalizer
    if isinstance(normalizer, Lowercase):
        return
    if isinstance(normalizer, NormalizerSequence) and any(isinstance(n, Lowercase) for n in normalizer):  # type: ignore[attr-defined]
        return
    parts: list[Any] = [Lowercase()]
    if isinstance(normalizer, NormalizerSequence):
        parts += list(normalizer)  # type: ignore[call-overload]  # a Sequence iterates its normalizers
    elif normalizer is not None:
        parts.append(normalizer)
    backend.normalizer = NormalizerSequence(parts)


def pooling_config(pooling: str, width: int) -> dict[str, Any]:
    """A sentence-transformers Pooling config.json for our pooling (legacy booleans, read by all versions)."""
    ours = {name: st for st, name in ST_POOLING_MODES.items()}
    chosen = {key for key, st in _ST_LEGACY_KEYS.items() if st == ours[pooling]}
    flags = {key: key in chosen for key in _ST_LEGACY_KEYS if _ST_LEGACY_KEYS[key] in ST_POOLING_MODES}
    return {"word_embedding_dimension": width, **flags}


def pooling_modes(config: dict[str, Any]) -> list[str]:
    """sentence-transformers pooling mode names of a Pooling config.json, in either format."""
    mode = config.get("pooling_mode")
    if mode is None:
        return [name for key, name in _ST_LEGACY_KEYS.items() if config.get(key)]
    return [mode] if isinstance(mode, str) else [str(m) for m in mode]


def sentence_transformers_settings(path: Path | None) -> SentenceTransformersSettings:
    """The pooling mode, normalisation and max length a sentence-transformers folder ships, if any.

    A settings file that is missing where modules.json names it, not JSON, or not the shape
    sentence-transformers writes is a `ModelLoadError` naming the file, never a guess at the pipeline.
    """
    if path is None or not (path / "modules.json").exists():
        return SentenceTransformersSettings()
    modules = _settings_file(path / "modules.json", list)
    for number, module in enumerate(modules):
        if not isinstance(module, dict):
            raise _malformed(path / "modules.json", f"its entry {number} is not an object")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    normalize = "Normalize" in kinds
    unsupported = None
    extra = [k for k in kinds if k not in _ST_MODULES_AUTO_APPLIES]
    if extra:
        unsupported = f"its sentence-transformers pipeline has a {', '.join(extra)} module (modules.json)"
    if normalize and (odd := _odd_normalize(path, modules, kinds)) is not None:
        normalize, unsupported = False, unsupported or odd
    pooling = None
    for number, (module, kind) in enumerate(zip(modules, kinds, strict=True)):
        if kind != "Pooling":
            continue
        if not isinstance(module.get("path"), str):
            raise _malformed(path / "modules.json", f'its Pooling entry ({number}) has no "path"')
        config = _settings_file(path / module["path"] / "config.json", dict)
        modes = pooling_modes(config)
        if len(modes) == 1 and modes[0] in ST_POOLING_MODES:
            pooling = ST_POOLING_MODES[modes[0]]
        elif modes:
            unsupported = unsupported or f"its Pooling module asks for {' + '.join(modes)}"
        else:  # sentence-transformers refuses such a config; 'auto' must not guess a pooling for it
            unknown = [k for k in config if k.startswith("pooling_mode") and k not in _ST_LEGACY_KEYS]
            named = f" ({', '.join(unknown)}: no sentence-transformers option)" if unknown else ""
            unsupported = unsupported or (
                f"its Pooling module's config.json ({module['path']}) names no pooling mode{named}"
            )
    st_config = path / "sentence_bert_config.json"
    settings = _settings_file(st_config, dict) if st_config.exists() else {}
    max_len, lower = settings.get("max_seq_length"), bool(settings.get("do_lower_case"))
    text_max, unread = _processing_kwargs(st_config, settings.get("processing_kwargs"))
    if text_max is not None:  # the tokenizer call's own max_length: it wins over max_seq_length there
        max_len = text_max
    unsupported = unsupported or unread
    similarity = folder_similarity_fn_name(path)
    query, document = (None, None) if text_max is not None else _role_lengths(st_config, settings)
    return SentenceTransformersSettings(
        pooling, normalize, max_len, unsupported, lower, similarity, query, document,
        settings.get("query_expansion") is not None, folder_truncate_dim(path),
    )  # fmt: skip


def auto_refused(why: str | None, *, option: str = "pooling 'auto'") -> str | None:
    """What info says of a folder whose sentence pipeline pooling auto refuses (`why`: the module it does
    not apply, `st_unsupported`), `option` spelled as the caller's (the command line's `--pooling auto`);
    None where the pipeline is reproduced."""
    if why is None:
        return None
    return f"{why}; {option} (the default) and encode refuse it: name a pooling"


def role_refusal(model: Any, role: str) -> InvalidSpec | None:
    """encode_query's (`role` "query") or encode_document's ("document") one line where sentence-transformers
    cuts that role's texts elsewhere than `model`'s token limit (sentence_bert_config.json's
    `query_length` / `document_length`) or pads queries out (`query_expansion`); None where it does not.

    `model` is the loaded model: its `loaded` facts, `max_tokens` and `max_positions`."""
    loaded = model.loaded
    source = loaded.source
    if role == "query" and getattr(loaded, "st_query_expansion", False):
        return InvalidSpec(
            f"encode_query cannot reproduce {source}: its sentence_bert_config.json sets query_expansion "
            "(queries padded out with mask tokens), which bertscope does not apply; use encode for the "
            "texts as they are, or sentence-transformers for it"
        )
    length = getattr(loaded, f"st_{role}_length", None)
    if length is None:
        return None
    # a text past the positions fails in sentence-transformers: a longer role length cuts at them here
    cut = min(int(length), int(model.max_positions))
    if cut == int(model.max_tokens):
        return None
    texts = {"query": "queries", "document": "documents"}.get(role, f"{role} texts")
    return InvalidSpec(
        f"encode_{role} cannot reproduce {source}: its sentence_bert_config.json cuts {texts} at {length} "
        f"tokens ({role}_length) where this model cuts every text at {model.max_tokens}; load it with "
        f"max_tokens={cut} for {texts} (bertscope.load(..., max_tokens={cut})), or use sentence-transformers"
    )


def _role_lengths(file: Path, settings: dict[str, Any]) -> tuple[int | None, int | None]:
    """sentence_bert_config.json's (query_length, document_length), each None where it sets none; one that
    is no token count is the one-line `ModelLoadError` naming the file."""
    found: list[int | None] = []
    for key in ("query_length", "document_length"):
        value = settings.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 2):
            raise _malformed(file, f"its {key} {value!r} is not a whole number of tokens of 2 or more")
        found.append(value)
    return found[0], found[1]


def _processing_kwargs(file: Path, given: object) -> tuple[int | None, str | None]:
    """sentence_bert_config.json's `processing_kwargs` (sentence-transformers 6: the keywords its
    Transformer module calls the tokenizer with, per modality) as (the text `max_length`, which cuts every
    text there whatever max_seq_length says; why the rest is not applied, or None).

    Audio, image and video settings never touch a text and keys sentence-transformers does not know it
    ignores; any other setting (`text.padding`, `common`, `chat_template` ...) is one bertscope does not
    apply, so the pipeline is refused, never run otherwise."""
    if not given:
        return None, None
    if not isinstance(given, dict):
        held = _JSON_KINDS.get(type(given), "a JSON value")
        raise _malformed(
            file, f"its processing_kwargs is {held} where sentence-transformers writes an object"
        )
    max_length, unread = None, []
    for modality in ("text", "common", "chat_template"):
        settings = given.get(modality) or {}
        if not isinstance(settings, dict):
            raise _malformed(file, f"its processing_kwargs.{modality} is not an object")
        for key, value in settings.items():
            if (modality, key) != ("text", "max_length"):
                unread.append(f"{modality}.{key}")
            elif value is not None:  # null is no max_length: the tokenizer's own limit, as without one
                if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                    why = "is not a whole number of tokens of 2 or more ([CLS] and [SEP])"
                    raise _malformed(file, f"its processing_kwargs.text.max_length {value!r} {why}")
                max_length = value
    if not unread:
        return max_length, None
    return (
        max_length,
        f"its sentence_bert_config.json sets processing_kwargs {', '.join(unread)} for the tokenizer",
    )


def _odd_normalize(path: Path, modules: list[dict[str, Any]], kinds: list[str]) -> str | None:
    """Why a Normalize module of modules.json is not the one bertscope applies (unit length of the pooled
    sentence vector), or None where each is: after the Pooling module, on `sentence_embedding` and writing
    it back (its config.json's `module_input_name` and `module_output_name`, sentence-transformers 6)."""
    pooled = kinds.index("Pooling") if "Pooling" in kinds else len(kinds)
    for number, (module, kind) in enumerate(zip(modules, kinds, strict=True)):
        if kind != "Normalize":
            continue
        where = str(module.get("path") or "")
        named = f"its Normalize module ({where or f'modules.json entry {number}'})"
        if number < pooled:
            where = "before the Pooling module" if "Pooling" in kinds else "with no Pooling module"
            return f"{named} {where}, where there is no sentence vector to normalize"
        config_file = path / where / "config.json"
        # sentence-transformers reads the two names from the module's config.json, defaults where absent
        config = _settings_file(config_file, dict) if where and config_file.is_file() else {}
        source = config.get("module_input_name", _SENTENCE_VECTOR)
        target = config.get("module_output_name") or source
        if (source, target) != (_SENTENCE_VECTOR, _SENTENCE_VECTOR):
            return (
                f"{named} normalizing {source!r} into {target!r} (its config.json), not the sentence vector "
                f"{_SENTENCE_VECTOR!r} in place"
            )
    return None


def similarity_function(value: object) -> str | None:
    """`value` as one of SIMILARITY_FUNCTIONS: a name, or a member of sentence-transformers'
    SimilarityFunction (read by its value, without importing it); None is the default, cosine, as
    sentence-transformers reads it. None where `value` names none of them."""
    if value is None:
        return SIMILARITY_FUNCTIONS[0]
    if isinstance(value, Enum):
        value = value.value
    return value if isinstance(value, str) and value in SIMILARITY_FUNCTIONS else None


def folder_similarity_fn_name(path: Path | None) -> str:
    """The similarity function a sentence-transformers folder names (config_sentence_transformers.json's
    `similarity_fn_name`), "cosine" where it names none or is no sentence-transformers folder (no
    modules.json: sentence-transformers then builds its own pipeline and reads no config).

    A multi-vector name (`MULTI_VECTOR_FUNCTIONS`: maxsim, meanmaxsim) is cosine, as a SentenceTransformer
    loads it; any other name it does not compute is a one-line `ModelLoadError`."""
    if path is None or not (path / "modules.json").exists():
        return SIMILARITY_FUNCTIONS[0]
    config = path / "config_sentence_transformers.json"
    if not config.exists():
        return SIMILARITY_FUNCTIONS[0]
    given = _settings_file(config, dict).get("similarity_fn_name")
    if given in MULTI_VECTOR_FUNCTIONS:
        return SIMILARITY_FUNCTIONS[0]
    name = similarity_function(given)
    if name is None:
        raise _malformed(
            config,
            f"its similarity_fn_name {given!r} is not one a sentence-transformers model computes on one "
            f"vector per text ({', '.join(SIMILARITY_FUNCTIONS)})",
        )
    return name


def folder_truncate_dim(path: Path | None) -> int | None:
    """The width a sentence-transformers folder saves for encode (config_sentence_transformers.json's
    `truncate_dim`, which sentence-transformers' `_parse_model_config` makes the model's `truncate_dim`
    until set); None where it names none or is no sentence-transformers folder. A value that is not a
    whole number of at least 1 is a one-line `ModelLoadError`."""
    if path is None or not (path / "modules.json").exists():
        return None
    config = path / "config_sentence_transformers.json"
    given = _settings_file(config, dict).get("truncate_dim") if config.exists() else None
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise _malformed(config, f"its truncate_dim {given!r} is not a whole number of at least 1 (or null)")
    return given


def _settings_file(file: Path, kind: type[list[Any]] | type[dict[str, Any]]) -> Any:
    """A sentence-transformers settings file's JSON, a list or an object as `kind` says; else the one-line
    `ModelLoadError` naming the file."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _malformed(file, "is missing (modules.json names it)", joined=" ") from None
    except OSError as exc:
        raise _malformed(file, f"cannot be read ({exc.strerror or exc})", joined=" ") from None
    except ValueError as exc:  # invalid JSON, or bytes that are not UTF-8
        raise _malformed(file, f"is not valid JSON ({exc})", joined=" ") from None
    if not isinstance(data, kind):
        held = _JSON_KINDS.get(type(data), "a JSON value")
        raise _malformed(file, f"holds {held} where sentence-transformers writes {_JSON_KINDS[kind]}")
    return data


# Python's types of parsed JSON, in JSON's words
_JSON_KINDS: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
}


def _malformed(file: Path, why: str, *, joined: str = ": ") -> ModelLoadError:
    return ModelLoadError(
        f"{file}{joined}{why}; it is one of the folder's sentence-transformers settings: fix it, or copy it "
        "again from the model's source"
    )
