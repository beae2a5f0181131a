"""The big-request gate (`gate.FairGate`, `Service.tokenizing`): big requests wait on the event loop, holding
no thread of the pool that answers /info; clients are served in turn; one client's backlog is bounded (429).
No clocks: every wait is on the condition checked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import httpx
import pytest
from anyio.to_thread import current_default_thread_limiter

import bertscope
from bertscope.server import service as service_module
from bertscope.server.app import create_app
from bertscope.server.gate import FairGate
from bertscope.server.settings import ServerSettings
from bertscope.server.tickets import QueueFull

BIG = "word " * (service_module._BIG_CHARACTERS // 5 + 1)


def _waiting(gate: FairGate, n: int) -> bool:
    return gate.waiting == n


async def _until(check: Callable[[], bool]) -> None:
    """Let the loop run the other tasks until `check()` holds."""
    for _ in range(10_000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


def test_the_gate_goes_round_the_clients_and_bounds_each_clients_line() -> None:
    async def main() -> None:
        gate = FairGate(3)
        await gate.enter("a")  # a0 holds the turn
        order: list[str] = []

        async def one(name: str) -> None:
            await gate.enter(name[0])
            order.append(name)
            gate.leave()

        tasks = []
        for n, name in enumerate(("a1", "a2", "a3", "b1", "c1"), 1):  # b and c come after a's backlog
            tasks.append(asyncio.create_task(one(name)))
            await _until(partial(_waiting, gate, n))
        with pytest.raises(QueueFull, match="this client has 3 requests waiting") as refused:
            await gate.enter("a")  # a fourth waiting from a
        assert refused.value.retry_after >= 1
        assert gate.waiting_for("a") == 3 and gate.waiting_for("b") == 1
        gate.leave()  # a0 is done
        await asyncio.gather(*tasks)
        # The client that just had its turn goes after the others: b and c wait one turn at most.
        assert order == ["b1", "c1", "a1", "a2", "a3"]
        assert (gate.waiting, gate.held) == (0, False)

    asyncio.run(main())


def test_a_request_cancelled_while_it_waits_leaves_the_line() -> None:
    async def main() -> None:
        gate = FairGate(2)
        await gate.enter("a")
        waiter = asyncio.create_task(gate.enter("b"))
        after = asyncio.create_task(gate.enter("c"))
        await _until(lambda: gate.waiting == 2)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert gate.waiting == 1 and gate.waiting_for("b") == 0
        gate.leave()
        await after  # c's turn, b skipped
        assert gate.held and gate.waiting == 0
        gate.leave()
        assert not gate.held

    asyncio.run(main())


def test_big_requests_wait_on_the_event_loop_in_turn_by_client_while_info_answers(
    bundled: bertscope.Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client A (127.0.0.2) holds the gate with one big /v2/embed and queues four more; client B
    (127.0.0.3) queues one. With the event loop's thread pool cut to 2 threads, GET /info and /v2/info
    still answer (the waiters hold no thread); A's sixth is a 429 with Retry-After; B is served right
    after the request holding the gate, before A's backlog."""
    from test_server import serving_app

    settings = ServerSettings()
    app = create_app(bundled, settings=settings)
    svc = app.state.service
    gate = svc.big_tokenizing
    release = threading.Event()
    order: list[str] = []
    threads: set[str] = set()
    prepare = bundled.engine.prepare

    def held(items: list[Any], spec: Any) -> Any:
        if len(items[0]) <= service_module._BIG_CHARACTERS:
            return prepare(items, spec)
        with gate.changed:
            order.append(items[0].split(" ", 1)[0])
            threads.add(threading.current_thread().name)
            gate.changed.notify_all()
        release.wait(timeout=120)
        return prepare(["a cat"], spec)  # the vectors of a short text: the test is about the order

    monkeypatch.setattr(bundled.engine, "prepare", held)

    @app.get("/_test/threads")
    async def threads_left() -> dict[str, float]:
        limiter = current_default_thread_limiter()
        limiter.total_tokens = 2  # this server's loop only: 2 threads where anyio gives 40
        return {"borrowed": limiter.borrowed_tokens}

    def client(address: str, base: str) -> httpx.Client:
        transport = httpx.HTTPTransport(local_address=address)
        return httpx.Client(base_url=base, timeout=120, transport=transport)

    def body(name: str) -> dict[str, Any]:
        return {"inputs": f"{name} {BIG}", "long": "truncate"}

    def waiting(n: int) -> None:
        with gate.changed:
            assert gate.changed.wait_for(lambda: gate.waiting == n, timeout=60), gate.waiting

    with (
        serving_app(app, settings) as base,
        client("127.0.0.2", base) as a,
        client("127.0.0.3", base) as b,
        ThreadPoolExecutor(8) as pool,
    ):
        try:
            assert a.get("/_test/threads").json() == {"borrowed": 0}
            answers = [pool.submit(a.post, "/v2/embed", json=body("a0"))]
            with gate.changed:
                assert gate.changed.wait_for(lambda: order == ["a0"], timeout=60)
            for i in range(1, 5):
                answers.append(pool.submit(a.post, "/v2/embed", json=body(f"a{i}")))
                waiting(i)
            answers.append(pool.submit(b.post, "/v2/embed", json=body("b0")))
            waiting(5)
            refused = a.post("/v2/embed", json=body("a5"))
            assert refused.status_code == 429, refused.text[:300]
            assert int(refused.headers["Retry-After"]) >= 1
            assert "4 requests of over 262,144 characters to tokenize waiting" in refused.json()["detail"]
            # Five requests wait, one holds the gate: no thread of the loop's pool is taken by them.
            assert b.get("/_test/threads").json() == {"borrowed": 0}
            assert b.get("/info").status_code == 200
            assert b.get("/v2/info").status_code == 200
            assert b.post("/embed", json={"inputs": ["a cat"] * 12}).status_code == 200
        finally:
            release.set()
        assert [f.result(timeout=120).status_code for f in answers] == [200] * 6
    assert order == ["a0", "b0", "a1", "a2", "a3", "a4"]
    assert len(threads) == 1 and threads.pop().startswith("bertscope-big-tokenize")
    assert (gate.waiting, gate.held) == (0, False)
