#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nccl_dp's world-size-1 overhead against the backend it wraps (issue #9:
# "on a single H100, world size 1 runs through real NCCL calls with <= 3%
# overhead against the inner backend"). Trains the same short run with
# $REF (ampere_bf16) and with nccl_dp forced into a one-rank group
# (dist.force=true: a real NCCL communicator, ncclAllReduce of every
# gradient bucket on the comm stream, watched waits), alternating REPEAT
# times, and prints each backend's tokens/s (median over the updates after
# SKIP warm-up updates; best of the repeats) and the ratio.
# Needs a GPU: exits 77 with "SKIP: ..." without one. Not run by ctest.
# Usage: bench_nccl_overhead.sh [CLI]    (default ./build-gpu/bin/esmtrain-example)
# Env: MODEL=esm2_t30_150M MAX_LEN=512 BATCH_TOKENS=16384 STEPS=40 SKIP=10
#      REPEAT=2 REF=ampere_bf16 BUCKET=26214400 (dist.bucket_size)
set -euo pipefail
cli=${1:-./build-gpu/bin/esmtrain-example}
MODEL=${MODEL:-esm2_t30_150M} MAX_LEN=${MAX_LEN:-512} BATCH_TOKENS=${BATCH_TOKENS:-16384}
STEPS=${STEPS:-40} SKIP=${SKIP:-10} REPEAT=${REPEAT:-2} REF=${REF:-ampere_bf16}
BUCKET=${BUCKET:-26214400}
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no GPU (nvidia-smi finds none)"
  exit 77
fi
[ -x "$cli" ] || { echo "no CLI at $cli (build with -DESMT_ENABLE_CUDA=ON first)"; exit 2; }
work=$(mktemp -d /tmp/esmt-nccl-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(5); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 20000; r++) { printf(">p%d\n", r); n = 100 + int(rand() * 500);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.01 --quiet >/dev/null
common=(--data "$work/data" --model "$MODEL" --max-len "$MAX_LEN" --batch-tokens "$BATCH_TOKENS"
        --steps "$STEPS" --warmup 5 --eval-every 0 --log-every 1 --seed 1 --no-mfu
        --set "dist.bucket_size=$BUCKET")

# median tokens/s of updates SKIP+1.. in a metrics.jsonl
median() {
  grep -o '"tokens_per_s":[0-9.e+]*' "$1" | cut -d: -f2 | tail -n +$((SKIP + 1)) | sort -g |
    awk '{ v[NR] = $1 } END { if (!NR) { print 0; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }

ref_tps=0 dp_tps=0
for i in $(seq 1 "$REPEAT"); do
  "$cli" train "${common[@]}" --backend "$REF" --out "$work/ref$i" > "$work/ref$i.log" 2>&1 ||
    { tail -20 "$work/ref$i.log"; exit 1; }
  ESMTRAIN_FORCE_DP=1 "$cli" train "${common[@]}" --backend nccl_dp --set dist.force=true \
    --out "$work/dp$i" > "$work/dp$i.log" 2>&1 || { tail -20 "$work/dp$i.log"; exit 1; }
  grep -q "gradients summed on the device by nccl_dp" "$work/dp$i.log" ||
    { echo "nccl_dp did not take the device path:"; tail -20 "$work/dp$i.log"; exit 1; }
  r=$(median "$work/ref$i/metrics.jsonl") d=$(median "$work/dp$i/metrics.jsonl")
  echo "run $i: $REF $r tok/s, nccl_dp (world 1) $d tok/s"
  ref_tps=$(best "$ref_tps" "$r") dp_tps=$(best "$dp_tps" "$d")
done
loss() { grep -o '"loss":[0-9.e+-]*' "$1" | tail -1 | cut -d: -f2; }
echo "final loss: $REF $(loss "$work/ref1/metrics.jsonl"), nccl_dp $(loss "$work/dp1/metrics.jsonl")"
/usr/bin/python3 "$(dirname "$0")/../record.py" nccl_dp_overhead --config "$MODEL, world 1, best of $REPEAT" \
  --command "bash bench/gpu/bench_nccl_overhead.sh $cli" --figure "tokens_per_s=$dp_tps:tok/s" \
  --peer "$REF alone" --peer-figure "tokens_per_s=$ref_tps:tok/s" \
  --ratio "tokens_per_s=$(awk -v r="$ref_tps" -v d="$dp_tps" 'BEGIN { print r > 0 ? d / r : 0 }'):nccl_dp / $REF"
awk -v r="$ref_tps" -v d="$dp_tps" -v m="$MODEL" -v ref="$REF" 'BEGIN {
  ratio = r > 0 ? d / r : 0
  printf("ESMT_RESULT nccl_overhead model=%s %s_tokens_per_s=%.1f nccl_dp_tokens_per_s=%.1f ratio=%.4f overhead=%.2f%%\n",
         m, ref, r, d, ratio, 100 * (1 - ratio))
  exit (ratio >= 0.97) ? 0 : 3 }' || { echo "overhead above 3%"; exit 3; }
