"""The OpenAPI document fitted to one service: what this server takes, so a schema-valid request is accepted.

    doc = fit_openapi(get_openapi(...), model=model, settings=settings)

The schema modules mark what depends on the served model or the service's settings with "x-fit"; this fills
each mark in: texts need a visible character, layers and heads are this model's, ids its vocabulary's,
names those loaded, list lengths --max-inputs. Combinations the server refuses are written as `not`.
What still depends on the data itself (a text over the model's limit with long=error, a word piece not in
the vocabulary, a word a store never saw) or on the load (body and answer size, a full queue) stays a
documented 4xx.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable
from functools import cache
from itertools import product
from typing import TYPE_CHECKING, Any

from pydantic.json_schema import models_json_schema

from ..core._enums import Combine, LongText, Pooling
from ..core.pooling import POOLING_RULES, PoolingRule
from .error_answers import TEI_PATHS
from .guard import OPEN_PATHS
from .response_schemas import ANSWERS
from .settings import TokenIds

if TYPE_CHECKING:
    from ..model import Model
    from .settings import ServerSettings

__all__ = ["fit_openapi", "visible_pattern"]

_TEXT_REF = "#/components/schemas/Text"
_KEEP = ("title", "description", "examples", "default")


@cache
def visible_pattern() -> str:
    """A regex class of the visible characters: letters, marks, numbers, punctuation and symbols.

    That is neither control, format, unassigned, private-use (C*) nor space (Z*): the server's own rule
    (`tokens.text_problem`). Letters are the property class \\p{L} (JSON Schema's ECMA 262 regexes
    read it); the marks, numbers, punctuation and symbols are listed from Python's Unicode database,
    the server's own, since fuzzers stand in for \\p{M} with ranges that hold unassigned points.
    """
    ranges: list[str] = []
    start = None
    for point in range(sys.maxunicode + 2):
        listed = point <= sys.maxunicode and unicodedata.category(chr(point))[0] in "MNPS"
        if listed and start is None:
            start = point
        elif not listed and start is not None:
            last = point - 1
            ranges.append(_escape(start) if start == last else f"{_escape(start)}-{_escape(last)}")
            start = None
    return "[\\p{L}" + "".join(ranges) + "]"


def _escape(point: int) -> str:
    # Python's re and the Rust regex of JSON Schema validators both read \uXXXX and \UXXXXXXXX.
    return f"\\u{point:04X}" if point <= 0xFFFF else f"\\U{point:08X}"


def fit_openapi(doc: dict[str, Any], *, model: Model, settings: ServerSettings) -> dict[str, Any]:
    """`doc` (FastAPI's OpenAPI document) with every "x-fit" mark filled in for this model and service."""
    count = model.n_layers + 1
    limit = settings.max_inputs
    split = None if settings.auto_split else limit
    heads = int(getattr(model.config, "num_attention_heads", 0) or 0)
    fits: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "text": lambda node: {"$ref": _TEXT_REF},
        "inputs": lambda node: {**node, "maxItems": limit},
        "inputs-split": lambda node: node if split is None else {**node, "maxItems": split},
        # /similarity embeds the source with the sentences: one of the limit is the source's.
        "sentences": lambda node: node if split is None else {**node, "maxItems": split - 1},
        "layers": lambda node: {**node, **_layers(count)},
        "encoder-layer": lambda node: {
            "type": "integer",
            "minimum": -model.n_layers,
            "maximum": model.n_layers,
            "not": {"const": 0},
        },
        "width": lambda node: {**node, "maximum": model.info().hidden_size},
        "head": lambda node: (
            {**node, "minimum": 0, "maximum": heads - 1} if heads else {**node, "minimum": 0}
        ),
        "id": lambda node: {
            **node,
            "maximum": min(model.static_shape[0], len(model.id_to_token)) - 1,
        },
        # Ids are refused unless the service takes this model's own (--token-ids model).
        "ids": lambda node: _ids(node, model) if settings.token_ids == TokenIds.MODEL else {"not": {}},
        "post": lambda node: {**node, "enum": [name for name, _ in settings.posts]},
        "store": lambda node: {**node, "enum": [name for name, _ in settings.stores]},
        "prompt": lambda node: {**node, "enum": list(model.prompts.prompts)},
    }
    fitted = _filled(doc, fits)
    schemas = fitted.setdefault("components", {}).setdefault("schemas", {})
    _answer_schemas(fitted["paths"], schemas)
    _error_answers(fitted["paths"], keyed=bool(settings.api_key))
    schemas["Text"] = {
        "type": "string",
        "pattern": visible_pattern(),
        "description": "A text with at least one visible character (not only control, format or space "
        "characters), valid Unicode (no lone surrogate).",
    }
    poolings = _poolings(model)
    if "Pooling" in schemas:
        schemas["Pooling"] = {**schemas["Pooling"], "enum": poolings}
    for name, schema in schemas.items():
        refusals = _refused_combinations(schema, poolings, count, model.loaded.st_pooling)
        if refusals:
            schemas[name] = {**schema, "allOf": [{"not": r} for r in refusals]}
    return fitted


def _answer_schemas(paths: dict[str, Any], schemas: dict[str, Any]) -> None:
    """The 200 schema of each route in `response_schemas.ANSWERS` writing its own JSON and naming none."""
    ref = "#/components/schemas/{model}"
    empty = []
    for (method, path), model in ANSWERS.items():
        content = paths.get(path, {}).get(method, {}).get("responses", {}).get("200", {}).get("content", {})
        if "application/json" in content and not content["application/json"].get("schema"):
            empty.append((content["application/json"], model))
    _, defs = models_json_schema([(model, "serialization") for _, model in empty], ref_template=ref)
    for name, schema in defs.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    for content, model in empty:
        content["schema"] = {"$ref": ref.format(model=model.__name__)}


# The errors only a request body can cause: not UTF-8 JSON, late, too big, not JSON, invalid; and a full
# queue, which only routes that run the model or the tokenizer meet.
_BODY_ERRORS = ("400", "408", "413", "415", "422", "429")
_TEI_ERROR = {"$ref": "#/components/schemas/TEIError"}
_TEI_400 = (
    "TEI's Empty: an empty batch, text or id list (error_type \"Empty\"); or a body TEI's JSON parser "
    "refuses (error_type Validation)."
)
_OPENAI_400 = (
    "OpenAI's invalid_request_error: a field or an input the route cannot take (`param` names the field), "
    "an input over the model's context, or a body that is not UTF-8 JSON."
)


def _error_answers(paths: dict[str, Any], *, keyed: bool) -> None:
    """Each route's error answers as it gives them (the app lists every code on every route): a GET
    without a body none of a body's; 401 only where a key is asked; /v1/ OpenAI's 400 for the 422; TEI's
    routes TEI's error body."""
    for path, operations in paths.items():
        for method, operation in operations.items():
            responses: dict[str, Any] = operation.get("responses", {})
            if "requestBody" not in operation:
                for status in _BODY_ERRORS:
                    if status != "422" or not operation.get("parameters"):
                        responses.pop(status, None)
            if not keyed or (path in OPEN_PATHS and not (path == "/" and method == "post")):
                responses.pop("401", None)
            if path.startswith("/v1/"):
                responses.pop("422", None)  # OpenAI answers a request it cannot take 400
                if "400" in responses:
                    responses["400"] = {**responses["400"], "description": _OPENAI_400}
            elif path in TEI_PATHS and not (path == "/" and method == "get"):  # GET / is the explorer's page
                for status, answer in responses.items():
                    if status.startswith(("4", "5")) and "content" in answer:
                        answer["content"] = {"application/json": {"schema": _TEI_ERROR}}
                if "400" in responses:
                    responses["400"] = {**responses["400"], "description": _TEI_400}


def _filled(node: Any, fits: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> Any:
    """A copy of `node` with each marked schema replaced by its fitted form (titles and examples kept)."""
    if isinstance(node, list):
        return [_filled(item, fits) for item in node]
    if not isinstance(node, dict):
        return node
    filled = {key: _filled(value, fits) for key, value in node.items()}
    mark = filled.pop("x-fit", None)
    if mark is None:
        return filled
    kept = {key: filled[key] for key in _KEEP if key in filled}
    return {**fits[mark](filled), **kept}


def _layer_strings(count: int) -> dict[str, int]:
    """Spec strings for `count` hidden states and how many layers each selects.

    Listed: "all", one index, and slices that select at least one layer; comma lists such as "0,6" are
    taken too, but are left out here since a list of ints says the same.
    """
    indexes = list(range(-count, count))
    slices = [f"{i}:" for i in indexes] + [f":{j}" for j in range(-count + 1, count + 1) if j != 0]
    slices += [f"{i}:{j}" for i in range(count) for j in range(i + 1, count + 1)]
    strings = {"all": count, **{str(i): 1 for i in indexes}}
    for spec in slices:
        start, stop = (int(b) if b else None for b in spec.split(":"))
        strings.setdefault(spec, len(range(count)[start:stop]))
    return strings


def _layers(count: int) -> dict[str, Any]:
    """Layer specs this model has: an index, a list of distinct layers, or one of the spec strings."""
    # The same layer twice (as 6 and -1 on six layers) is refused: it adds nothing but size.
    twice = [
        {"allOf": [{"contains": {"const": i}}, {"contains": {"const": i - count}}]} for i in range(count)
    ]
    return {
        "anyOf": [
            {"type": "string", "enum": list(_layer_strings(count))},
            {"type": "integer", "minimum": -count, "maximum": count - 1},
            {
                "type": "array",
                "items": {"type": "integer", "minimum": -count, "maximum": count - 1},
                "minItems": 1,
                "maxItems": count,
                "uniqueItems": True,
                "not": {"anyOf": twice},
            },
            {"type": "null"},
        ]
    }


def _ids(node: dict[str, Any], model: Model) -> dict[str, Any]:
    """One input as token ids: more than the model's own frame ([CLS] ... [SEP]) alone; none with a prompt."""
    if model.prompts.resolve() is not None:
        # A prompt is text put before the text: ids cannot carry it exactly, so they are refused.
        return {"not": {}}
    backend = model.tokenizer.backend
    framed = list(backend.encode("a", add_special_tokens=True).ids)
    content = list(backend.encode("a", add_special_tokens=False).ids)
    start = next(i for i in range(len(framed)) if framed[i : i + len(content)] == content)
    opening, closing = framed[:start], framed[start + len(content) :]
    frame = sorted(set(opening + closing))
    if not frame:
        return node
    # Written as what is taken (schema generators cannot draw from `not` over lists): an id outside the
    # frame, more ids than the frame holds, or frame ids that still leave some once the frame is taken off.
    short = [list(ids) for n in range(1, len(opening + closing) + 1) for ids in product(frame, repeat=n)]
    kept = [ids for ids in short if _unframed(ids, opening, closing)]
    taken: list[dict[str, Any]] = [
        {"contains": {"not": {"enum": frame}}},
        {"minItems": len(opening) + len(closing) + 1},
    ]
    return {**node, "anyOf": taken + ([{"enum": kept}] if kept else [])}


def _unframed(ids: list[int], opening: list[int], closing: list[int]) -> list[int]:
    """The ids left once a leading `opening` and a trailing `closing` are taken off (as `from_ids` does)."""
    body = ids[len(opening) :] if opening and ids[: len(opening)] == opening else ids
    if closing and len(body) >= len(closing) and body[len(body) - len(closing) :] == closing:
        body = body[: len(body) - len(closing)]
    return body


def _poolings(model: Model) -> list[str]:
    """The sentence poolings this model can do (auto where its own is reproducible, pooler where trained)."""
    refused = set()
    if not model.engine.has_pooler:
        refused.add(Pooling.POOLER)
    if model.loaded.st_unsupported:
        refused.add(Pooling.AUTO)
    return [p.value for p in Pooling if p not in refused]


def _refused_combinations(
    schema: dict[str, Any], poolings: list[str], count: int, st_pooling: str | None
) -> list[dict[str, Any]]:
    """Object schemas (as `not` bodies) of option combinations the server refuses for this model."""
    fields = set(schema.get("properties", {}))
    refused: list[dict[str, Any]] = []
    several = {
        "anyOf": [
            {"type": "array", "minItems": 2},
            {"type": "string", "enum": [s for s, n in _layer_strings(count).items() if n > 1]},
        ]
    }
    if {"pooling", "layers"} <= fields:
        # first_last_avg picks layers 1 and -1 itself.
        refused.append(
            _when(pooling={"const": Pooling.FIRST_LAST_AVG.value}, layers={"not": {"type": "null"}})
        )
        if Pooling.POOLER.value in poolings and "combine" in fields:
            # The pooler takes one hidden-size vector: several layers may not be concatenated.
            refused.append(
                _when(
                    pooling={"const": Pooling.POOLER.value},
                    combine={"const": Combine.CONCAT.value},
                    layers=several,
                )
            )
    if {"pooling", "combine", "layers"} <= fields:
        # A sentence (or chunk) vector keeps no layer apart: stack is for token and word rows.
        refused.append(_when(combine={"const": Combine.STACK.value}, layers=several))
        # first_last_avg picks two layers itself.
        first_last = {"const": Pooling.FIRST_LAST_AVG.value}
        refused.append(_when(combine={"const": Combine.STACK.value}, pooling=first_last))
    if {"late", "pooling", "long"} <= fields:
        # Late chunking (late absent or true) pools each chunk's token vectors: it needs a pooling over
        # tokens and every token of the document.
        late = {"late": {"const": True}}
        one_vector = {"enum": _without(lambda rule: rule.tokens is not None, poolings, st_pooling)}
        refused.append(_when(pooling=one_vector) | {"properties": {**late, "pooling": one_vector}})
        truncate = {"const": LongText.TRUNCATE.value}
        refused.append(_when(long=truncate) | {"properties": {**late, "long": truncate}})
    if {"chunks", "inputs"} <= fields:
        # Spans are one list for one document, one list per document for a list of documents.
        flat = {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
        nested = {"type": "array", "items": {"type": "array", "items": {"type": "array"}}}
        refused.append(_when(inputs={"type": "string"}, chunks={**nested, "minItems": 1}))
        refused.append(_when(inputs={"type": "array"}, chunks={**flat, "minItems": 1}))
    if {"words", "inputs"} <= fields:
        # Words come from one text's own word ids: pairs are refused with words=true (or level words).
        pairs = {"type": "array", "contains": {"type": "array"}}
        refused.append(_when(words={"const": True}, inputs=pairs))
        if "level" in fields:
            refused.append(_when(level={"const": "words"}, inputs=pairs))
            # one name for the level: "words" is the older spelling of "level", and never sent with it
            refused.append({"type": "object", "required": ["level", "words"]})
    if {"as_words", "inputs"} <= fields:
        # With as_words=true (or word=true) every item is a word (a string), not an id.
        ids = {"anyOf": [{"type": "integer"}, {"type": "array", "contains": {"type": "integer"}}]}
        refused.append(_when(as_words={"const": True}, inputs=ids))
        if "word" in fields:
            refused.append(_when(word={"const": True}, inputs=ids))
            # one name: "word" is the older spelling of "as_words", and never sent with it
            refused.append({"type": "object", "required": ["as_words", "word"]})
    # /v2/embed_chunks' "chunk_size" and "size" (or "chunk_overlap" and "overlap") together are refused
    # too (ONE_CHUNK_SIZE), but not stated here: beside the route's other refused combinations, either
    # spelling of the rule leaves a schema that schemathesis cannot generate from (it gives up on the
    # operation), as the stride rule is left out.
    if {"exact", "pooling"} <= fields:
        # cls and pooler read one vector that depends on every token: no exact split, and what is shown
        # instead, the [CLS] attention, is within one window.
        inexact = {"enum": _without(lambda rule: rule.exact, poolings, st_pooling)}
        refused.append(_when(exact={"const": True}, pooling=inexact))
        refused.append(_when(pooling=inexact, long={"const": LongText.WINDOW.value}))
    return refused


def _without(fact: Callable[[PoolingRule], bool], poolings: list[str], st_pooling: str | None) -> list[str]:
    """The poolings of the table lacking `fact` (auto where the model's own pooling lacks it)."""
    lacking = [p for p, rule in POOLING_RULES.items() if not fact(rule)]
    if Pooling(st_pooling or Pooling.MEAN.value) in lacking:
        lacking.append(Pooling.AUTO)
    return [p.value for p in lacking if p.value in poolings]


def _when(**properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema matching bodies whose named fields all hold the given values."""
    return {"type": "object", "required": list(properties), "properties": properties}
