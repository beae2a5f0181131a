"""What `mode="fast"` measured for the bundled model on this machine: each way's speed, its speed against
torch float32 and its min cosine to torch float32 over the texts the bound is checked on (calibration
sentences alone, in pairs and fours; the held-out sentences; the short texts), read from the recorded
measurement (the first run measures, minutes on a small CPU; `--remeasure` measures again).

    HF_HUB_OFFLINE=1 .venv/bin/python bench/fast_record.py [--min-cosine 0.99] [--remeasure]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import bertscope
from bertscope.core.cpu import cpu_flags, cpu_name


def main() -> None:
    """Print the choice under the bound and every way's recorded figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-cosine", type=float, default=0.99, help="fast_min_cosine (default 0.99)")
    parser.add_argument("--remeasure", action="store_true", help="measure again")
    args = parser.parse_args()
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))))
    print(f"# {cpu_name()} ({platform.machine()}), {os.cpu_count()} CPUs; flags: {flags}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {os.getloadavg()[0]:.2f}")
    model = bertscope.load(mode="fast", fast_min_cosine=args.min_cosine, remeasure=args.remeasure)
    fast = model.info().fast or {}
    print(f"chosen under {args.min_cosine}: {fast.get('chosen')}")
    with open(fast["measured"], encoding="utf-8") as file:
        for row in json.load(file)["measured"]:
            print(
                f"{row['mode']:<24} {row['texts_per_s']:7.1f} texts/s {row['vs_float32']:5.2f}x "
                f"min cosine {row['cos_min']:.5f}"
            )


if __name__ == "__main__":
    main()
