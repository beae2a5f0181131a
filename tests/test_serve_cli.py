"""`bertscope serve` binds its port before it loads the model: a port in use is one line, said at once."""

from __future__ import annotations

import socket

import pytest

from console import run_main


def test_a_port_in_use_is_one_line_before_any_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to load the model, say "serving ... on" the busy port, then print uvicorn's bind error."""
    import bertscope.cli.serve as serve

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the port was bound")

    monkeypatch.setattr(serve, "load_model", no_load)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ran = run_main("serve", "--port", str(port))
    assert ran.code != 0 and ran.stderr.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use: choose another --port, or stop what listens there"
    ], ran
    assert "serving" not in ran.stderr and "Traceback" not in ran.stderr


def test_a_host_that_is_not_this_machines_is_one_line() -> None:
    ran = run_main("serve", "--host", "no-such-host.invalid", "--port", "1")
    assert ran.code != 0 and ran.stderr.startswith("error: --host no-such-host.invalid:"), ran
    assert len(ran.stderr.strip().splitlines()) == 1


def test_the_shares_of_one_client_reach_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """--queue-share and --max-buffered-share set the ServerSettings the app is made with (1 behind a proxy,
    where every client has the proxy's address)."""
    import bertscope.cli.serve as serve
    import bertscope.server as server
    from bertscope.errors import InvalidInput

    made: list[object] = []

    def no_app(model: object, *, settings: object) -> None:
        made.append(settings)
        raise InvalidInput("stopped here")

    monkeypatch.setattr(serve, "load_model", lambda *args, **kwargs: object())
    monkeypatch.setattr(server, "create_app", no_app)
    ran = run_main("serve", "--port", "0", "--queue-share", "1", "--max-buffered-share", "0.25")
    assert ran.stderr.strip().endswith("error: stopped here"), ran
    assert [(s.queue_share, s.max_buffered_share) for s in made] == [(1.0, 0.25)]  # type: ignore[attr-defined]
    refused = run_main("serve", "--port", "0", "--max-buffered-share", "0")
    assert refused.code != 0 and "--max-buffered-share" in refused.stderr
