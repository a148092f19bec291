#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch peer for `esmtrain-example bench-adamw`: torch.optim.AdamW
(foreach) over the same number of fp32 parameters and threads, timed the
same way (best of N steps after one warm-up).

Usage: /usr/bin/python3 bench/reference/bench_adamw_torch.py --params N --threads T
"""
import argparse
import os
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    # A few large tensors, like a model's weight matrices.
    chunks = 16
    sizes = [args.params // chunks] * chunks
    sizes[-1] += args.params - sum(sizes)
    params = [torch.nn.Parameter(torch.randn(s) * 0.02) for s in sizes]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.AdamW(params, lr=4e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01,
                            foreach=True)
    best = float("inf")
    for step in range(args.steps + 1):
        t0 = time.perf_counter()
        opt.step()
        dt = time.perf_counter() - t0
        if step > 0:
            best = min(best, dt)
    gbs = 28.0 * args.params / best / 1e9
    print(f"torch AdamW(foreach): {args.params / 1e6:.1f}M parameters, best {best * 1e3:.1f} ms, "
          f"{gbs:.1f} GB/s")
    print(f"TORCH_ADAMW_RESULT params={args.params} threads={args.threads} "
          f"step_ms={best * 1e3:.3f} gbs={gbs:.2f}")


if __name__ == "__main__":
    main()
