"""Library messages in the route's JSON fields: `long='window'` reads `"long": "window"` on the service.

The library speaks to Python callers (`embed(long='window')`) and names the command line's flag beside
(`pooling='cls'; --pooling cls`); a client of the service sent JSON. `as_fields` rewrites each keyword
form of an option into the field of the route that was called, as `cli/wording.py` does for flags:

    long='window' or 'error'             ->  "long": "window" or "error"
    (pooling='cls'; --pooling cls)       ->  ("pooling": "cls")            (the flag dropped)
    late=False / as_words=true           ->  "late": false / "as_words": true
    prompt_name= on TEI's /similarity    ->  "prompt_name" (in "parameters")
    long='truncate' on TEI's routes      ->  "truncate": true               (TEI's field for the cut)
    use static_word('x') on /static      ->  send "as_words": true
    --debiased (debiased=True)           ->  "debiased": true

A suggestion naming an option the route does not take (`prompt=`, `long='window'` on TEI's routes) is
dropped with its clause rather than name a field that does not exist. Keyword forms that are not the
library's options (`check_embedding_ctx_length=False`, advice to an OpenAI client) stay as written.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from typing import Any, get_args

from fastapi import Request
from pydantic import BaseModel

__all__ = ["OPTIONS", "as_fields", "body_model", "route_body"]

# The library's option keywords that its messages write as `name=value`; other names stay as written.
OPTIONS = frozenset(
    {
        "as_words", "baseline", "chunk_overlap", "chunk_size", "chunks", "combine", "debiased", "dimensions",
        "exact", "head", "include_special", "k", "late", "layer", "layers", "level", "long", "mask_special",
        "mean_heads", "normalize", "overlap", "pooling", "post", "prompt", "prompt_name", "reference", "size",
        "stride", "subword", "top", "truncate", "word", "words",
    }
)  # fmt: skip
# Facts of a model's config.json, said as JSON (`"type_vocab_size": 1`), never dropped.
_CONFIG = frozenset({"type_vocab_size", "inner_group_num"})
# Whole phrases with no field of their own, said in the service's terms first.
_PHRASES = (
    # prompt= is the prompt's text; the service takes only the model's prompts by name.
    (re.compile(r"give the text with prompt="), "leave prompt_name= out"),
    (re.compile(r"\(level='tokens' or 'words'\)"), "(POST /embed_tokens)"),
    (re.compile(r"use static_word\((?:'[^']*'|\"[^\"]*\")\)"), "send as_words=true"),
)
_NAMES = "|".join(sorted(OPTIONS | _CONFIG, key=len, reverse=True))
_VALUE = (
    r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\.\.\.|(?:True|False|None|true|false|null)\b"
    r"|-?\d+(?:\.\d+)?(?:e-?\d+)?(?!\w)|(?=[\s),;]|$)"  # `post=` alone: the option itself
)
_FORM = re.compile(
    rf"(?P<lead>--[\w-]+ \()?(?<![-\w.'\"])(?P<kw>{_NAMES})=(?P<value>{_VALUE})"
    r"(?P<dual> \(--[\w-]+[^()]*\)|; --[\w-]+[^();]*(?=\)))?"
    # an aside before more values (`long='window' (the default) or 'error'`) stays as written
    r"(?P<aside> \([^()=]*\)(?=(?:,|,? or|,? not| \(or| and)\s*'))?"
    r"(?P<tails>(?:(?:,|,? or|,? not| \(or| and)\s*'[^']*')*)"
    r"(?(lead)\))"
)
# Where a dropped suggestion's clause starts (the nearest before it).
_CLAUSE = re.compile(r"; |, or |,? or | \(or | \(|, ")


def body_model(request: Request) -> type[BaseModel] | None:
    """The request model of the route `request` reached (None before routing, or for a route without one)."""
    return route_body(request.scope.get("route"))


def route_body(route: object) -> type[BaseModel] | None:
    """The request model of `route` (None for a route without one, or no route)."""
    field = getattr(route, "body_field", None)
    model = getattr(getattr(field, "field_info", None), "annotation", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def as_fields(message: str, model: type[BaseModel] | None) -> str:
    """`message` with each keyword form of an option written as the route's JSON field (see above)."""
    if model is None:
        return message
    places = _places(model)
    for phrase, said in _PHRASES:
        message = phrase.sub(said, message)
    drops: list[tuple[int, int]] = []

    def form(match: re.Match[str]) -> str:
        said = _field(match["kw"], match["value"], places)
        if said is None:
            drops.append(match.span())
            return match.group(0)
        tails = re.sub(r"'([^']*)'", lambda t: json.dumps(t[1]), match["tails"])
        return said + (match["aside"] or "") + tails

    text = _FORM.sub(form, message)
    if drops:
        text = _drop(message, list(drops), lambda piece: _FORM.sub(form, piece))
    # `leave layers out ("layers")`: the field named twice.
    return re.sub(r'\b(\w+) out \("\1"\)', r'"\1" out', text)


def _field(kw: str, value: str, places: dict[str, tuple[str, ...]]) -> str | None:
    """`kw=value` as the route's JSON (`"long": "window"`), or None where the route has no such field."""
    if kw in _CONFIG:
        return f'"{kw}": {_json(value)}'
    if kw == "long" and kw not in places and "truncate" in places:
        # TEI's and OpenAI's routes cut with `truncate` (TEI's name); they have no windows.
        cut = {"'truncate'": "true", "'error'": "false"}.get(value.replace('"', "'"))
        return None if cut is None else _render(places["truncate"], cut)
    if kw not in places:
        return None
    return _render(places[kw], None if value in ("", "...") else _json(value))


def _render(path: tuple[str, ...], value: str | None) -> str:
    """A field at `path` with `value` (JSON) as a client writes it; None: the field alone."""
    if value is None:
        inside = f' (in "{path[-2]}")' if len(path) > 1 else ""
        return f'"{path[-1]}"{inside}'
    said = f'"{path[-1]}": {value}'
    for outer in reversed(path[:-1]):
        said = f'"{outer}": {{{said}}}'
    return said


def _json(value: str) -> str:
    """A Python (or JSON) literal as JSON: 'x' -> "x", True -> true, [1, 2] -> [1, 2]."""
    if value in ("true", "false", "null"):
        return value
    try:
        return json.dumps(ast.literal_eval(value))
    except (ValueError, SyntaxError):
        return value


def _drop(message: str, spans: list[tuple[int, int]], rest: Any) -> str:
    """`message` without the clause of each span (a suggestion of a field the route lacks), from the
    separator before it to the end of its clause; the text between them rewritten by `rest`."""
    out, at = [], 0
    for start, end in spans:
        if start < at:
            continue  # inside a clause already dropped
        clause = [
            c for c in _CLAUSE.finditer(message, at, start) if _holds(message[c.start() : start], c.group(0))
        ]
        if not clause:  # the option is what the sentence is about: keep it, without the `=`
            out.append(rest(message[at:start]) + message[start:end].replace("=", " ", 1))
            at = end
            continue
        cut = clause[-1]
        out.append(rest(message[at : cut.start()]))
        closing = message.find(")", end) + 1 if "(" in cut.group(0) else 0
        ends = [i for i in (message.find("; ", end), message.find(". ", end)) if i >= 0]
        at = closing or min(ends, default=len(message))
    out.append(rest(message[at:]))
    return "".join(out)


def _holds(lead: str, separator: str) -> bool:
    """Whether the clause that `separator` opens (`lead`: from it to the dropped option) holds the option;
    not an aside closed before it, as ` (model2vec)` before `layers=` is: cut from there to the next ")",
    a static model's refusal lost all but its first words, its fix too."""
    depth = 0
    for char in lead:
        depth += (char == "(") - (char == ")")
        if depth < 0:
            return False
    # A clause opening with "(" holds the option only while that parenthesis is still open.
    return depth > 0 or "(" not in separator


@cache
def _places(model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """Each field a body of `model` takes, by name, with its path (`("parameters", "truncate")`)."""
    found: dict[str, tuple[str, ...]] = {}
    for name, field in model.model_fields.items():
        found.setdefault(name, (name,))
        for inner in (*get_args(field.annotation), field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                for sub, path in _places(inner).items():
                    found.setdefault(sub, (name, *path))
    return found
