#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The memory planner against real allocations (host CUDA emulator): one
# update of esm2_t33_650M, micro-batch 6 x 512, fp16 on turing_fp16 (sm_75,
# 8 GiB) with backend.device_memory_limit 8GiB, allocating every buffer for
# real but skipping the arithmetic (ESMT_EMU_NO_COMPUTE=1, test-only: no
# kernel, copy or GEMM runs). The emulator's peak of device bytes
# (cudaMalloc + the async pool's reservation: weights, gradients,
# activations, scratch, cuBLASLt workspace) must be within 5% of the plan's
# device total without the CUDA context (which the emulator does not model).
# Needs ~12 GB of host RAM (optimizer offload keeps 11 GB pinned).
# Usage: plan_emulated.sh CLI
set -euo pipefail
cli=$1
work=$(mktemp -d /tmp/esmt-emu-plan-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(3); aa = "ACDEFGHIKLMNPQRSTVWY"; for (r = 0; r < 40; r++) { printf(">p%d\n", r);
  for (i = 0; i < 700; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/long.fa"
"$cli" ingest "$work/long.fa" -o "$work/data" --valid-fraction 0 --quiet >/dev/null
plan=("$cli" plan --model esm2_t33_650M --micro-batch 6 --seq 512 --device-mem 8GiB --precision fp16)
# The policy the planner picks for this budget (a CUDA context counted, as
# the trainer does), then the same plan without the context.
"${plan[@]}" > "$work/auto.txt"
off=$(sed -n 's/.*policy: optimizer offload \(on\|off\).*/\1/p' "$work/auto.txt")
rec=$(sed -n 's/.*activation recompute \(on\|off\).*/\1/p' "$work/auto.txt")
echo "policy for 8 GiB: optimizer offload $off, activation recompute $rec"
"${plan[@]}" --offload "$off" --recompute "$rec" --runtime-overhead 0 | tee "$work/plan.txt"
planned=$(sed -n 's/.*device total.*(\([0-9]*\) bytes).*/\1/p' "$work/plan.txt")
ESMT_EMU_NO_COMPUTE=1 ESMT_EMU_SM=75 ESMT_EMU_MEM=8GiB ESMT_EMU_STATS="$work/stats.json" \
  "$cli" train --data "$work/data" --model esm2_t33_650M --max-len 512 --batch-tokens 3072 \
  --set data.micro_batch=6 --set data.pack=off --set backend.name=turing_fp16 \
  --set backend.precision=fp16 --set backend.device_memory_limit=8GiB --fast-dev-run 1 --no-mfu \
  --set offload.optimizer="$off" --set offload.recompute="$rec" \
  --threads 2 --out "$work/run" > "$work/train.log" 2>&1 || { tail -20 "$work/train.log"; exit 1; }
python3 - "$work/stats.json" "$planned" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
dev = max((d for r in rows for d in r["devices"]), key=lambda d: d["peak_bytes"])
planned, peak = int(sys.argv[2]), dev["peak_bytes"]
rel = (peak - planned) / planned
print(f"PLAN_RESULT planned {planned} bytes, peak allocated {peak} bytes "
      f"(cudaMalloc {dev['malloc_peak_bytes']}, pool reserved {dev['pool_reserved_peak_bytes']}), "
      f"{rel:+.2%} {'ok' if abs(rel) <= 0.05 else 'FAIL'}")
sys.exit(0 if abs(rel) <= 0.05 else 1)
PY
