"""Ray itself, as the runner meets it: importing it, what an actor asks of the cluster, and a Ray error
that carries a bertscope one turned back into that one (the local job's one line)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..core.encoder import CUDA_TOKEN_BUDGET
from ..errors import BertscopeError, InvalidInput

__all__ = ["IO_CPUS", "import_ray", "default_batch", "gpus_per_worker", "raising_bertscope_errors"]

# Readers and writers are light next to the model; asking no CPU for them keeps them from waiting forever
# behind actors that hold every CPU (2 actors on a 2-CPU machine would otherwise deadlock).
IO_CPUS = 0.0
_INSTALL = "the Ray engine needs Ray: pip install 'bertscope[ray]' (or pip install 'ray[data]')"
_RAY_ADVICE = re.compile(r"\nFailed to [^\n]* after \d+/\d+ attempts \(total backoff .*\Z", re.DOTALL)


def import_ray() -> Any:
    """The ray module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InvalidInput(_INSTALL) from exc
    return ray


def default_batch(gpus: float) -> int:
    """Rows per Ray batch when none is given: a GPU's token budget / 4, or 512 rows on CPUs (the engine
    splits a Ray batch into forwards by its own budget; a Ray batch amortises Ray's per-batch cost)."""
    return CUDA_TOKEN_BUDGET // 4 if gpus else 512


def gpus_per_worker(ray: Any, device: str) -> float:
    """GPUs each embedding actor asks Ray for on `device` (auto: one where the cluster has GPUs)."""
    if device.startswith("cuda"):
        return 1.0
    if device == "auto":
        if not ray.is_initialized():
            ray.init()
        return 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
    return 0.0


@contextmanager
def raising_bertscope_errors(dataset: Any) -> Iterator[None]:
    """Run `dataset` so that a BertscopeError raised in a read task or an actor comes out as itself.

    Ray wraps it (RayTaskError; an actor's in a UserCodeException that loses it, unless the dataset's
    context asks for the original, as this sets) and prints its own traceback of it: the command line
    would show that instead of the local job's one line. Ray Data's console errors are held back
    meanwhile: dropped when the error was bertscope's, shown as they were for any other failure.
    """
    dataset.context.raise_original_map_exception = True  # this dataset's own copy of the context
    held, found = _HeldErrors(), None
    try:
        yield
    except Exception as exc:
        found = _bertscope_error(exc)
        if found is None:
            raise
        # Ray appends its retry advice to the message (args); the local job says only what is before it
        if found.args and isinstance(found.args[0], str):
            found.args = (_RAY_ADVICE.sub("", found.args[0]), *found.args[1:])
        raise found from None
    finally:
        held.release(show=found is None)


def _bertscope_error(exc: BaseException) -> BertscopeError | None:
    """The BertscopeError a Ray error carries (its `cause`, or down its exception chain), or None."""
    from ray.exceptions import RayError

    todo, seen = [exc], set()
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        # RayTaskError(CorpusError) is a CorpusError too, but its message is Ray's: take the cause's.
        if isinstance(current, BertscopeError) and not isinstance(current, RayError):
            return current
        linked = (getattr(current, "cause", None), current.__cause__, current.__context__)
        todo.extend(e for e in linked if isinstance(e, BaseException))
    return None


class _HeldErrors:
    """Ray Data's error records, held back from its console handlers until the job's outcome is known."""

    def __init__(self) -> None:
        self.held: list[logging.LogRecord] = []
        self.handlers = [
            h
            for h in logging.getLogger("ray.data").handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
        ]
        for handler in self.handlers:
            handler.addFilter(self._hold)

    def _hold(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        self.held.append(record)
        return False

    def release(self, *, show: bool) -> None:
        for handler in self.handlers:
            handler.removeFilter(self._hold)
        if show:
            for record in dict.fromkeys(self.held):  # a record held by two handlers is shown once by each
                for handler in self.handlers:
                    handler.handle(record)
        self.held.clear()
