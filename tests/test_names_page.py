"""docs/names.md's table of older names is what the code keeps: each older library attribute is a
property beside its new field, each older service field sits beside its new one marked deprecated in
the OpenAPI schema, each older flag is read but hidden from the help. A row the code drops, or a rename
the page forgets to list as still working, fails here."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

import bertscope
from bertscope.backends.modes import ModeReport
from bertscope.cli import app
from bertscope.core.model_info import ExactChoice
from bertscope.core.results import ChunkEmbeddings
from bertscope.io.occurrences import Occurrences
from bertscope.research.baseline import Threshold
from bertscope.research.contextuality import Contextuality
from bertscope.research.plots import LayerCosines
from bertscope.research.senses import Sense
from bertscope.verify.reference import Verification

PAGE = Path(__file__).resolve().parent.parent / "docs" / "names.md"
LIBRARY = {
    "ModelInfo": bertscope.ModelInfo,
    "Tokens": bertscope.Tokens,
    "TokenEmbeddings": bertscope.TokenEmbeddings,
    "SentenceEmbeddings": bertscope.SentenceEmbeddings,
    "ChunkEmbeddings": ChunkEmbeddings,
    "JobSummary": bertscope.JobSummary,
    "Neighbor": bertscope.Neighbor,
    "Senses": bertscope.Senses,
    "LayerCosines": LayerCosines,
    "Contextuality": Contextuality,
    "Sense": Sense,
    "ModeReport": ModeReport,
    "Occurrences": Occurrences,
    "Verification": Verification,
    "Threshold": Threshold,
}
FUNCTIONS = {"Model.use_openvino": bertscope.Model.use_openvino, "word_senses": bertscope.word_senses}
# The dicts the library hands out whose older key still reads (the type each is built as)
DICTS = {"info().exact": ExactChoice}


def _older_names() -> list[tuple[str, str, str]]:
    """(surface, older name, name) of each row of the page's "Older names that still work" table."""
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Older names that still work", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("surface", "") or set(cells[0]) <= {"-"}:
            continue
        rows.append((cells[0], cells[1], cells[2]))
    return rows


ROWS = _older_names()


def _names(cell: str) -> list[str]:
    """The names a cell gives in backticks, without a keyword's `=` or a flag's short form."""
    return [n.rstrip("=").split("/")[-1] for n in re.findall(r"`([^`]+)`", cell)]


def test_the_page_lists_every_kind_of_rename() -> None:
    surfaces = " ".join(s for s, _, _ in ROWS)
    assert len(ROWS) >= 14, ROWS
    assert "`GET /v2/info`" in surfaces and "`verify`" in surfaces and "`ModelInfo`" in surfaces


@pytest.mark.parametrize(("surface", "old", "new"), [r for r in ROWS if _names(r[0])[0] in LIBRARY])
def test_an_older_library_attribute_is_a_property_beside_its_field(surface: str, old: str, new: str) -> None:
    for name in _names(surface):
        cls = LIBRARY[name]
        (old_name,) = _names(old)
        (new_name,) = _names(new)
        assert isinstance(inspect.getattr_static(cls, old_name), property), (name, old_name)
        fields = getattr(cls, "__dataclass_fields__", {})
        assert new_name in fields or isinstance(inspect.getattr_static(cls, new_name, None), property), (
            name,
            new_name,
        )


@pytest.mark.parametrize(("surface", "old", "new"), [r for r in ROWS if r[0].strip("`") in FUNCTIONS])
def test_a_function_takes_the_new_keywords_and_the_old_one(surface: str, old: str, new: str) -> None:
    parameters = inspect.signature(FUNCTIONS[surface.strip("`")]).parameters
    for name in _names(old) + _names(new):
        assert name in parameters, (surface, name)


@pytest.mark.parametrize(("surface", "old", "new"), [r for r in ROWS if _names(r[0])[0] in DICTS])
def test_an_older_dict_key_reads_with_a_warning_and_is_not_listed(surface: str, old: str, new: str) -> None:
    (old_name,) = _names(old)
    (new_name,) = _names(new)
    given = DICTS[_names(surface)[0]]({new_name: 1.5})
    with pytest.warns(DeprecationWarning, match=old_name):
        assert given[old_name] == 1.5
    assert list(given) == [new_name], (surface, list(given))  # --json and the service say the new key alone


# The commands whose rows name an old flag
COMMANDS = ("verify", "distill", "plot static")


def test_every_row_is_checked() -> None:
    """A row no test above reads (a surface they do not know) fails here, not silently."""
    for surface, _, _ in ROWS:
        name = surface.strip("`")
        known = (
            _names(surface)[0] in LIBRARY
            or name in FUNCTIONS
            or name in COMMANDS
            or _names(surface)[0] in DICTS
        )
        assert known or re.match(r"(GET|POST) /", name), surface


@pytest.fixture(scope="module")
def schemas(bundled: bertscope.Model) -> dict[str, Any]:
    from bertscope.server import create_app

    return create_app(bundled).openapi()["components"]["schemas"]


@pytest.mark.parametrize(("surface", "old", "new"), [r for r in ROWS if re.match(r"`(GET|POST) /", r[0])])
def test_an_older_service_field_is_sent_beside_its_new_one_deprecated(
    schemas: dict[str, Any], surface: str, old: str, new: str
) -> None:
    (old_name,) = _names(old)
    (new_name,) = _names(new)
    holding = [
        name
        for name, schema in schemas.items()
        if old_name in schema.get("properties", {}) and new_name in schema.get("properties", {})
    ]
    assert holding, (surface, old_name, new_name)
    for name in holding:
        properties = schemas[name]["properties"]
        assert properties[old_name].get("deprecated") is True, (name, old_name)
        assert not properties[new_name].get("deprecated"), (name, new_name)


def _command(name: str) -> Any:
    """The click command typer builds for `bertscope NAME` (`plot static`: a group's command; typer's click
    may be its own copy)."""
    command = typer.main.get_command(app)
    for word in name.split():
        command = command.commands[word]  # type: ignore[attr-defined]
    return command


@pytest.mark.parametrize(("surface", "old", "new"), [r for r in ROWS if r[0].strip("`") in COMMANDS])
def test_an_older_flag_is_read_and_hidden(surface: str, old: str, new: str) -> None:
    command = _command(surface.strip("`"))
    (old_flag,) = re.findall(r"`([^`]+)`", old)
    new_flags = re.findall(r"`([^`]+)`", new)[0].split("/")
    options = {opt: p for p in command.params if p.param_type_name == "option" for opt in p.opts}
    assert old_flag in options, (surface, old_flag)
    assert options[old_flag].hidden, (surface, old_flag)
    for flag in new_flags:
        assert flag in options and not options[flag].hidden, (surface, flag)
