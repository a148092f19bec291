#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The GPU kernels' resource budget, from ptxas's own report (issue #22).

The real GPU build compiles backends/cuda_common with -Xptxas=-v through
tools/ptxas_log.sh, which keeps the report of every object in
BUILD/ptxas/*.ptxas. This check reads them and fails when
  - a tensor-core kernel (a name with "_mma<" or "_wgmma<"), on any architecture, spills
    registers, beyond what an `allow-spills` line of the budget file allows
    (known spills, with a ceiling, until they are removed); spills of the
    other kernels (the fp32 scalar path) are listed but not budgeted,
  - a kernel named in the budget file uses more registers than its budget, or
    fits fewer blocks per SM than its budget, from its registers, its static
    shared memory plus the dynamic shared memory the budget states (what the
    host code launches it with), and the SM's limits below.
It prints the table it checked, so a CI log shows every figure.

Usage: check_kernel_budget.py PTXAS_DIR BUDGET_FILE
Budget lines: REGEX ARCHS THREADS DYN_SMEM_BYTES MAX_REGS MIN_BLOCKS
          or allow-spills REGEX ARCHS MAX_BYTES
(REGEX on the demangled kernel name, without spaces: write \\s; ARCHS
comma-separated: 75,80,90).
"""
import glob
import math
import os
import re
import subprocess
import sys

# Per-SM limits (CUDA C Programming Guide, "Compute capabilities"): register
# file, warps, resident blocks, shared memory, and the shared memory the
# system reserves per block (sm_80 and later).
SM = {
    75: dict(regs=65536, warps=32, blocks=16, smem=64 << 10, reserve=0),
    80: dict(regs=65536, warps=64, blocks=32, smem=164 << 10, reserve=1024),
    86: dict(regs=65536, warps=48, blocks=16, smem=100 << 10, reserve=1024),
    89: dict(regs=65536, warps=48, blocks=24, smem=100 << 10, reserve=1024),
    90: dict(regs=65536, warps=64, blocks=32, smem=228 << 10, reserve=1024),
}
REG_UNIT = 256  # registers are allocated per warp in units of 256


def parse(path):
    """{(mangled name, arch): {regs, spill_st, spill_ld, stack, smem}}"""
    out, cur = {}, None
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+)", line)
        if m:
            cur = (m.group(1), int(m.group(2)))
            out[cur] = dict(regs=0, spill_st=0, spill_ld=0, stack=0, smem=0)
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            out[cur].update(stack=int(m.group(1)), spill_st=int(m.group(2)),
                            spill_ld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            out[cur]["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            out[cur]["smem"] = int(s.group(1)) if s else 0
    return out


def demangle(names):
    try:
        r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                           check=True)
        return dict(zip(names, r.stdout.split("\n")))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def blocks_per_sm(arch, regs, threads, smem_block):
    lim = SM[arch]
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(max(regs, 1) * 32 / REG_UNIT) * REG_UNIT
    by_regs = (lim["regs"] // per_warp) // warps
    by_smem = lim["smem"] // (smem_block + lim["reserve"]) if smem_block else lim["blocks"]
    return min(by_regs, by_smem, lim["warps"] // warps, lim["blocks"])


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    pdir, budget_file = sys.argv[1], sys.argv[2]
    reports = sorted(glob.glob(os.path.join(pdir, "*.ptxas")))
    if not reports:
        print(f"check_kernel_budget: no ptxas reports in {pdir} (was the GPU build compiled "
              "through tools/ptxas_log.sh?)")
        return 1
    kernels = {}
    for p in reports:
        kernels.update(parse(p))
    names = demangle(sorted({k[0] for k in kernels}))
    failures = []
    budget, allowed = [], []
    for raw in open(budget_file, encoding="utf-8"):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        f = line.split()
        if f[0] == "allow-spills" and len(f) == 4:
            allowed.append((re.compile(f[1]), [int(a) for a in f[2].split(",")], int(f[3]), raw))
        elif len(f) == 6:
            budget.append((f, raw))
        else:
            failures.append(f"budget line not understood: {raw.strip()}")
    order = sorted(kernels.items(), key=lambda kv: (names[kv[0][0]], kv[0][1]))
    spilling = [(n, a, r) for (n, a), r in order if r["spill_st"] or r["spill_ld"]]
    for name, arch, r in spilling:
        what = (f"{names[name]} sm_{arch}: spills ({r['spill_st']} bytes stored, "
                f"{r['spill_ld']} loaded)")
        if "_mma<" not in names[name] and "_wgmma<" not in names[name]:
            print(f"not budgeted (no tensor cores): {what}")
            continue
        ok = [al for al in allowed if arch in al[1] and al[0].search(names[name])]
        worst = max(r["spill_st"], r["spill_ld"])
        if ok and worst <= min(al[2] for al in ok):
            print(f"allowed (known, at most {min(al[2] for al in ok)} bytes): {what}")
        else:
            failures.append(what)
    archs_seen = sorted({a for _, a in kernels})
    print(f"{len(kernels)} kernel builds in {len(reports)} objects, archs "
          f"{', '.join('sm_%d' % a for a in archs_seen)}; {len(spilling)} spill")
    print(f"{'kernel':64} {'arch':>5} {'regs':>5} {'max':>4} {'smem B':>7} {'blocks/SM':>9} "
          f"{'min':>4}")
    for f, raw in budget:
        rx, archs = re.compile(f[0]), [int(a) for a in f[1].split(",")]
        threads, dyn, max_regs, min_blocks = (int(x) for x in f[2:])
        matched = 0
        for (name, arch), r in sorted(kernels.items(), key=lambda kv: (names[kv[0][0]], kv[0][1])):
            if arch not in archs or not rx.search(names[name]):
                continue
            matched += 1
            smem = r["smem"] + dyn
            b = blocks_per_sm(arch, r["regs"], threads, smem)
            ok = r["regs"] <= max_regs and b >= min_blocks
            print(f"{names[name][:64]:64} {'sm_%d' % arch:>5} {r['regs']:5d} {max_regs:4d} "
                  f"{smem:7d} {b:9d} {min_blocks:4d}{'' if ok else '  <-- over budget'}")
            if not ok:
                failures.append(f"{names[name]} sm_{arch}: {r['regs']} registers (budget "
                                f"{max_regs}), {b} blocks/SM (budget {min_blocks})")
        if not matched:
            failures.append(f"budget line matches no kernel: {raw.strip()}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("kernel budget ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
