#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/step_breakdown.py on a real profile: esmtrain-example bench with
# ESMT_PROFILE=events (cpu.so, esm2_t6_8M at 1 x 64, two steps after one
# warm-up) must give a table with the step model's items, whose ops and
# between-ops time add up to the span the profile covers; a log without a
# profile is refused.
# Usage: test_step_breakdown.sh CLI
set -euo pipefail
cli=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/esmt-breakdown-XXXXXX)
trap 'rm -rf "$work"' EXIT
ESMT_PROFILE=events "$cli" bench --batch 1 --seq 64 --steps 2 --warmup 1 --threads 1 \
  --backend cpu > "$work/bench.log" 2>&1
python3 "$src/bench/step_breakdown.py" --peak-tflops 1 "$work/bench.log" > "$work/table.md"
cat "$work/table.md"
for item in "GEMM forward FFN up" "GEMM backward q/k/v projection" "attention forward" \
            "attention backward" "LayerNorm backward" "optimizer step" "between ops"; do
  grep -q "^| $item" "$work/table.md" || { echo "FAIL: no row '$item'"; exit 1; }
done
grep -q "^CHECK ops + between = span.* ok$" "$work/table.md"
# 6 layers: one forward FFN-up GEMM per layer and step
grep -q "^| GEMM forward FFN up | [0-9.]* | [0-9.]*% | 6 |" "$work/table.md" ||
  { echo "FAIL: the FFN-up row should have 6 calls per step"; exit 1; }
"$cli" bench --batch 1 --seq 64 --steps 1 --warmup 0 --threads 1 --backend cpu > "$work/plain.log" 2>&1
if python3 "$src/bench/step_breakdown.py" "$work/plain.log" > /dev/null 2>&1; then
  echo "FAIL: a log without a profile was accepted"; exit 1
fi
echo "ok: step_breakdown"
