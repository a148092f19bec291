#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `bench --world N` prints the bytes an update's collectives carry at each
# ZeRO stage; checked here against the formula written out independently
# (P parameters, 4 bytes each, W ranks, one micro-batch per rank):
#   stage 0: all-reduce 4P;            stage 1 and 2: reduce-scatter 4P,
#   all-gather 4P; one rank sends (W-1)/W of each half on a ring (an
#   all-reduce is two halves): floor((2*AR + RS + AG) / W) * (W - 1);
#   stage 3: reduce-scatter 4P, and every layer's weights all-gathered
#   before it runs (4 bytes each in fp32): the embedding and the head once,
#   the L layers in forward and L - 2 in backward (the two slots still hold
#   the top two at the turn), so all-gather 4 (P + (L - 2) * layer), with
#   layer = 4 (d^2 + d) + 4 d + 2 d F + F + d parameters (esm2_t6_8M: L 6,
#   d 320, F 1280).
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
assert [r[0] for r in rows] == [0, 1, 2, 3], f"stages printed: {[r[0] for r in rows]}"
L, d, F = 6, 320, 1280
layer = 4 * (d * d + d) + 4 * d + 2 * d * F + F + d
for z, w, p, ar, rs, ag, sent in rows:
    assert w == world and p > 7_000_000, (w, p)
    want = ((4 * p, 0, 0) if z == 0 else (0, 4 * p, 4 * (p + (L - 2) * layer)) if z == 3
            else (0, 4 * p, 4 * p))
    assert (ar, rs, ag) == want, f"ZeRO-{z}: {(ar, rs, ag)} != {want}"
    want_sent = (2 * ar + rs + ag) // w * (w - 1)
    assert sent == want_sent, f"ZeRO-{z}: sent {sent} != {want_sent}"
print(f"ok: {world} ranks: the collectives of every stage match the formula")
' "$world"
done
