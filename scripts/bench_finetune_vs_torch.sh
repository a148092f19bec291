#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# LoRA fine-tuning on the CPU, esmtrain beside transformers + peft, on the same
# model shape (esm2_t6_8M's: 6 layers, hidden 320, 20 heads), data (real
# proteins of mmseqs2-examples' DB.fasta.gz, a binary length label), batch and
# threads: a sequence-classification head and LoRA rank 8 on query and value,
# fp32, AdamW. The two sides run alternately ROUNDS times and each side's best
# tokens/s counts: on a shared machine a single run measures the other users'
# load as much as the engine (one run each at load 10 on 2 cores gave ratios
# from 1.05x to 3.48x). Prints every run, tokens/s and peak RSS of both and
# their ratios, appends a line to bench/results (bench/record.py) and a row to
# docs/finetune-speed.md.
# Usage: bench_finetune_vs_torch.sh [THREADS] [STEPS] [BATCH] [SEQ] [DROPOUT] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2} steps=${2:-10} batch=${3:-8} seq=${4:-128} dropout=${5:-0.1} rounds=${6:-3}
layers=6 hidden=320 heads=20 rank=8 warmup=2
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
[ -r "$db" ] || { echo "needs $db (Debian package mmseqs2-examples)" >&2; exit 1; }
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target bench_finetune esmt_backend_cpu >/dev/null
load=$(cut -d' ' -f1 /proc/loadavg)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 bench/reference/bench_finetune_torch.py make-data "$db" "$work/data" 4 "$batch" "$seq"
args=("$work/data" "$threads" "$layers" "$hidden" "$heads" "$rank" "$dropout" "$warmup" "$steps")
# each side alone on the machine, its peak resident set from the kernel (GNU time)
field() { sed -n "s/.*[ ^]$2=\([^ ]*\).*/\1/p" "$1" | tail -1; }
rss() { awk '/PEAK_RSS_KB/ { printf "%.1f", $2 / 1024 }' "$1"; }
larger() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }'; }
ours="" theirs="" ours_mb=0 theirs_mb=0
for r in $(seq "$rounds"); do
  /usr/bin/time -f "PEAK_RSS_KB %M" -o "$work/ours.rss" ./build/bin/bench_finetune "${args[@]}" \
    > "$work/ours.txt"
  /usr/bin/time -f "PEAK_RSS_KB %M" -o "$work/theirs.rss" \
    /usr/bin/python3 bench/reference/bench_finetune_torch.py run "${args[@]}" > "$work/theirs.txt"
  o=$(field "$work/ours.txt" tokens_per_s) t=$(field "$work/theirs.txt" tokens_per_s)
  echo "round $r: esmtrain $o tokens/s, transformers + peft $t tokens/s (load $(cut -d' ' -f1 /proc/loadavg))"
  ours=$(larger "$o" "$ours") theirs=$(larger "$t" "$theirs") # the best tokens/s
  ours_mb=$(larger "$(rss "$work/ours.rss")" "$ours_mb") # the largest peak RSS
  theirs_mb=$(larger "$(rss "$work/theirs.rss")" "$theirs_mb")
done
speed=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
memory=$(awk -v a="$ours_mb" -v b="$theirs_mb" 'BEGIN { printf "%.2f", b / a }')
echo
echo "esmtrain $ours tokens/s, peak RSS $ours_mb MB"
echo "transformers + peft $theirs tokens/s, peak RSS $theirs_mb MB"
echo "esmtrain: ${speed}x the tokens/s, 1/${memory} of the peak RSS"
command="bash scripts/bench_finetune_vs_torch.sh $threads $steps $batch $seq $dropout $rounds"
config="LoRA r$rank query+value, seq-class, ${layers}x$hidden, $batch x $seq, dropout $dropout, $threads threads, best of $rounds, load $load"
/usr/bin/python3 bench/record.py cpu_lora_finetune --config "$config" --command "$command" \
  --figure "tokens_per_s=$ours:tok/s" --figure "peak_rss=$ours_mb:MB" \
  --peer "transformers $(/usr/bin/python3 -c 'import transformers; print(transformers.__version__)') + peft $(/usr/bin/python3 -c 'import peft; print(peft.__version__)')" \
  --peer-figure "tokens_per_s=$theirs:tok/s" --peer-figure "peak_rss=$theirs_mb:MB" \
  --ratio "tokens_per_s=$speed:esmtrain / peer"
doc=docs/finetune-speed.md
if [ ! -f "$doc" ]; then
  cat > "$doc" <<'HEAD'
# LoRA fine-tuning speed beside transformers + peft (CPU)

Rows are appended by `scripts/bench_finetune_vs_torch.sh`: the same model shape (esm2_t6_8M's),
data (real proteins of mmseqs2-examples' `DB.fasta.gz`, a binary length label), batch and
threads on both sides, run alternately (the last argument, rounds) with each side's best run
counted; a sequence-classification head and LoRA rank 8 (alpha 16) on query and
value, fp32, AdamW lr 1e-4, gradients clipped to 1; tokens/s over the steps after two warm-up
steps (padding included, the same count on both sides); peak RSS of each process (GNU time).
esmtrain runs `bench/bench_finetune.c` over the public API, the peer
`bench/reference/bench_finetune_torch.py` (`EsmForSequenceClassification` + `get_peft_model`).

The load column is the machine's 1-minute load average before the run: on a shared machine
above its core count both sides slow down, and their ratio is only indicative.

| date (UTC) | commit | CPU (cores) | load | threads | batch x seq | dropout | steps | esmtrain tok/s | peer tok/s | speed | esmtrain RSS MB | peer RSS MB | memory | command |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
HEAD
fi
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' ':!docs/finetune-speed.md' 2>/dev/null || echo "+dirty")
cpu=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo | head -1)
printf '| %s | %s | %s (%s) | %s | %s | %s x %s | %s | %s | %s | %s | %sx | %s | %s | 1/%s | `%s` |\n' \
  "$(date -u +%Y-%m-%d)" "$commit" "$cpu" "$(nproc)" "$load" "$threads" "$batch" "$seq" "$dropout" "$steps" "$ours" \
  "$theirs" "$speed" "$ours_mb" "$theirs_mb" "$memory" "$command" >> "$doc"
echo "appended a row to $doc"
