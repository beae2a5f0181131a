"""Ray itself, as the runner meets it: importing it, what an actor asks of the cluster, and a Ray error
that carries a bertscope one turned back into that one (the local job's one line)."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..core.encoder import CUDA_TOKEN_BUDGET
from ..errors import BertscopeError, InvalidInput

__all__ = [
    "IO_CPUS",
    "CONNECT_SECONDS",
    "import_ray",
    "start_ray",
    "default_batch",
    "gpus_per_worker",
    "raising_bertscope_errors",
]

# Readers and writers are light next to the model; asking no CPU for them keeps them from waiting forever
# behind actors that hold every CPU (2 actors on a 2-CPU machine would otherwise deadlock).
IO_CPUS = 0.0
_INSTALL = "the Ray engine needs Ray: pip install 'bertscope[ray]' (or pip install 'ray[data]')"
# How long joining a cluster (--address) may wait for it to answer: Ray alone waits 20 tries of ~40 s.
CONNECT_SECONDS = 10.0
_RAY_ADDRESS = "RAY_ADDRESS"  # the cluster ray.init joins when given no address (Ray's ray_constants)
_TRIES = "RAY_gcs_server_port_wait_time_s"  # read by ray.init when it joins a cluster: its tries, ~1 s apart
_RAY_ADVICE = re.compile(r"\nFailed to [^\n]* after \d+/\d+ attempts \(total backoff .*\Z", re.DOTALL)
# Ray's warnings that are false or idle for a bertscope job, held off the console when quiet. An actor
# pool given fewer blocks than actors (a resumed job with nothing left gets none) warns through
# `warnings`; Ray Data logs that its progress bars are off, which the job's own -q asked; and that the
# cluster has no CPU free while the actors hold every CPU. On a Ray the job started itself that is false
# (the readers and writers ask for none, IO_CPUS, so the job does not hang as it says); on a cluster it
# joined, other work may hold every CPU and the job does hang: it is shown there.
_FEW_INPUTS = "The minimum number of concurrent actors"
_HELD_WARNINGS = ("Progress bars disabled", "Progress bars for operators")
_NO_FREE_CPUS = "does not have any available CPUs"


def import_ray() -> Any:
    """The ray module, or a one-line error saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise InvalidInput(_INSTALL) from exc
    return ray


def start_ray(ray: Any, address: str | None) -> bool:
    """Start a local Ray (`address` None) or join the cluster at `address`, unless Ray is running in this
    process already (the caller's own, left as it is); whether this call started a local Ray (the job
    then holds every CPU of it), as Ray says once started, not a cluster it joined (RAY_ADDRESS, a
    `ray start` on this machine). Ray's own log lines are held to errors (its INFO and Ray Data's progress
    lines would bury bertscope's one line); a cluster that is not there is InvalidInput within
    `CONNECT_SECONDS`, naming the address, instead of Ray's minutes of retries."""
    if ray.is_initialized():
        return False
    # With no address ray.init joins the cluster RAY_ADDRESS names, or the last `ray start` on this
    # machine: which it did is read from Ray after it (`_started_here`); a set RAY_ADDRESS is a join
    joining = address in (None, "auto") and bool(os.environ.get(_RAY_ADDRESS))
    if address is not None:
        _refuse_unreachable(address)
    # Joining: one connection try, not Ray's 20 (each ~40 s), so an unreachable cluster costs little. A
    # local start keeps Ray's own wait for the head it starts; a value set by the user is theirs.
    mine = address is not None and _TRIES not in os.environ
    if mine:
        os.environ[_TRIES] = "1"
    try:
        with _sigterm_kept():
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except ConnectionError as exc:
        raise InvalidInput(_no_cluster(address, str(exc).splitlines()[0] if str(exc) else "")) from None
    finally:
        if mine:
            os.environ.pop(_TRIES, None)
    return not joining and _started_here(ray)


def _started_here(ray: Any) -> bool:
    """Whether ray.init started the head node in this process rather than joined a running one; False
    where Ray does not say (Ray Client keeps no node here): a joined cluster's warnings stay shown."""
    # Ray's worker.py: ray.init makes `_global_node` a Node with head=True only where it starts one; one
    # it joins is head=False, connect_only=True
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    return getattr(node, "head", False) is True


@contextmanager
def _sigterm_kept() -> Iterator[None]:
    """Keep this process's SIGTERM handler through ray.init, which installs Ray's own on the driver: its
    sys.exit(signum) ends in Ray's C++ crash dump (exit 134), where the command line says 'terminated'."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler, and Ray sets none from another
        return
    kept = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if kept is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGTERM, kept)


def _refuse_unreachable(address: str) -> None:
    """A HOST:PORT (or ray://HOST:PORT) that nothing answers at, refused before Ray waits on it."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local": Ray finds (or refuses) the cluster itself, at once
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        reason = exc.strerror or f"no answer in {CONNECT_SECONDS:g} s"
        raise InvalidInput(_no_cluster(address, reason)) from None


def _no_cluster(address: str | None, reason: str) -> str:
    why = f" ({reason.rstrip('.')})" if reason else ""
    where = "on this machine (address auto)" if address == "auto" else f"at {address}"
    return (
        f"no Ray cluster answers {where}{why}: start one there (ray start --head), give the address "
        "of a running one (address=, --address HOST:PORT), or leave it out to run on a local Ray"
    )


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
def raising_bertscope_errors(dataset: Any, *, quiet: bool = False, own_ray: bool = False) -> Iterator[None]:
    """Run `dataset` so that a BertscopeError raised in a read task or an actor comes out as itself.

    Ray wraps it (RayTaskError; an actor's in a UserCodeException that loses it, unless the dataset's
    context asks for the original, as this sets) and prints its own traceback of it: the command line
    would show that instead of the local job's one line. Ray Data's console errors are held back
    meanwhile: dropped when the error was bertscope's, shown as they were for any other failure.
    `quiet` keeps Ray Data's INFO lines (its plan, and its progress where stderr is not a terminal) off
    the console too, and the warnings that are false or idle for a bertscope job (an actor pool with
    fewer inputs than actors, progress bars off, and with `own_ray`, a Ray the job started itself, no CPU
    free for the readers); its log file under the Ray session keeps them.
    """
    dataset.context.raise_original_map_exception = True  # this dataset's own copy of the context
    held, found = _HeldErrors(quiet=quiet, own_ray=own_ray), None
    try:
        with warnings.catch_warnings():
            if quiet:
                warnings.filterwarnings("ignore", _FEW_INPUTS, UserWarning)
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

    def __init__(self, *, quiet: bool = False, own_ray: bool = False) -> None:
        self.quiet = quiet  # INFO records dropped too
        self.warnings = (*_HELD_WARNINGS, _NO_FREE_CPUS) if own_ray else _HELD_WARNINGS
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
            if not self.quiet:
                return True
            said = record.getMessage()
            return record.levelno >= logging.WARNING and not any(held in said for held in self.warnings)
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
