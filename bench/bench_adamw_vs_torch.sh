#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Host AdamW: esmtrain beside torch.optim.AdamW(foreach=True) over the same
# parameter count and threads, plus the memcpy bandwidth measured in the
# same run. Usage: bench_adamw_vs_torch.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
bash scripts/setup_deps.sh
bash scripts/setup_reference_env.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
ours=$(./build/bin/esmtrain-example bench-adamw --threads "$threads" | tee /dev/stderr | grep '^ESMT_ADAMW_RESULT')
field() { sed -n "s/.*$2=\([^ ]*\).*/\1/p" <<<"$1"; }
n=$(field "$ours" params)
theirs=$(/usr/bin/python3 bench/reference/bench_adamw_torch.py --params "$n" --threads "$threads" \
         | tee /dev/stderr | grep '^TORCH_ADAMW_RESULT')
awk -v a="$(field "$ours" step_ms)" -v b="$(field "$theirs" step_ms)" -v g="$(field "$ours" gbs)" \
    -v bw="$(field "$ours" memcpy_gbs)" 'BEGIN {
  printf "\nesmtrain %.1f ms, torch %.1f ms: %.2fx faster; %.1f GB/s = %.0f%% of memcpy (%.1f GB/s)\n",
         a, b, b / a, g, 100 * g / bw, bw }'
/usr/bin/python3 bench/record.py cpu_adamw_step --config "$n parameters, $threads threads" \
  --command "bash bench/bench_adamw_vs_torch.sh $threads" \
  --figure "step_ms=$(field "$ours" step_ms):ms" --figure "bandwidth=$(field "$ours" gbs):GB/s" \
  --figure "memcpy_bandwidth=$(field "$ours" memcpy_gbs):GB/s" \
  --peer "torch.optim.AdamW(foreach=True)" --peer-figure "step_ms=$(field "$theirs" step_ms):ms" \
  --ratio "step_ms=$(awk -v a="$(field "$ours" step_ms)" -v b="$(field "$theirs" step_ms)" 'BEGIN { print b / a }'):peer / esmtrain (speed-up)"
