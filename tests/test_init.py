"""The package's public names: lazy (PEP 562), yet every one in `__all__` is there."""

from __future__ import annotations

import pytest

import bertscope


@pytest.mark.parametrize("name", bertscope.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(bertscope, name) is not None
    assert name in dir(bertscope)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        bertscope.lod  # type: ignore[attr-defined]  # noqa: B018


def test_same_objects_as_their_modules() -> None:
    from bertscope.errors import JobInterrupted
    from bertscope.io.job import embed_corpus
    from bertscope.model import load

    assert bertscope.load is load and bertscope.embed_corpus is embed_corpus
    assert bertscope.JobInterrupted is JobInterrupted
