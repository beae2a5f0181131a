"""A pytest plugin: bertscope reads an AVX2-only CPU (no AVX-512, BF16, VNNI or AMX) as its /proc/cpuinfo.

`pytest -p avx2_cpu` runs the suite as CI on an AVX2 machine would see it, from any CPU: every choice
bertscope makes from the CPU's flags (which fast-mode ways are candidates, int8's and bfloat16's advice,
the machine key that names measurements) takes the AVX2 branch. The runtimes' own kernels still use the
real CPU, so figures are not AVX2's; a test whose outcome depends on the flags shows up here. A test that
runs bertscope in a fresh process (tests/test_attention_light.py's command without torch) reads the real
CPU there, so its machine key differs from the session's: that one fails under the plugin alone.
"""

from __future__ import annotations

import bertscope.core.cpu as cpu

_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
    "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl cpuid pni pclmulqdq ssse3 fma "
    "cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm sse4a bmi1 avx2 bmi2 "
    "rdseed adx smap clflushopt sha_ni xsaveopt xsavec xgetbv1"
)
_CPUINFO = "".join(
    f"processor\t: {n}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC (read as AVX2 only)\n"
    f"physical id\t: 0\ncore id\t\t: {n}\nflags\t\t: {_FLAGS}\n\n"
    for n in range(2)
)


def pytest_configure() -> None:
    """Swap the CPU description bertscope reads before any test runs."""
    cpu._cpuinfo.cache_clear()
    cpu._cpuinfo = lambda: _CPUINFO  # type: ignore[assignment]
    cpu._physical_cores.cache_clear()
