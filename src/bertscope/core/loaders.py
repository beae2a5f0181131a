"""The model loader, registered from the top and called from below: load a model by name without the facade.

The `bertscope` package registers `bertscope.load` here when it is imported (lazily: the facade itself is
imported on the first load), as text-embeddings-inference builds its backend at the top and hands it down.
Search, the Ray runner and the research over stores call `load_model(name, **settings)`; none imports
`bertscope.model`. This module imports nothing, so registering costs `import bertscope` nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Loader", "register_loader", "load_model"]

# `bertscope.load`'s signature: (name, *, device, dtype, backend, quantize, mode, threads, ...) -> Model.
Loader = Callable[..., Any]

_registered: list[Loader] = []


def register_loader(loader: Loader) -> None:
    """Make `loader` the one `load_model` calls (the package registers `bertscope.load`)."""
    _registered[:] = [loader]


def load_model(name: Any = None, **settings: Any) -> Any:
    """A model loaded by name (None: the bundled default) with `bertscope.load`'s settings."""
    if not _registered:
        from ..errors import ModelLoadError

        raise ModelLoadError("no model loader is registered: import bertscope (it registers bertscope.load)")
    return _registered[0](name, **settings)
