"""What this CPU can do natively, read once from /proc/cpuinfo, and a key naming this machine."""

from __future__ import annotations

import hashlib
import platform
from functools import lru_cache
from pathlib import Path

__all__ = [
    "NATIVE_BF16_FLAGS",
    "VNNI_FLAGS",
    "cpu_flags",
    "cpu_name",
    "has_native_bf16",
    "has_vnni",
    "machine_key",
]

# AVX-512 BF16 (Cooper Lake, Zen 4 on) or AMX (Sapphire Rapids on): bfloat16 matmuls in hardware.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# int8 dot products in one instruction (AVX-512 VNNI, AVX-VNNI, AMX): without them int8 loses to float32.
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


@lru_cache(maxsize=1)
def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo cannot be read)."""
    for line in _cpuinfo().splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def cpu_name() -> str:
    """The CPU's model name, or the platform's processor string."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def has_native_bf16() -> bool:
    """True where the CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX)."""
    return any(flag in cpu_flags() for flag in NATIVE_BF16_FLAGS)


def has_vnni() -> bool:
    """True where the CPU has int8 dot-product instructions (AVX-512 VNNI, AVX-VNNI or AMX)."""
    return any(flag in cpu_flags() for flag in VNNI_FLAGS)


def machine_key() -> str:
    """A short key for this CPU model, its flags and the thread count (a fast-mode choice holds for it)."""
    import torch  # here: cpu_name and cpu_flags serve `bertscope info`, which imports no torch

    text = f"{cpu_name()}|{' '.join(sorted(cpu_flags()))}|{torch.get_num_threads()}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]
