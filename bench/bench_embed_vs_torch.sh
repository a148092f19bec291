#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `esmtrain-example embed` beside transformers' EsmModel (fp32, eval,
# no_grad) on the CPU: the same weights (an HF-initialised esm2_t6_8M, seed
# 0), the same proteins (every 10th record of mmseqs2's DB.fasta.gz), the
# same batching (longest first, BATCH_TOKENS // (longest + 2) rows a batch),
# long proteins truncated to embed's window (the "window" its embed.json
# reports; --long truncate), the mean of the last layer; then one synthetic
# 10,000-residue protein (real proteins concatenated) with --long windows
# (embed's window and stride). Proteins/s, residues/s, the ratio, each
# process's peak RSS, and how far the two tools' means are apart.
# Usage: bench_embed_vs_torch.sh [PROTEINS] [THREADS] [BATCH_TOKENS]
#   ESMT_BIN       the binary (default build/bin/esmtrain-example; built if missing)
#   ESMT_BENCH_DB  the FASTA sampled (default /usr/share/doc/mmseqs2/example-data/DB.fasta.gz)
#   LONG_RESIDUES  the synthetic protein's length (default 10000; 0 skips it)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000} threads=${2:-2} bt=${3:-4096}
bin=${ESMT_BIN:-build/bin/esmtrain-example}
db=${ESMT_BENCH_DB:-/usr/share/doc/mmseqs2/example-data/DB.fasta.gz}
long=${LONG_RESIDUES:-10000}
py=/usr/bin/python3 ref=bench/reference/bench_embed_torch.py
if [ ! -x "$bin" ]; then
  bash scripts/setup_deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"${JOBS:-2}" --target esmtrain-example >/dev/null
  bin=build/bin/esmtrain-example
fi
$py -c 'import torch, transformers, numpy' 2>/dev/null || bash scripts/setup_reference_env.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=$work/esm2_t6_8M
$py $ref make-model "$model"
$py $ref sample "$db" "$n" 10 "$work/sample.fasta"

# field KEY LINE
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
# bench TAG FASTA ESMT_ARGS... -- TORCH_ARGS...: both tools, one result row
bench() {
  local tag=$1 fasta=$2; shift 2
  local eargs=() targs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do eargs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targs=("$@")
  echo "== esmtrain embed ($tag, $threads threads, --batch-tokens $bt)"
  $py $ref measure "$work/e.$tag" -- "$bin" embed "$model" "$fasta" -o "$work/out.$tag" \
      --threads "$threads" --batch-tokens "$bt" --include mean "${eargs[@]}"
  # embed's window and stride, for the same truncation and windows; its own timing
  local ws esec
  ws=$($py -c 'import json, sys; r = json.load(open(sys.argv[1])); r = r.get("request", r)
print(r["window"], r.get("stride") or r["window"] // 2)' "$work/out.$tag/embed.json")
  esec=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["stats"]["seconds"])' \
           "$work/out.$tag/embed.json" 2>/dev/null || echo 0)
  echo "== transformers EsmModel ($tag; window and stride $ws)"
  local t
  t=$($py $ref measure "$work/t.$tag" -- $py $ref run --model "$model" --fasta "$fasta" \
        --threads "$threads" --batch-tokens "$bt" --compare "$work/out.$tag/mean.layer6.npy" \
        --truncate "${ws% *}" --window "${ws% *}" --stride "${ws#* }" "${targs[@]}")
  printf '%s\n' "$t"
  t=$(grep '^TORCH_RESULT' <<<"$t")
  read -r ewall erss _ <"$work/e.$tag"
  read -r twall trss _ <"$work/t.$tag"
  local prot res tsec
  prot=$(field proteins "$t") res=$(field residues "$t") tsec=$(field seconds "$t")
  rows+=("$(awk -v tag="$tag" -v p="$prot" -v r="$res" -v e="$ewall" -v t="$tsec" -v tw="$twall" \
      -v es="$esec" -v er="$erss" -v tr="$trss" -v tl="$(field rss_after_load_mb "$t")" 'BEGIN {
      if (es <= 0) es = e
      printf "%-7s %5d %8d | %7.2f %8.0f %6.1f %7.0f | ", tag, p, r, p / e, r / e, e, er / 1024
      printf "%7.2f %8.0f %6.1f %7.0f %6.0f | %6.2fx %6.2fx",
             p / t, r / t, t, tr / 1024, tl, t / es, tw / e }')")
  $py bench/record.py embed_cpu --config "esm2_t6_8M fp32 $tag: $prot proteins, $threads threads, $bt batch tokens" \
    --command "bash bench/bench_embed_vs_torch.sh $n $threads $bt" \
    --figure "proteins_per_s=$(awk -v p="$prot" -v e="$ewall" 'BEGIN { print p / e }'):proteins/s" \
    --figure "peak_rss=$(awk -v x="$erss" 'BEGIN { print x / 1024 }'):MB" --peer "transformers EsmModel (fp32, eval, no_grad)" \
    --peer-figure "proteins_per_s=$(awk -v p="$prot" -v t="$tsec" 'BEGIN { print p / t }'):proteins/s" \
    --peer-figure "peak_rss=$(awk -v x="$trss" 'BEGIN { print x / 1024 }'):MB" \
    --ratio "seconds=$(awk -v t="$tsec" -v e="$esec" -v w="$ewall" 'BEGIN { if (e <= 0) e = w; print t / e }'):peer timed part / esmtrain's own seconds"
}

# esmtrain's resident floor: the same model on one 10-residue protein
printf '>tiny\nMKTAYIAKQR\n' >"$work/tiny.fasta"
$py $ref measure "$work/e.floor" -- "$bin" embed "$model" "$work/tiny.fasta" -o "$work/out.floor" \
    --threads "$threads" --quiet >/dev/null
read -r _ floor _ <"$work/e.floor"

rows=()
bench sample "$work/sample.fasta" --long truncate -- --long truncate
if [ "$long" -gt 0 ]; then
  $py $ref synth "$db" "$long" "$work/long.fasta"
  bench long "$work/long.fasta" --long windows -- --long windows
fi

printf '\n%-7s %5s %8s | %-31s | %-38s | %s\n' "" "" "" "esmtrain embed (whole process)" \
       "transformers (timed part)" "speed-up"
printf '%-7s %5s %8s | %7s %8s %6s %7s | %7s %8s %6s %7s %6s | %7s %7s\n' input prot residues \
       prot/s res/s s RSS_MB prot/s res/s s RSS_MB loaded timed whole
printf '%s\n' "${rows[@]}"
cat <<EOF
esmtrain: rates over its whole process (model load, FASTA, output files). transformers: rates
over its timed part (FASTA to saved means; not the imports and model load). speed-up =
transformers seconds / esmtrain seconds: 'timed' against embed.json's own seconds (after the
model load), 'whole' process against process. RSS_MB: each process's peak resident set
(getrusage of the child); 'loaded': torch's RSS after its imports and the model load;
esmtrain's on one 10-residue protein: $((floor / 1024)) MB.
Load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs.
EOF
