"""verify benchmark: `bertscope verify` on the bundled model, and `verify --store` over 1,000 rows.

Run: `.venv/bin/python bench/bench_verify.py [--rows 1000] [--formats parquet,sqlite,npy]`.
Every command runs as its own `bertscope` process (imports and model load included, as a user runs it);
the wall time is the process's, and the load average is read just before each. The store is made first
(not timed here: bench_corpus.py times jobs) from examples/news.txt's lines, each numbered so that every
row is a distinct text of news length. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_average() -> str:
    """The 1-minute load average, as `uptime` shows it."""
    return f"{os.getloadavg()[0]:.2f}"


def bertscope(*args: str) -> tuple[float, float, str, int, str]:
    """One `bertscope ARGS` process: (wall seconds, its CPU seconds (user + system), its stdout, exit
    code, load average before it). CPU seconds move less than wall time when others share the cores."""
    load = load_average()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    ran = subprocess.run(
        [sys.executable, "-m", "bertscope", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if ran.returncode not in (0, 1):
        sys.exit(f"bertscope {' '.join(args)} failed ({ran.returncode}): {ran.stderr.strip()[-400:]}")
    return seconds, cpu, ran.stdout, ran.returncode, load


def cpu_name() -> str:
    """The CPU's model name (Linux), else the machine type."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "?")


def news_corpus(path: Path, rows: int) -> Path:
    """`rows` distinct lines: examples/news.txt's lines in turn, each with its number."""
    lines = [line for line in (ROOT / "examples" / "news.txt").read_text().splitlines() if line.strip()]
    path.write_text("".join(f"{lines[n % len(lines)]} ({n})\n" for n in range(rows)), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="store rows, all of them checked")
    parser.add_argument("--formats", default="parquet", help="comma-separated: parquet, sqlite, npy")
    options = parser.parse_args()
    print(f"# {cpu_name()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    table = ["| command | wall | CPU (user + sys) | exit | load average before |"]
    table.append("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fingerprint = folder / "fp.json"
        runs = [
            ("bertscope verify", ["verify"]),
            ("bertscope verify --save fp.json", ["verify", "--save", str(fingerprint)]),
            ("bertscope verify --against fp.json", ["verify", "--against", str(fingerprint)]),
        ]
        for label, args in runs:
            seconds, cpu, _, code, load = bertscope(*args)
            table.append(f"| `{label}` | {seconds:.1f} s | {cpu:.1f} s | {code} | {load} |")
        corpus = news_corpus(folder / "news.txt", options.rows)
        for kind in options.formats.split(","):
            store = folder / f"news.{kind}"
            made, _, _, _, load = bertscope("embed", "-i", str(corpus), "-o", str(store), "--quiet")
            print(f"# made {store.name} ({options.rows} rows): {made:.1f} s, load {load}; not in the table")
            args = ["verify", "--store", str(store), "--rows", str(options.rows), "--json"]
            if kind == "npy":
                args += ["--corpus", str(corpus)]
            seconds, cpu, out, code, load = bertscope(*args)
            report = json.loads(out)
            label = f"bertscope verify --store news.{kind} --rows {options.rows}" + (
                " --corpus news.txt" if kind == "npy" else ""
            )
            table.append(f"| `{label}` | {seconds:.1f} s | {cpu:.1f} s | {code} | {load} |")
            print(
                f"# {store.name}: ok={report['ok']}, rows_checked={report['rows_checked']}, "
                f"max_abs={report['max_abs']:.3g}, min_cosine={report['min_cosine']:.7f}"
            )
    print("\n".join(table))


if __name__ == "__main__":
    main()
