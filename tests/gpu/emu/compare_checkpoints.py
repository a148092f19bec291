#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two esmtrain checkpoints (model.safetensors, F32 tensors) tensor by
tensor: prints the worst relative L2 difference and COMPARE_RESULT ok|FAIL
against a tolerance (0 = bit-identical). Plain Python: no numpy needed.
--skip SUBSTR leaves out tensors whose name contains it (e.g. the attention
key bias: softmax cancels it, its gradient is rounding noise that AdamW
scales to full steps, so two summation orders part it at once).
Usage: compare_checkpoints.py A.safetensors B.safetensors [TOL] [--skip SUBSTR]"""
import json
import math
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[a:b]
        if t["dtype"] != "F32":
            out[name] = (raw, None)
            continue
        out[name] = (raw, struct.unpack(f"<{len(raw) // 4}f", raw))
    return out


args = sys.argv[1:]
skip = None
if "--skip" in args:
    i = args.index("--skip")
    skip = args[i + 1]
    del args[i:i + 2]
ta, tb = tensors(args[0]), tensors(args[1])
tol = float(args[2]) if len(args) > 2 else 0.0
if skip:
    ta = {k: v for k, v in ta.items() if skip not in k}
    tb = {k: v for k, v in tb.items() if skip not in k}
if set(ta) != set(tb):
    print(f"COMPARE_RESULT tensor names differ: {sorted(set(ta) ^ set(tb))[:5]} FAIL")
    sys.exit(1)
worst, worst_name, identical = 0.0, "", True
for name in sorted(ta):
    (ra, va), (rb, vb) = ta[name], tb[name]
    identical &= ra == rb
    if va is None or vb is None or len(va) != len(vb):
        rel = 0.0 if ra == rb else math.inf
    else:
        num = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb)))
        den = math.sqrt(sum(x * x for x in va)) or 1.0
        rel = num / den
    if rel > worst:
        worst, worst_name = rel, name
ok = identical if tol == 0 else worst <= tol
print(f"COMPARE_RESULT tensors={len(ta)} bit_identical={identical} worst_rel_l2={worst:.3e} "
      f"({worst_name or '-'}) tol={tol} {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
