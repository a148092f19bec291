#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue #18's question asked of the GPU machine's host CPU (this project's
development host has no AVX512-BF16 or AMX): how fast do bf16 GEMMs run
there against fp32, through PyTorch (oneDNN inside), at the shapes of
esm2_t6_8M and esm2_t12_35M's FFN-up GEMM at 4 x 512 tokens, on 2 threads
(the development host's count) and on all? Prints one line per case:
  HOST_GEMM shape=MxNxK threads=N dtype=fp32|bf16 gflops=... ms=...
and the CPU flags that matter. A baseline for cpu.so's bf16 path, not a
measurement of it."""
import os
import sys
import time

import torch

# bench/record.py: one results line per figure
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from record import record  # noqa: E402

SHAPES = [("esm2_t6_8M ffn-up", 2048, 1280, 320), ("esm2_t12_35M ffn-up", 2048, 1920, 480),
          ("square", 2048, 2048, 2048)]


def flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(x for x in ("avx2", "avx512f", "avx512_bf16", "amx_bf16",
                                                "amx_tile") if x in have)
    except OSError:
        pass
    return "unknown"


def gflops(m, n, k, dtype, reps=20, budget_s=2.0):
    """Best of up to `reps` products after a warm-up, stopping after about
    budget_s (a CPU without bf16 units runs them ~50x slower than fp32)."""
    a = torch.randn(m, k).to(dtype)
    b = torch.randn(k, n).to(dtype)
    torch.matmul(a, b)
    best, start = float("inf"), time.perf_counter()
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() - start > budget_s:
            break
    return 2.0 * m * n * k / best / 1e9, best * 1e3


def main():
    print(f"HOST_CPU cores={os.cpu_count()} flags={flags()} torch={torch.__version__} "
          f"mkldnn={torch.backends.mkldnn.is_available()}")
    for threads in sorted({2, os.cpu_count() or 2}):
        torch.set_num_threads(threads)
        for name, m, n, k in SHAPES:
            for dtype in (torch.float32, torch.bfloat16):
                g, ms = gflops(m, n, k, dtype)
                print(f"HOST_GEMM shape={m}x{n}x{k} ({name}) threads={threads} "
                      f"dtype={'bf16' if dtype == torch.bfloat16 else 'fp32'} "
                      f"gflops={g:.1f} ms={ms:.3f}")
                record("host_gemm", f"{m}x{n}x{k} ({name}), "
                       f"{'bf16' if dtype == torch.bfloat16 else 'fp32'}, {threads} threads",
                       "python3 bench/gpu/bench_host_bf16_gemm.py",
                       {"gflops": (g, "GFLOP/s"), "ms": (ms, "ms")})


if __name__ == "__main__":
    main()
