"""Big requests to `bertscope serve`: one client's backlog beside another's; unread /tokenize answers.

Run from the repository root (prints figures for docs/service.md; asserts nothing):

    HF_HUB_OFFLINE=1 .venv/bin/python bench/big_requests.py [--attackers 60] [--chars 270000] [--clients 4]

Each part starts its own `bertscope serve` (bundled model, loopback, a free port) and stops it after.

1. Fairness of big requests (texts over 262,144 characters are tokenized one at a time, in turn by
   client address). Client B (from 127.0.0.3) first alone: one POST /v2/embed of --chars characters
   (`long: truncate`), then GET /info --polls times, 0.3 s apart. Then client A (from 127.0.0.2) keeps
   --attackers such requests in flight (each sent again once answered, --pause seconds after a 429)
   until B is done; a second after A starts, B sends one such request and polls GET /info meanwhile.
   Prints the status counts of A's answers and B's latencies, alone and beside A.
2. Unread /tokenize answers: --clients raw sockets each send 1,600,000 commas to POST /tokenize and read
   nothing for --wait seconds. Prints the server's resident memory before, at its peak and 5 s after
   the clients closed, and the status line each client had been sent (200 or 503).
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
import time
from collections import Counter
from pathlib import Path

import httpx
from bench_server import free_port, serve

ROOT = Path(__file__).resolve().parent.parent
CLIENT_A = "127.0.0.2"
CLIENT_B = "127.0.0.3"


def start_server(port: int) -> subprocess.Popen[bytes]:
    """`bertscope serve` on the bundled model in a subprocess, returned once /health answers."""
    return serve(port, [])


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server, killing it if it does not exit within 30 s."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def client(address: str, url: str, connections: int = 8) -> httpx.AsyncClient:
    """An async client whose connections leave from `address` (a client address of its own)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    limits = httpx.Limits(max_connections=connections)
    return httpx.AsyncClient(base_url=url, transport=transport, limits=limits, timeout=600)


async def timed_post(c: httpx.AsyncClient, body: dict[str, object]) -> tuple[int, float]:
    """POST /v2/embed: (status, seconds)."""
    start = time.perf_counter()
    response = await c.post("/v2/embed", json=body)
    return response.status_code, time.perf_counter() - start


async def poll_info(c: httpx.AsyncClient, times: int) -> list[float]:
    """GET /info `times` times, 0.3 s apart: the seconds each took."""
    seconds = []
    for _ in range(times):
        start = time.perf_counter()
        response = await c.get("/info")
        seconds.append(time.perf_counter() - start)
        if response.status_code != 200:
            raise SystemExit(f"GET /info answered {response.status_code}")
        await asyncio.sleep(0.3)
    return seconds


async def fairness(url: str, attackers: int, chars: int, polls: int, pause: float) -> None:
    """Part 1: B alone, then B beside A's `attackers` big requests."""
    big = ("word " * (chars // 5 + 1))[:chars]
    body: dict[str, object] = {"inputs": big, "long": "truncate"}
    async with client(CLIENT_B, url) as b:
        await b.post("/embed", json={"inputs": "warm up"})
        alone_status, alone_big = await timed_post(b, body)
        alone_info = await poll_info(b, polls)
        print(
            f"B alone: big request {alone_status} in {alone_big:.2f} s; "
            f"GET /info max {max(alone_info):.2f} s ({', '.join(f'{s:.2f}' for s in alone_info)})"
        )
        async with client(CLIENT_A, url, attackers + 5) as a:
            b_done = asyncio.Event()
            a_results: list[tuple[int, float]] = []

            async def slot() -> None:  # one of A's requests in flight, sent again once answered
                while not b_done.is_set():
                    status, seconds = await timed_post(a, body)
                    a_results.append((status, seconds))
                    if status != 200:
                        await asyncio.sleep(pause)  # ignores Retry-After, but does not spin

            start = time.perf_counter()
            a_slots = asyncio.gather(*(slot() for _ in range(attackers)))
            await asyncio.sleep(1.0)  # A's requests are in
            (b_status, b_big), b_info = await asyncio.gather(timed_post(b, body), poll_info(b, polls))
            b_done.set()
            await a_slots
            total = time.perf_counter() - start
    counts = Counter(status for status, _ in a_results)
    slowest = max(seconds for _, seconds in a_results)
    print(
        f"A ({CLIENT_A}), {attackers} requests of {chars:,} characters in flight until B was done: "
        f"{dict(sorted(counts.items()))}, slowest {slowest:.1f} s, all done after {total:.1f} s"
    )
    print(
        f"B ({CLIENT_B}) beside A: big request {b_status} in {b_big:.2f} s; GET /info max "
        f"{max(b_info):.2f} s ({', '.join(f'{s:.2f}' for s in b_info)})"
    )


def status_line(sock: socket.socket) -> str:
    """The status line the server had sent on `sock`, or why there is none."""
    sock.settimeout(0.5)
    try:
        head = sock.recv(200)
    except OSError as exc:
        return f"nothing ({exc.__class__.__name__})"
    return head.split(b"\r\n", 1)[0].decode("latin-1") if head else "nothing (closed)"


def unread_tokenize(port: int, pid: int, clients: int, wait: float) -> None:
    """Part 2: `clients` sockets each send 1,600,000 commas to /tokenize and read nothing."""
    body = json.dumps({"inputs": "," * 1_600_000}).encode()
    head = (
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    before = rss_mb(pid)
    socks = []
    for _ in range(clients):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # read nothing, buffer little
        s.connect(("127.0.0.1", port))
        s.sendall(head + body)
        socks.append(s)
    peak = before
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.1)
    statuses = [status_line(s) for s in socks]
    for s in socks:
        s.close()
    time.sleep(5)
    after = rss_mb(pid)
    print(
        f"{clients} clients x 1,600,000 commas to /tokenize, unread for {wait:.0f} s: RSS before "
        f"{before:.0f} MB, peak {peak:.0f} MB, 5 s after they closed {after:.0f} MB"
    )
    print(f"what each was sent: {dict(sorted(Counter(statuses).items()))}")


def machine_line() -> str:
    """CPU model, cores, load average and date."""
    cpu = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        found = re.search(r"^Model name:\s*(.+)$", lscpu, re.MULTILINE)
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    return f"# {cpu}, {os.cpu_count()} cores, load average {load} (1, 5, 15 min), {date}"


def main() -> None:
    """Run both parts, each on a fresh server, and print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attackers", type=int, default=60, help="big requests client A sends at once (60)")
    parser.add_argument("--chars", type=int, default=270_000, help="characters of each big request (270000)")
    parser.add_argument(
        "--pause", type=float, default=0.1, help="seconds an A slot waits after a refusal to send again (0.1)"
    )
    parser.add_argument("--polls", type=int, default=6, help="GET /info polls of client B (6)")
    parser.add_argument("--clients", type=int, default=4, help="unread /tokenize clients (4)")
    parser.add_argument("--wait", type=float, default=20.0, help="seconds the /tokenize clients stay (20)")
    parser.add_argument(
        "--part", choices=("both", "fairness", "tokenize"), default="both", help="what to run"
    )
    args = parser.parse_args()
    print(machine_line(), flush=True)
    if args.part in ("both", "fairness"):
        port = free_port()
        proc = start_server(port)
        try:
            asyncio.run(
                fairness(f"http://127.0.0.1:{port}", args.attackers, args.chars, args.polls, args.pause)
            )
        finally:
            stop_server(proc)
    if args.part in ("both", "tokenize"):
        port = free_port()
        proc = start_server(port)
        try:
            unread_tokenize(port, proc.pid, args.clients, args.wait)
        finally:
            stop_server(proc)
    print(machine_line())


if __name__ == "__main__":
    main()
