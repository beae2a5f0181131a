"""The command line's `serve`: the HTTP service (FastAPI + uvicorn) in front of one loaded model."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Annotated

import typer

from ..errors import InvalidInput
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
    warn,
)

_HOST = "127.0.0.1"
_LOOPBACK = (_HOST, "localhost", "::1")


@app.command()
def serve(
    model: ModelOpt = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (0.0.0.0: every interface).")
    ] = _HOST,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: a free one).")
    ] = 8000,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="BERTSCOPE_API_KEY",
            help="Require 'Authorization: Bearer KEY' or 'X-API-Key: KEY'.",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None, typer.Option("--cors-origin", help="Allow browser calls from it (repeatable).")
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="On loopback, a Host name to answer besides 127.0.0.1/localhost/::1: a reverse proxy's "
            "(repeatable).",
        ),
    ] = None,
    max_batch_tokens: Annotated[
        int | None, typer.Option("--max-batch-tokens", min=1, help="Tokens per batch (default: engine's).")
    ] = None,
    max_wait_ms: Annotated[
        float, typer.Option("--max-wait-ms", min=0, help="How long a batch waits for more requests.")
    ] = 2.0,
    max_queue: Annotated[int, typer.Option("--max-queue", min=1, help="Jobs waiting before 429.")] = 256,
    queue_share: Annotated[
        float,
        typer.Option(
            "--queue-share",
            min=0.01,
            max=1.0,
            help="Share of the queue one client address may fill (1: none; behind a proxy).",
        ),
    ] = 0.5,
    max_inputs: Annotated[
        int,
        typer.Option(
            "--max-inputs",
            min=1,
            help="Texts per request (more: 413 on bertscope's routes, TEI's 422 Validation, OpenAI's 400).",
        ),
    ] = 256,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", min=1, help="Request body size before 413.")
    ] = 4 * 1024 * 1024,
    body_timeout: Annotated[
        float, typer.Option("--body-timeout", min=0.1, help="Seconds a request body may take (408 after).")
    ] = 30.0,
    max_request_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-request-tokens",
            min=1,
            help="Tokens one request may run, x layers kept (413 above; default: an eighth of memory).",
        ),
    ] = None,
    max_buffered_bytes: Annotated[
        int,
        typer.Option(
            "--max-buffered-bytes",
            min=1,
            help="Request body and unread answer bytes held at once, all clients (503 above).",
        ),
    ] = 64 * 1024 * 1024,
    max_buffered_share: Annotated[
        float,
        typer.Option(
            "--max-buffered-share",
            min=0.01,
            max=1.0,
            help="Share of --max-buffered-bytes one client address may hold (1: none; behind a proxy).",
        ),
    ] = 0.5,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout", min=0.1, help="Seconds a request's headers may take (closed after)."
        ),
    ] = 10.0,
    send_timeout: Annotated[
        float,
        typer.Option(
            "--send-timeout", min=0.1, help="Seconds a client may take none of its answer (dropped after)."
        ),
    ] = 30.0,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections",
            min=1,
            help="Connections open at once (more: 503 and closed; default: half the open-file limit, "
            "at most 4096).",
        ),
    ] = None,
    connection_share: Annotated[
        float,
        typer.Option(
            "--connection-share",
            min=0.01,
            max=1.0,
            help="Share of --max-connections one client address may hold (1: none; behind a proxy).",
        ),
    ] = 0.5,
    max_answer_floats: Annotated[
        int, typer.Option("--max-answer-floats", min=1, help="Numbers one answer may hold before 413.")
    ] = 8 * 1024 * 1024,
    auto_split: Annotated[
        bool, typer.Option("--auto-split", help="Split requests over --max-inputs instead of a 413.")
    ] = False,
    no_batching: Annotated[
        bool, typer.Option("--no-batching", help="One forward per request (for comparison).")
    ] = False,
    threads: ThreadsOpt = None,
    post: Annotated[
        list[str] | None,
        typer.Option("--post", help="Load a fitted post-processing as NAME=FILE (repeatable)."),
    ] = None,
    store: Annotated[
        list[str] | None,
        typer.Option("--store", help="Serve a token/word store for /occurrences as NAME=FILE (repeatable)."),
    ] = None,
    token_ids: Annotated[
        str,
        typer.Option(
            "--token-ids",
            help="Lists of ints on /v1/embeddings and /embed: 'refuse' (a 422 naming the fix; tiktoken's ids "
            "would be silently wrong) or 'model' (they are this model's own ids).",
        ),
    ] = "refuse",
    device: DeviceOpt = "auto",
    dtype: DtypeOpt = "float32",
    backend: BackendOpt = "auto",
    quantize: QuantizeOpt = "none",
    fast: FastOpt = False,
    fast_min_cosine: FastMinCosineOpt = None,
    remeasure: RemeasureOpt = False,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level.")] = "info",
) -> None:
    """Serve every embedding over HTTP: TEI's API (/embed ...), OpenAI's /v1/embeddings, bertscope's /v2/.

    Examples: `bertscope serve` (http://127.0.0.1:8000/docs), `bertscope serve --port 9000 --api-key s3cret`,
    `bertscope serve --token-ids model` (take this model's own token ids on /v1/embeddings and /embed)
    """
    from ..server import ServerSettings, create_app
    from ..server.capacity import Server
    from ..server.connection import uvicorn_config
    from ..server.hosts import allowed_host, guard_loopback
    from ..server.settings import TokenIds

    if token_ids not in {t.value for t in TokenIds}:
        raise InvalidInput(f"--token-ids: {token_ids!r} is not one of refuse, model")

    if api_key is None and os.environ.get("BERTSCOPE_API_KEY") == "":
        # click ignores an empty variable: serving with no key when one was meant must not pass in silence.
        raise InvalidInput("BERTSCOPE_API_KEY is set but empty; set a key, or unset it to serve without one")
    if api_key is not None and not api_key.strip():
        raise InvalidInput(
            "--api-key is empty: an empty key is not allowed; give a key, or leave --api-key out to serve "
            "without one"
        )
    allowed = [allowed_host(name) for name in allow_host or ()]  # a name no Host carries: said before loading
    named_files = [_named_file(item, "--post") for item in post or ()]
    named_stores = [_named_file(item, "--store") for item in store or ()]
    settings = ServerSettings(
        api_key=api_key,
        cors_origins=tuple(cors_origin or ()),
        max_batch_tokens=max_batch_tokens,
        max_wait_ms=max_wait_ms,
        max_queue=max_queue,
        queue_share=queue_share,
        max_inputs=max_inputs,
        max_body_bytes=max_body_bytes,
        max_answer_floats=max_answer_floats,
        body_timeout_s=body_timeout,
        max_buffered_bytes=max_buffered_bytes,
        max_buffered_share=max_buffered_share,
        max_request_tokens=max_request_tokens,
        header_timeout_s=header_timeout,
        send_timeout_s=send_timeout,
        max_connections=max_connections,
        connection_share=connection_share,
        auto_split=auto_split,
        batching=not no_batching,
        posts=tuple(named_files),
        stores=tuple(named_stores),
        token_ids=TokenIds(token_ids),
    )
    listening = listening_socket(host, port)  # a busy port is said before seconds of loading, not after
    port = listening.getsockname()[1]  # --port 0: the free port the system chose, said below
    if host not in _LOOPBACK and not api_key:
        warn(f"listening on {host} with no --api-key: anyone who reaches it can use it")
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
    # the app loads the --post files and --store stores: a bad one fails here, before "serving" is said
    app = create_app(m, settings=settings)
    guard_loopback(app, host, allow=allowed)  # on loopback, only requests addressed to it
    err.print(f"serving {m.info().source} on http://{host}:{port} (docs at /docs)", highlight=False)
    config = uvicorn_config(app, host=host, port=port, settings=settings, log_level=log_level)
    Server(config).run(sockets=[listening])


def listening_socket(host: str, port: int) -> socket.socket:
    """The service's socket, bound now: a port in use or a host this machine is not is one line
    (`serve` and `explore` bind it before the model loads)."""
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise InvalidInput(
            f"--host {host}: {error.strerror}; give an address or name of this machine"
        ) from None
    family, kind, proto, _, address = info[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a restart reuses it
    try:
        sock.bind(address)
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise InvalidInput(
                f"port {port} on {host} is in use: choose another --port, or stop what listens there"
            ) from None
        raise InvalidInput(
            f"cannot listen on {host}:{port}: {error.strerror}; choose another --host or --port"
        ) from None
    sock.set_inheritable(True)
    return sock


def _named_file(item: str, option: str) -> tuple[str, str]:
    """NAME=FILE from --post or --store whose FILE is there, or a usage error naming the form or the file;
    checked before the model loads (a --store may be a folder of parts)."""
    name, sep, path = item.partition("=")
    if not sep or not name or not path:
        raise InvalidInput(f"{option} takes NAME=FILE (e.g. {option} name=file), got {item!r}")
    if not Path(path).exists():
        raise InvalidInput(f"{option} {item}: there is no file {path}")
    return name, path
