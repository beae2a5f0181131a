"""The service under hostile load (issue 34): small requests' latency beside long documents, and memory
through stalled uploads. Prints figures for bench/BENCHMARKS.md; asserts nothing.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/load_service.py [--stalled 300]

1. One 150 KB POST /v2/embed_chunks and one 200 KB POST /v2/embed (long=window) in flight, then 50 small
   POST /embed one after another: their p50 / p99 / max latency, and how long the long ones took.
2. N connections each sending all but 8 bytes of a 4 MiB body: server RSS idle, while they stall, and
   after they close.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
WORDS = "the river bank was quiet in the morning and the market opened late again "


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _start(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [str(ROOT / ".venv/bin/bertscope"), "serve", "--port", str(port), "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.kill()
    sys.exit("the server did not start")


def fairness(base: str) -> None:
    doc = (WORDS * (150_000 // len(WORDS) + 1))[:150_000]
    long_text = (WORDS * (200_000 // len(WORDS) + 1))[:200_000]
    with httpx.Client(base_url=base, timeout=600) as client, ThreadPoolExecutor(2) as pool:
        client.post("/embed", json={"inputs": "warm up"})
        start = time.perf_counter()
        chunks = pool.submit(client.post, "/v2/embed_chunks", json={"inputs": doc})
        window = pool.submit(client.post, "/v2/embed", json={"inputs": long_text, "long": "window"})
        time.sleep(1.0)  # both long requests are running
        latencies = []
        for i in range(50):
            t = time.perf_counter()
            assert client.post("/embed", json={"inputs": f"a cat {i}"}).status_code == 200
            latencies.append(time.perf_counter() - t)
        codes = chunks.result().status_code, window.result().status_code
        total = time.perf_counter() - start
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    print(
        f"50 small /embed beside 150 KB embed_chunks + 200 KB embed(window): p50 "
        f"{statistics.median(latencies):.3f} s, p99 {p99:.3f} s, max {latencies[-1]:.3f} s; "
        f"long ones {codes} done after {total:.1f} s"
    )


def stalled(base: str, pid: int, count: int) -> None:
    port = int(base.rsplit(":", 1)[1])
    size = 4 * 1024 * 1024
    head = (
        "POST /v2/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    idle = _rss_mb(pid)
    socks, peak = [], idle
    body = b"x" * (size - 8)
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        try:
            s.sendall(head)
            view = memoryview(body)
            while view:
                sent = s.send(view)
                view = view[sent:]
        except (BlockingIOError, OSError):
            pass  # the server stopped reading (refused, or holding its budget): the rest stays unsent
        socks.append(s)
        peak = max(peak, _rss_mb(pid))
    for _ in range(10):
        peak = max(peak, _rss_mb(pid))
        time.sleep(0.5)
    for s in socks:
        s.close()
    time.sleep(3)
    after = _rss_mb(pid)
    print(
        f"{count} stalled 4 MiB uploads: RSS idle {idle:.0f} MB, peak {peak:.0f} MB, "
        f"after they close {after:.0f} MB ({after / idle - 1:+.1%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--stalled", type=int, default=300)
    args = parser.parse_args()
    server = _start(args.port)
    base = f"http://127.0.0.1:{args.port}"
    try:
        fairness(base)
        stalled(base, server.pid, args.stalled)
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
