#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# esmtrain's CPU training step beside PyTorch's (fair-esm ESM2 +
# torch.optim.AdamW) on the same shape and thread count, in one run, with
# the ratio. Usage: bench_vs_torch.sh [MODEL] [BATCH] [SEQ] [THREADS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-esm2_t6_8M} batch=${2:-4} seq=${3:-512} threads=${4:-2} steps=${5:-5}
bash scripts/setup_deps.sh
bash scripts/setup_reference_env.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

echo "== esmtrain ($model, $batch x $seq, $threads threads)"
ours=$(./build/bin/esmtrain-example bench --model "$model" --batch "$batch" --seq "$seq" \
         --threads "$threads" --steps "$steps" | tee /dev/stderr | grep '^ESMT_RESULT')
echo "== PyTorch"
theirs=$(/usr/bin/python3 bench/reference/bench_torch.py --model "$model" --batch "$batch" \
           --seq "$seq" --threads "$threads" --steps "$steps" | tee /dev/stderr | grep '^TORCH_RESULT')
field() { sed -n "s/.*$2=\([^ ]*\).*/\1/p" <<<"$1"; }
a=$(field "$ours" tokens_per_s) b=$(field "$theirs" tokens_per_s) mfu=$(field "$ours" mfu)
printf '\n%-12s %-10s %12s %12s %8s %8s\n' model shape esmtrain_tok/s torch_tok/s ratio our_MFU
awk -v m="$model" -v s="${batch}x${seq}" -v a="$a" -v b="$b" -v u="$mfu" \
    'BEGIN { printf "%-12s %-10s %12.0f %12.0f %7.2fx %7.1f%%\n", m, s, a, b, a / b, 100 * u }'
/usr/bin/python3 bench/record.py cpu_train_step --config "$model ${batch}x${seq}, $threads threads" \
  --command "bash bench/bench_vs_torch.sh $model $batch $seq $threads $steps" \
  --figure "tokens_per_s=$a:tok/s" --figure "mfu=$mfu:fraction" \
  --peer "PyTorch (fair-esm ESM2, AdamW)" --peer-figure "tokens_per_s=$b:tok/s" \
  --ratio "tokens_per_s=$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }'):esmtrain / peer"
