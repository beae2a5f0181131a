"""What this CPU can do natively, read once from /proc/cpuinfo, and a key naming this machine."""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from functools import lru_cache
from pathlib import Path

__all__ = [
    "NATIVE_BF16_FLAGS",
    "VNNI_FLAGS",
    "cpu_flags",
    "cpu_name",
    "has_native_bf16",
    "usable_cpus",
    "has_vnni",
    "ask_threads",
    "cpu_threads",
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


_ASKED_THREADS: list[int] = []


def ask_threads(threads: int) -> None:
    """Use `threads` CPU threads for every runtime of this process (torch too, where it is loaded)."""
    _ASKED_THREADS[:] = [threads]
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    else:  # torch, where a feature loads it later, starts with this many
        os.environ["OMP_NUM_THREADS"] = str(threads)


def cpu_threads() -> int:
    """The intra-op threads every runtime uses here: those asked (`load(threads=)`), else torch's default
    (OMP_NUM_THREADS or MKL_NUM_THREADS, else the physical cores this process may run on), read without
    importing torch so that ONNX Runtime and OpenVINO run alike in a process that never loads it."""
    if _ASKED_THREADS:
        return _ASKED_THREADS[0]
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return _physical_cores()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity; the machine's count where that is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


@lru_cache(maxsize=1)
def _physical_cores() -> int:
    """Distinct (package, core) pairs among the CPUs this process may use; its CPU count where unknown."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    cores, cpu, package = set(), None, "0"
    for line in _cpuinfo().splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            cpu = int(value)
        elif key == "physical id":
            package = value
        elif key == "core id" and cpu in allowed:
            cores.add((package, value))
    return max(1, len(cores) or len(allowed))


def machine_key() -> str:
    """A short key for this CPU model, its flags and the thread count (a fast-mode choice holds for it)."""
    text = f"{cpu_name()}|{' '.join(sorted(cpu_flags()))}|{cpu_threads()}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]
