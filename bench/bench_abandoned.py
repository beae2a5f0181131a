"""Abandoned requests: how long the next client waits after a burst of clients that hung up.

Run from the repository root:

    .venv/bin/python bench/bench_abandoned.py [--clients 20] [--texts 32] [--src PATH]

Starts `bertscope serve` (the bundled model, 1 torch thread) in a subprocess, then `--clients` clients
each POST /embed with `--texts` sentences of gensim's Lee corpus and hang up after `--patience` seconds
without reading the answer. One more client then asks for one sentence: its latency is how long the
server keeps doing work nobody waits for. `--src` serves another checkout's `src/` (an older commit, to
compare). The server's own counters (/metrics) say how many texts it skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import httpx
from bench_server import free_port, sentences, start_server


async def hang_up(url: str, texts: list[str], patience: float) -> None:
    """Send one request and leave after `patience` seconds, answered or not."""
    async with httpx.AsyncClient(base_url=url) as client:
        try:
            await asyncio.wait_for(client.post("/embed", json={"inputs": texts}), patience)
        except asyncio.TimeoutError:
            pass


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
    parser.add_argument("--patience", type=float, default=0.5)
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

        async def burst() -> None:
            chunks = [corpus[i * args.texts : (i + 1) * args.texts] for i in range(args.clients)]
            await asyncio.gather(*(hang_up(url, chunk, args.patience) for chunk in chunks))

        asyncio.run(burst())
        start = time.perf_counter()
        httpx.post(f"{url}/embed", json={"inputs": "the next client"}, timeout=600).raise_for_status()
        waited = time.perf_counter() - start
        skipped = metric(url, "bertscope_abandoned_texts_skipped_total")
        left = metric(url, "bertscope_requests_abandoned_total")
        print(
            f"{args.clients} clients x {args.texts} texts hung up after {args.patience:g} s; "
            f"the next request waited {waited:.2f} s; the server saw {left:.0f} abandoned requests "
            f"and skipped {skipped:.0f} of {args.clients * args.texts} texts"
        )
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
