#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Loss curves of two runs (metrics.jsonl from `esmtrain-example train`)
step by step: the reference (cpu backend, fp32) and a GPU backend in half
precision on the same data, seed and schedule. Prints the largest relative
gap of the 10-step moving average and CURVE_RESULT ... ok|FAIL against a
tolerance (default 3%: fp16/bf16 rounding over 200 updates).
Usage: compare_curves.py REF/metrics.jsonl RUN/metrics.jsonl [TOL]"""
import json
import sys


def losses(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "train":
            out[r["step"]] = r["loss"]
    return out


def smooth(d, k=10):
    steps = sorted(d)
    return {s: sum(d[t] for t in steps[max(0, i - k + 1):i + 1]) / len(steps[max(0, i - k + 1):i + 1])
            for i, s in enumerate(steps)}


ref, run = losses(sys.argv[1]), losses(sys.argv[2])
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 0.03
common = sorted(set(ref) & set(run))
if len(common) < 20:
    print(f"CURVE_RESULT steps={len(common)} too few common steps FAIL")
    sys.exit(1)
a, b = smooth({s: ref[s] for s in common}), smooth({s: run[s] for s in common})
worst = max(abs(a[s] - b[s]) / a[s] for s in common[10:])
first, last = common[0], common[-1]
print(f"CURVE_RESULT steps={len(common)} ref {ref[first]:.4f}->{a[last]:.4f} "
      f"run {run[first]:.4f}->{b[last]:.4f} worst_rel_gap={worst:.4f} tol={tol} "
      f"{'ok' if worst <= tol else 'FAIL'}")
sys.exit(0 if worst <= tol else 1)
