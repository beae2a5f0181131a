"""Validation errors in a client's words: one line per bad field, never pydantic's union internals.

pydantic reports a value that fits no member of a union once per member, each under the member's type
(`inputs.list[function-before[whole_number(), int]].0: Input should be a valid integer`). Here a union
field's errors become one line that points at the first bad item and says once what the field takes:

    {"inputs": ["a", 3]}         inputs: item 1 is a number (3), not a string: give a text, a list of
                                 texts, a list of token ids or a list of lists of token ids
    {"inputs": [["a","b","c"]]}  inputs: item 0 has 3 texts: a pair is [A, B]
    {"inputs": null}             inputs is null: give a text or a list of texts and pairs [A, B]

The shapes are read from the route's request model (`Shape.of`), so the words follow the fields. Every
other error keeps pydantic's message under its field's name (`pooling: Input should be 'cls', ...`).

A body sent under a content type that is not JSON, or none (curl's -d sends
application/x-www-form-urlencoded), is never parsed, so pydantic would call valid JSON "not a valid
dictionary"; `not_json` names the header instead (415, as TEI's axum `Json` extractor answers before it
reads the body).
"""

from __future__ import annotations

import enum
import json
import math
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import MaxLen, MinLen
from fastapi.encoders import jsonable_encoder
from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

__all__ = ["NOT_UTF8", "Shape", "body_pending", "not_json", "not_utf8", "readable", "route_path"]

_JSON_FIX = "send Content-Type: application/json"
# The one line for a body that is not UTF-8, on every route (TEI's and OpenAI's parsers read UTF-8 only).
NOT_UTF8 = "body: not UTF-8 JSON; send a JSON object encoded as UTF-8"


def route_path(scope: Any) -> str:
    """The request's path within the service, as its routes match it: without the prefix the service is
    mounted under (`root_path`), so a mounted service names, counts and guards its routes as at the root."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        return path[len(root) :] or "/"
    return path


# The bad fields one 422 names: the first few say what to fix; the rest are counted, not listed.
SHOWN_ERRORS = 5
# Whole numbers named for what they are in a field (a list of ints is token ids there).
_WHOLE = {"inputs": "token id", "input": "token id", "ids": "token id", "items": "token id"}
_WHOLE |= {"layers": "layer number", "chunks": "character offset"}
# A text that is a spec, not a text to embed.
_TEXT = {"layers": 'a layer spec such as "-4:"'}
# The request models' own rules (schemas.py), already one line in the client's words: said as written.
_OWN_LINES = ("field_elsewhere", "one_name")
# `<LongText.TRUNCATE: 'truncate'>`, pydantic's words for an enum member in a Literal: `'truncate'`.
_MEMBER = re.compile(r"<\w+\.\w+: ('[^']*')>")


def body_pending(headers: Mapping[str, str]) -> bool:
    """Whether a request's headers announce a body (a Content-Length over 0, or chunked): an answer given
    before it is read closes the connection."""
    return headers.get("content-length", "") not in ("", "0") or "transfer-encoding" in headers


def not_json(content_type: str | None) -> str | None:
    """The one line refusing a body sent as `content_type` (a Content-Type header, or None), or None where
    the body is read as JSON: application/json or application/*+json (FastAPI's strict rule, and axum's:
    a body with no content type is not read either)."""
    if not content_type:
        return f"body: sent with no Content-Type; {_JSON_FIX}"
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    if kind == "application" and (subtype == "json" or subtype.endswith("+json")):
        return None
    shown = content_type if len(content_type) <= 60 else content_type[:60] + "..."
    return f"body: sent with Content-Type {shown!r}, not JSON; {_JSON_FIX}"


def not_utf8(body: bytes) -> str | None:
    """`NOT_UTF8` for a body Python's json would read as UTF-16 or UTF-32 (json.loads guesses that from its
    first four bytes, where FastAPI parses bertscope's own bodies), else None. Bytes that are not UTF-8
    past those are refused where the body is parsed (`error_answers.unreadable_body`)."""
    if body and not json.detect_encoding(body[:4]).startswith("utf-8"):
        return NOT_UTF8
    return None


@dataclass(frozen=True)
class Shape:
    """What a JSON value may be: text, whole, bool, choice, list (of `item`, `least`..`most` long),
    union (of `members`), or other (a model, anything this does not describe)."""

    kind: str
    item: Shape | None = None
    members: tuple[Shape, ...] = ()
    least: int = 0
    most: int | None = None
    values: tuple[str, ...] = ()

    @staticmethod
    def of(annotation: Any) -> Shape:
        """The shape of a pydantic field's annotation (None dropped from a union: null is its own rule)."""
        least, most = 0, None
        while get_origin(annotation) is Annotated:
            annotation, *extra = get_args(annotation)
            for mark in extra:
                for bound in mark.metadata if isinstance(mark, FieldInfo) else [mark]:
                    least = bound.min_length if isinstance(bound, MinLen) else least
                    most = bound.max_length if isinstance(bound, MaxLen) else most
        origin = get_origin(annotation)
        if origin in (Union, types.UnionType):
            members = tuple(Shape.of(a) for a in get_args(annotation) if a is not type(None))
            return members[0] if len(members) == 1 else Shape("union", members=members)
        if origin in (list, tuple):
            args = [a for a in get_args(annotation) if a is not Ellipsis]
            if origin is tuple:  # (start, end): a list of exactly that many
                least = most = len(args)
            return Shape("list", item=Shape.of(args[0]) if args else None, least=least, most=most)
        if origin is Literal:
            return Shape("choice", values=tuple(str(getattr(v, "value", v)) for v in get_args(annotation)))
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return Shape("choice", values=tuple(str(m.value) for m in annotation))
        if annotation is bool:
            return Shape("bool")
        if annotation is str:
            return Shape("text")
        if annotation is int:
            return Shape("whole")
        return Shape("other")

    @property
    def is_pair(self) -> bool:
        return self.kind == "list" and self.least == self.most == 2


def readable(exc_errors: list[Any], body: Any, model: type[BaseModel] | None) -> tuple[str, list[Any], int]:
    """One line naming the first few bad fields and what each allows, the first errors without the
    echoed input, and how many errors there were in all (a list of 20,000 bad items is 40,000 errors)."""
    lines: dict[str, None] = {}  # the distinct lines, in order (a dict: each look is one hash)
    unions: dict[tuple[str, ...], str | None] = {}
    for err in exc_errors:
        loc = [p for p in err.get("loc", ()) if p != "body"]
        field = _union_field(loc, model)
        if field is not None and field not in unions:
            unions[field] = _union_line(field, _at(body, field), model)
        if field is not None and unions[field] is not None:
            line = unions[field] or ""
        elif err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error", "")
            line = (
                f"body: not valid JSON at character {loc[0] if loc else '?'} ({reason}); send one JSON object"
            )
        elif err.get("type") == "missing" and not loc:
            # No body at all (b""): the fix is the body itself, as TEI's routes say it.
            line = "body: empty; send one JSON object"
        elif err.get("type") == "model_attributes_type" and not loc:
            line = f"body is {_kind(body)}, not a JSON object: {_object_fix(model)}"
        elif err.get("type") in _OWN_LINES:
            line = str(err.get("msg"))
        else:
            said = _MEMBER.sub(r"\1", str(err.get("msg", "invalid")))
            line = f"{'.'.join(map(str, loc)) or 'body'}: {said}"
        lines[line] = None
    shown = list(lines)[:SHOWN_ERRORS]
    message = "; ".join(shown)
    if len(lines) > len(shown):
        message += f"; ... ({len(exc_errors):,} errors in all, {len(shown)} named)"
    # pydantic's msg names an enum's members by their Python repr (<LongText.TRUNCATE: 'truncate'>): the
    # client sent, and sends, the value alone
    errors = [
        {k: _MEMBER.sub(r"\1", v) if k == "msg" else v for k, v in err.items() if k in ("loc", "msg", "type")}
        for err in exc_errors[:SHOWN_ERRORS]
    ]
    return message, jsonable_encoder(errors), len(exc_errors)


def _object_fix(model: type[BaseModel] | None) -> str:
    """'send a JSON object such as {"inputs": ...}', named by the body's first required field."""
    fields = dict(model.model_fields) if model is not None else {}
    first = next((name for name, f in fields.items() if f.is_required()), next(iter(fields), "inputs"))
    return f'send a JSON object such as {{"{first}": ...}}'


def _union_field(loc: list[Any], model: type[BaseModel] | None) -> tuple[str, ...] | None:
    """The path of the union field `loc` points into (its next step is a union member), or None."""
    path: list[str] = []
    for at, step in enumerate(loc):
        if model is None or not isinstance(step, str):
            return None
        field = _fields(model).get(step)
        if field is None:
            return None
        path.append(step)
        if Shape.of(field.annotation).kind == "union":
            # a member's error (`inputs.str`), not the field's own (`inputs: Field required`)
            return tuple(path) if at + 1 < len(loc) else None
        model = _nested(field)
    return None


def _nested(field: FieldInfo) -> type[BaseModel] | None:
    """The model a field holds (`parameters`: TEI's similarity parameters, or null), else None."""
    for inner in (field.annotation, *get_args(field.annotation)):
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return inner
    return None


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by every name a body may give them (`items` for /static's `inputs`)."""
    found = dict(model.model_fields)
    for field in model.model_fields.values():
        if isinstance(field.validation_alias, AliasChoices):
            found |= {name: field for name in field.validation_alias.choices if isinstance(name, str)}
    return found


def _at(body: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        body = body.get(step) if isinstance(body, dict) else None
    return body


def _union_line(path: tuple[str, ...], value: Any, model: type[BaseModel] | None) -> str | None:
    """The one line for a union field's value, or None where the shapes find nothing wrong."""
    for step in path[:-1]:
        model = _nested(_fields(model)[step]) if model is not None else None
    if model is None:
        return None
    name = path[-1]
    shape = Shape.of(_fields(model)[name].annotation)
    found = _problem(value, shape, name)
    if found is None:
        return None
    where, what, fixed = found
    allowed = "" if fixed else f": give {_allowed(shape, name)}"
    label = ".".join(path)
    if not where:  # the value itself: what it is, and what the field takes
        return f"{label} {what}" if fixed else f"{label} is {_kind(value)}{allowed}"
    chosen = _chosen(value, shape, name)
    item = None if chosen is None else chosen.item
    wrong = 0 if item is None else sum(_problem(v, item, name) is not None for v in value)
    many = f" (the first of {wrong:,} wrong items)" if wrong > 1 else ""
    deeper = "".join(f", position {i}" for i in where[1:])
    return f"{label}: item {where[0]}{many}{deeper} {what}{allowed}"


def _problem(value: Any, shape: Shape, name: str) -> tuple[list[int], str, bool] | None:
    """(where: list indices, what is wrong, whether that says the fix) for `value`, or None if it fits."""
    if shape.kind == "union":
        if any(_problem(value, m, name) is None for m in shape.members):
            return None
        chosen = _chosen(value, shape, name)
        if chosen is not None:
            return _problem(value, chosen, name)
        return [], _is_not(value, _noun(shape, name, short=True)), False
    if shape.kind == "list":
        if not isinstance(value, list):
            return [], _is_not(value, _noun(shape, name)), False
        for at, item in enumerate(value):
            found = None if shape.item is None else _problem(item, shape.item, name)
            if found is not None:
                return [at, *found[0]], found[1], found[2]
        if len(value) < shape.least or (shape.most is not None and len(value) > shape.most):
            if shape.is_pair and shape.item is not None and shape.item.kind == "text":
                return [], f"has {len(value)} texts: a pair is [A, B]", True
            bound = f"{shape.least}" if shape.least == shape.most else f"{shape.least} to {shape.most}"
            return [], f"has {len(value)} items: {_noun(shape, name)} has {bound}", True
        return None
    if _fits(value, shape):
        return None
    return [], _is_not(value, _noun(shape, name, short=True)), False


def _is_not(value: Any, noun: str) -> str:
    """ "is a number (3), not a string"; "is not a finite number (inf), so not a token id"."""
    kind = _kind(value)
    return f"is {kind}, so not {noun}" if kind.startswith("not ") else f"is {kind}, not {noun}"


def _fits(value: Any, shape: Shape) -> bool:
    if shape.kind == "text":
        return isinstance(value, str)
    if shape.kind == "whole":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if shape.kind == "bool":
        return isinstance(value, bool)
    if shape.kind == "choice":  # in the library's spellings (`StrEnum.parse`): MEAN, mean-sqrt-len
        return isinstance(value, str) and value.strip().lower().replace("-", "_") in shape.values
    return True


def _chosen(value: Any, shape: Shape, name: str) -> Shape | None:
    """The list shape of a union that `value`, a list, comes closest to (its first bad item latest)."""
    if shape.kind == "list":
        return shape if isinstance(value, list) else None
    lists = [m for m in shape.members if m.kind == "list"] if isinstance(value, list) else []

    def reach(member: Shape) -> tuple[int, ...]:
        # How far into `value` the member reads before its first problem; a wrong length is read whole.
        found = _problem(value, member, name)
        if found is None:
            return (len(value) + 1,)
        where, _, fixed = found
        return (*(where or [len(value)]), *([len(value) + 1] if fixed else []))

    return max(lists, key=reach, default=None)  # max keeps the first of equals


def _kind(value: Any) -> str:
    """What a JSON value is, in a few words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        # Infinity, NaN, or a number past a float's range (1e400 reads as inf), not one with a fraction
        return f"not a finite number ({value:g})"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return f"a number ({value:g})" if isinstance(value, float) else f"a number ({value})"
    if isinstance(value, float):
        return f"a number with a fraction ({value:g})"
    if isinstance(value, str):
        return f"a string ({value[:20]!r}{'...' if len(value) > 20 else ''})"
    return "a list" if isinstance(value, list) else "an object"


def _noun(shape: Shape, name: str, *, short: bool = False) -> str:
    """`shape` as a noun with its article ("a list of texts"); short: a text is "a string"."""
    if shape.kind == "text":
        return "a string" if short else _TEXT.get(name, "a text")
    if shape.kind == "whole":
        return f"a {_WHOLE.get(name, 'whole number')}"
    if shape.kind == "bool":
        return "true or false"
    if shape.kind == "choice":
        names = [repr(v) for v in shape.values]
        return f"a name ({', '.join(names[:-1])} or {names[-1]})" if len(names) > 1 else names[0]
    if shape.kind == "union":
        return " or ".join(_noun(m, name, short=short) for m in shape.members)
    if shape.kind == "list" and shape.is_pair and shape.item is not None and shape.item.kind == "text":
        return "a pair [A, B]"
    if shape.kind == "list" and shape.is_pair:
        return "a span [start, end]"
    if shape.kind == "list":
        return "a list" if shape.item is None else f"a list of {_plural(shape.item, name)}"
    return "an object"


def _plural(shape: Shape, name: str) -> str:
    if shape.kind == "union":
        return " and ".join(_plural(m, name) for m in shape.members)
    noun = _noun(shape, name)
    if noun.startswith("a list"):
        return "lists" + noun.removeprefix("a list")
    if noun.startswith(("a pair", "a span")):
        return noun[2:].replace(" ", "s ", 1)
    return noun.removeprefix("a ") + "s"


def _allowed(shape: Shape, name: str) -> str:
    """What a union field takes: "a text, a list of texts or a list of token ids"."""
    nouns = [_noun(m, name) for m in shape.members] if shape.kind == "union" else [_noun(shape, name)]
    return nouns[0] if len(nouns) == 1 else ", ".join(nouns[:-1]) + " or " + nouns[-1]
