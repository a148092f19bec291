#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where a training step's time goes, as a Markdown table, from the log of
`ESMT_PROFILE=events esmtrain-example bench ...` (read from a file or stdin).

The library's profile (libesmtrain/model/model_profile.c) gives the device
time of every op by role ("backward: FFN down / gemm") and the device's idle
time between consecutive ops; bench gives the steps it ran (warm-up
included: the profile covers them all) and its step time. This groups the
rows into the items issue #43's model of a step names (GEMMs by role,
attention passes, LayerNorm, GELU, bias gradients, residual adds,
cross-entropy, embedding, the optimizer step, and the time between ops:
kernel launches, host work, and work outside the model's ops such as the
gradient norm), per step, with each FLOP-counted item's time at a given peak
(its roofline: --peak-tflops, the dense bf16 tensor-core peak of the card)
and the ratio of the two.

Usage: step_breakdown.py [--peak-tflops X] [LOG]
Prints the table, the check that ops + between ops equals the span they
cover (within 1%; exits 1 otherwise), and the per-step time on the device beside
bench's step time (bench's excludes the warm-up, the profile does not).
"""
import argparse
import re
import sys

ROW = re.compile(r"profile \(events\): (.+?) +([0-9.]+) ms +[0-9.]+% +([0-9]+) calls"
                 r"(?: +([0-9.]+) TFLOP/s)?")
SUM = re.compile(r"profile \(events\): ops ([0-9.]+) ms, between ops ([0-9.]+) ms, "
                 r"span ([0-9.]+) ms")
STEP = re.compile(r"^\s+step [0-9]+")
RESULT = re.compile(r"ESMT_RESULT .*step_ms=([0-9.]+)")


def item(key):
    """The step-model item of a profile row "<where> / <op>"."""
    where, _, op = key.rpartition(" / ")
    phase = where.split(":")[0]
    role = where.split(": ", 1)[1] if ": " in where else where
    if op == "gemm":
        return "GEMM %s %s" % (phase, role)
    if op.startswith("attention_"):
        return "attention %s" % phase
    if op.startswith("layernorm_"):
        return "LayerNorm %s" % phase
    if op == "gelu_backward":
        return "GELU backward"
    if op == "bias_grad":
        return "bias gradients"
    if op == "add":
        return "residual adds"
    if op == "xent":
        return "cross-entropy"
    if op.startswith("embed_"):
        return "embedding %s" % phase
    if op == "optimizer step":
        return "optimizer step"
    return "other: %s" % key


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", nargs="?")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="the card's dense peak for the step's precision (0: no roofline column)")
    a = ap.parse_args()
    text = open(a.log).read() if a.log else sys.stdin.read()
    rows = {}
    for m in ROW.finditer(text):
        key, ms, calls, tf = m.group(1).strip(), float(m.group(2)), int(m.group(3)), m.group(4)
        r = rows.setdefault(item(key), [0.0, 0, 0.0])
        r[0] += ms
        r[1] += calls
        r[2] += ms * 1e-3 * float(tf) * 1e12 if tf else 0.0
    s = SUM.search(text)
    steps = sum(1 for line in text.splitlines() if STEP.match(line))
    res = RESULT.search(text)
    if not rows or not s or not steps:
        print("step_breakdown: no ESMT_PROFILE=events table or no bench steps in the log",
              file=sys.stderr)
        return 2
    ops, between, span = (float(x) for x in s.groups())
    total = ops + between
    print("| item | ms per step | share | calls per step | TFLOP/s | ms at %s |" %
          ("%.0f TFLOP/s" % a.peak_tflops if a.peak_tflops else "peak"))
    print("|---|---:|---:|---:|---:|---:|")
    for name, (ms, calls, flops) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
        rate = "%.4g" % (flops / (ms * 1e-3) * 1e-12) if flops and ms else ""
        roof = "%.3f" % (flops / (a.peak_tflops * 1e12) * 1e3 / steps) \
            if flops and a.peak_tflops else ""
        print("| %s | %.3f | %.1f%% | %g | %s | %s |" % (name, ms / steps, 100 * ms / total,
                                                          calls / steps, rate, roof))
    print("| between ops (launches, host, non-model work) | %.3f | %.1f%% | | | |" %
          (between / steps, 100 * between / total))
    all_flops = sum(r[2] for r in rows.values())
    if a.peak_tflops and all_flops:
        print("| **total** | %.3f | 100%% | | %.4g | %.3f |" %
              (total / steps, all_flops / (total * 1e-3) * 1e-12,
               all_flops / (a.peak_tflops * 1e12) * 1e3 / steps))
    ok = True
    gap = abs(total - span) / span if span else 1.0
    print("CHECK ops + between = span: %.3f + %.3f vs %.3f ms (%.2f%%) %s" %
          (ops, between, span, 100 * gap, "ok" if gap <= 0.01 else "FAIL"))
    ok &= gap <= 0.01
    if res:
        print("INFO time on the device per step %.3f ms (warm-up included); bench's step %.3f ms" %
              (total / steps, float(res.group(1))))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
