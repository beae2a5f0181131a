"""Abandoned requests: how long the next client waits after a burst of clients that hung up.

Run from the repository root:

    .venv/bin/python bench/bench_abandoned.py [--clients 20] [--texts 32] [--src PATH]

Starts `bertscope serve` (the bundled model, 1 torch thread) in a subprocess, then `--clients` clients
each POST /embed with `--texts` sentences of gensim's Lee corpus and hang up, without reading the answer,
once the server holds them all (one running, the rest queued). One more client then asks for one
sentence: its latency is how long the server keeps doing work nobody waits for. `--src` serves another
checkout's `src/` (an older commit, to compare). The server's own counters (/metrics) say how many texts
it skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import time
from pathlib import Path

import httpx
from bench_server import free_port, sentences, start_server


def send(port: int, texts: list[str]) -> socket.socket:
    """Send one whole POST /embed on a raw connection and return the socket, unread (close it to leave)."""
    payload = json.dumps({"inputs": texts}).encode()
    head = (
        "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(head.encode() + payload)
    return sock


def metric(url: str, name: str) -> float:
    """An unlabelled counter from /metrics, or 0 when this server does not have it."""
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def main() -> None:
    """Measure the next request's latency after a burst of abandoned ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--src", type=Path, help="serve this checkout's src/ instead of the installed one")
    args = parser.parse_args()
    if args.src:
        os.environ["PYTHONPATH"] = str(args.src.resolve() / "src")
    corpus = sentences(args.clients * args.texts)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(port, batching=True, threads=1, model=None)
    try:
        httpx.post(f"{url}/embed", json={"inputs": corpus[:8]}, timeout=120).raise_for_status()  # warm-up

        chunks = [corpus[i * args.texts : (i + 1) * args.texts] for i in range(args.clients)]
        sockets = [send(port, chunk) for chunk in chunks]
        # Leave once the server holds every request (one running, the rest queued), as impatient clients do.
        deadline = time.monotonic() + 60
        while metric(url, "bertscope_queue_size") < args.clients - 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        for sock in sockets:
            sock.close()
        start = time.perf_counter()
        httpx.post(f"{url}/embed", json={"inputs": "the next client"}, timeout=600).raise_for_status()
        waited = time.perf_counter() - start
        skipped = metric(url, "bertscope_abandoned_texts_skipped_total")
        left = metric(url, "bertscope_requests_abandoned_total")
        print(
            f"{args.clients} clients x {args.texts} texts hung up once queued; "
            f"the next request waited {waited:.2f} s; the server saw {left:.0f} abandoned requests "
            f"and skipped {skipped:.0f} of {args.clients * args.texts} texts"
        )
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
