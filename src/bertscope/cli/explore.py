"""The command line's `explore`: the service on a free loopback port, with the explorer page opened."""

from __future__ import annotations

import socket
import threading
import time
import webbrowser
from typing import Annotated

import typer

from .app import (
    BackendOpt,
    DeviceOpt,
    DtypeOpt,
    FastMinCosineOpt,
    FastOpt,
    ModelOpt,
    QuantizeOpt,
    RemeasureOpt,
    ThreadsOpt,
    app,
    err,
    interrupted_said,
    load_model,
)
from .serve import listening_socket

_HOST = "127.0.0.1"


def free_port(host: str = _HOST) -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@app.command()
def explore(
    model: ModelOpt = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")
    ] = 0,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the page in the default browser.")
    ] = True,
    threads: ThreadsOpt = None,
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    fast: FastOpt = False,
    fast_min_cosine: FastMinCosineOpt = None,
    remeasure: RemeasureOpt = False,
) -> None:
    """Open the explorer: tokens, anatomy, layers, sentences and vocabulary of a model, in the browser.

    Examples: `bertscope explore`, `bertscope explore --port 8765 --no-open`, `bertscope explore -m ./my-bert`

    For post-processings (--post), limits or a key (--api-key), run `bertscope serve` with them: it
    serves the same page at /.
    """
    import uvicorn

    from ..server import create_app
    from ..server.hosts import guard_loopback

    # Bound before the model loads, as `serve` binds it: a busy port is one line, not uvicorn's error
    # after seconds of loading; --port 0 takes the free port the system gives.
    listening = listening_socket(_HOST, port)
    chosen = listening.getsockname()[1]
    with interrupted_said():  # uvicorn says its own lines once it runs
        m = load_model(
            model,
            device=device,
            dtype=dtype,
            backend=backend,
            quantize=quantize,
            threads=threads,
            fast=fast,
            fast_min_cosine=fast_min_cosine,
        )
    url = f"http://{_HOST}:{chosen}/"
    explorer = create_app(m)
    guard_loopback(explorer, _HOST)  # only requests addressed to loopback: a page's DNS rebinding is refused
    server = uvicorn.Server(uvicorn.Config(explorer, host=_HOST, port=chosen, log_level="warning"))

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        if server.started:
            print(url, flush=True)
            err.print(f"exploring {m.info().source} at {url} (Ctrl+C stops)", highlight=False)
            if open_browser:
                webbrowser.open(url)

    threading.Thread(target=announce, daemon=True).start()
    server.run(sockets=[listening])
