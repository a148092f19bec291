#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `bench --world N` prints the bytes an update's collectives carry at each
# ZeRO stage; checked here against the formula written out independently
# (P parameters, 4 bytes each, W ranks, one micro-batch per rank):
#   stage 0: all-reduce 4P;            stage 1 and 2: reduce-scatter 4P,
#   all-gather 4P; one rank sends (W-1)/W of each half on a ring (an
#   all-reduce is two halves): floor((2*AR + RS + AG) / W) * (W - 1).
# Usage: test_bench_comm.sh CLI
set -euo pipefail
cli=$1
for world in 2 3; do
  out=$("$cli" bench --model esm2_t6_8M --batch 1 --seq 16 --steps 1 --warmup 0 --threads 1 \
        --world "$world" 2>&1)
  echo "$out" | grep "comm ZeRO"
  echo "$out" | python3 -c '
import re, sys
world = int(sys.argv[1])
rows = [re.search(r"comm ZeRO-(\d), (\d+) ranks, (\d+) parameters: per update all-reduced (\d+) "
                  r"bytes, reduce-scattered (\d+), all-gathered (\d+); sent per rank (\d+)", l)
        for l in sys.stdin]
rows = [tuple(map(int, m.groups())) for m in rows if m]
assert [r[0] for r in rows] == [0, 1, 2], f"stages printed: {[r[0] for r in rows]}"
for z, w, p, ar, rs, ag, sent in rows:
    assert w == world and p > 7_000_000, (w, p)
    want = (4 * p, 0, 0) if z == 0 else (0, 4 * p, 4 * p)
    assert (ar, rs, ag) == want, f"ZeRO-{z}: {(ar, rs, ag)} != {want}"
    want_sent = (2 * ar + rs + ag) // w * (w - 1)
    assert sent == want_sent, f"ZeRO-{z}: sent {sent} != {want_sent}"
print(f"ok: {world} ranks: the collectives of every stage match the formula")
' "$world"
done
