"""Service benchmark: requests/s and p50/p99 latency of `bertscope serve`, batching on against batching off.

Run from the repository root:

    .venv/bin/python bench/bench_server.py [--threads 1] [--levels 1,8,64] [--out bench/out/server.json]

For each mode ("batched": the default worker, which batches concurrent requests through the engine's token
budget; "one forward per request": `--no-batching`) a fresh `bertscope serve` runs in a subprocess on a free
loopback port. An httpx async client keeps C requests in flight (C = each level), each request one sentence
from gensim's bundled Lee corpus (`POST /embed`), for at most --requests-per-slot x C requests or
--seconds, whichever ends first, after a warm-up of C requests. Latency is per request, from send to parsed
answer; requests/s is answered requests over wall time. The client shares the machine with the server.
First, the library alone (no HTTP) embeds 64 of the sentences one forward each and then in one call: the
ratio of the two is the most batching can give on this machine, whatever the server does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def sentences(limit: int = 2000) -> list[str]:
    """Single sentences of gensim's Lee corpus (no download); a synthetic set when gensim is missing."""
    try:
        from gensim.test.utils import datapath

        with open(datapath("lee_background.cor"), encoding="utf-8", errors="replace") as f:
            text = f.read()
        found = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 4]
    except ImportError:
        found = [f"sentence number {i} about rivers, banks and markets" for i in range(limit)]
    return found[:limit]


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, *, batching: bool, threads: int, model: str | None) -> subprocess.Popen[bytes]:
    """`bertscope serve` in a subprocess, returned once /health answers."""
    args = ["--threads", str(threads), "--max-queue", "4096"]
    args += ["--model", model] if model else []
    args += [] if batching else ["--no-batching"]
    return serve(port, args)


def serve(port: int, args: list[str]) -> subprocess.Popen[bytes]:
    """`bertscope serve --port PORT ARGS` (the bundled model unless ARGS name one) in a subprocess,
    returned once /health answers."""
    cmd = [sys.executable, "-m", "bertscope", "serve", "--port", str(port), "--log-level", "warning", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        time.sleep(0.25)
    proc.kill()
    raise SystemExit("the server did not answer /health within 180 s")


async def load(url: str, texts: list[str], concurrency: int, total: int, seconds: float) -> dict[str, Any]:
    """Keep `concurrency` requests in flight until `total` are answered or `seconds` pass."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    # One client (one connection) per slot: httpx's pool gets slow with many connections in one client,
    # and then the client, not the server, is what is measured. Plain http: no CA certificates to load.
    clients = [httpx.AsyncClient(base_url=url, timeout=120, verify=False) for _ in range(concurrency)]

    async def slot(client: httpx.AsyncClient) -> None:
        nonlocal sent, errors
        while sent < total and time.perf_counter() < stop_at:
            text = texts[sent % len(texts)]
            sent += 1
            start = time.perf_counter()
            response = await client.post("/v2/embed", json={"inputs": text})
            if response.status_code != 200 or len(response.json()["vectors"]) != 1:
                errors += 1
                continue
            latencies.append(time.perf_counter() - start)

    began = time.perf_counter()
    stop_at = began + seconds
    await asyncio.gather(*(slot(c) for c in clients))
    wall = time.perf_counter() - began
    for client in clients:
        await client.aclose()
    ms = np.array(latencies) * 1000
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": errors,
        "seconds": round(wall, 2),
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


def ceiling(texts: list[str], threads: int, model: str | None, n: int = 64) -> dict[str, Any]:
    """The library alone, no HTTP: n sentences one forward each against one `embed` call for all of them."""
    import bertscope

    m = bertscope.load(model, device="cpu", threads=threads)
    m.embed(texts[:8])
    start = time.perf_counter()
    for text in texts[:n]:
        m.embed(text)
    one_by_one = time.perf_counter() - start
    start = time.perf_counter()
    m.embed(texts[:n])
    together = time.perf_counter() - start
    return {
        "sentences": n,
        "one_by_one_per_s": round(n / one_by_one, 1),
        "batched_per_s": round(n / together, 1),
        "ratio": round(one_by_one / together, 2),
    }


def batch_stats(url: str) -> dict[str, float]:
    """Mean jobs per worker batch and texts per forward, from the server's /metrics."""
    values: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(("bertscope_batch_requests_", "bertscope_forward_texts_")) and " " in line:
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    jobs = values.get("bertscope_batch_requests_sum", 0) / max(
        values.get("bertscope_batch_requests_count", 1), 1
    )
    texts = values.get("bertscope_forward_texts_sum", 0) / max(
        values.get("bertscope_forward_texts_count", 1), 1
    )
    return {"jobs_per_batch": round(jobs, 1), "texts_per_forward": round(texts, 1)}


def machine(threads: int) -> dict[str, Any]:
    """CPU model, cores, load and the versions that matter."""
    cpu = platform.processor() or platform.machine()
    try:
        found = re.search(
            r"^Model name:\s*(.+)$",
            subprocess.run(["lscpu"], capture_output=True, text=True).stdout,
            re.MULTILINE,
        )
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "fastapi", "uvicorn", "httpx", "bertscope"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "server_threads": threads,
        "load_avg": os.getloadavg(),
        "versions": versions,
    }


def main() -> None:
    """Run both modes at every level and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="1,8,64", help="Concurrency levels, comma-separated.")
    parser.add_argument("--requests-per-slot", type=int, default=12, help="Requests per concurrent slot.")
    parser.add_argument("--min-requests", type=int, default=100, help="At least this many per level.")
    parser.add_argument("--seconds", type=float, default=25.0, help="Time cap per level and mode.")
    parser.add_argument("--threads", type=int, default=1, help="Torch threads of the server.")
    parser.add_argument("--model", default=None, help="Model folder (default: bundled).")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "server.json")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    texts = sentences()
    limit = ceiling(texts, args.threads, args.model)
    print(f"library alone: {limit}", file=sys.stderr, flush=True)
    rows = []
    for mode, batching in (("batched", True), ("one forward per request", False)):
        port = free_port()
        proc = start_server(port, batching=batching, threads=args.threads, model=args.model)
        url = f"http://127.0.0.1:{port}"
        try:
            for level in levels:
                total = max(args.min_requests, args.requests_per_slot * level)
                asyncio.run(load(url, texts[-200:], level, level, 30))  # warm-up, on other sentences
                row = {"mode": mode, **asyncio.run(load(url, texts, level, total, args.seconds))}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            stats = batch_stats(url)
        finally:
            proc.terminate()
            proc.wait(30)
        print(f"{mode}: {stats}", file=sys.stderr)
    report = {"machine": machine(args.threads), "library_ceiling": limit, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print("| concurrency | mode | requests | req/s | p50 ms | p99 ms | speed-up |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    base = {r["concurrency"]: r["rps"] for r in rows if r["mode"] != "batched"}
    for r in sorted(rows, key=lambda r: (r["concurrency"], r["mode"])):
        ratio = f"{r['rps'] / base[r['concurrency']]:.1f}x" if r["mode"] == "batched" else "1.0x"
        cells = [r["concurrency"], r["mode"], r["requests"], r["rps"], r["p50_ms"], r["p99_ms"], ratio]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(json.dumps(report["machine"]))
    print(
        f"library alone, {limit['sentences']} sentences: {limit['one_by_one_per_s']}/s one forward each, "
        f"{limit['batched_per_s']}/s in one embed call ({limit['ratio']}x)"
    )


if __name__ == "__main__":
    main()
