#!/usr/bin/env bash
# `esmtrain-example embed` beside transformers' EsmModel (fp32, eval,
# no_grad) on the CPU: the same weights (an HF-initialised esm2_t6_8M, seed
# 0), the same proteins (every 10th record of mmseqs2's DB.fasta.gz), the
# same batching (sorted by length, (longest + 2) x count <= BATCH_TOKENS),
# long proteins truncated to 1024 residues (embed's --long truncate), the
# mean of the last layer; then one synthetic 10,000-residue protein with
# --long windows (W 1024, stride 512). Proteins/s, residues/s, the ratio,
# each process's peak RSS, and how far the two means are apart.
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
py=/usr/bin/python3 ref=tests/reference/bench_embed_torch.py
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
  echo "== transformers EsmModel ($tag)"
  local t
  t=$($py $ref measure "$work/t.$tag" -- $py $ref run --model "$model" --fasta "$fasta" \
        --threads "$threads" --batch-tokens "$bt" --compare "$work/out.$tag/mean.layer6.npy" \
        "${targs[@]}" | tee /dev/stderr | grep '^TORCH_RESULT')
  read -r ewall erss _ <"$work/e.$tag"
  read -r twall trss _ <"$work/t.$tag"
  local prot res tsec
  prot=$(field proteins "$t") res=$(field residues "$t") tsec=$(field seconds "$t")
  rows+=("$(awk -v tag="$tag" -v p="$prot" -v r="$res" -v e="$ewall" -v t="$tsec" -v tw="$twall" \
      -v er="$erss" -v tr="$trss" -v tl="$(field rss_after_load_mb "$t")" 'BEGIN {
      printf "%-8s %6d %9d | %8.2f %9.0f %8.0f | %8.2f %9.0f %8.0f (%4.0f) | %6.2fx %6.2fx",
             tag, p, r, p / e, r / e, er / 1024, p / t, r / t, tr / 1024, tl, t / e, tw / e }')")
}

rows=()
bench sample "$work/sample.fasta" --long truncate -- --long truncate
if [ "$long" -gt 0 ]; then
  $py $ref synth "$db" "$long" "$work/long.fasta"
  bench long "$work/long.fasta" --long windows -- --long windows
fi

printf '\n%-8s %6s %9s | %-28s | %-35s | %s\n' "" "" "" "esmtrain embed (whole run)" \
       "transformers (timed part; RSS)" "ratio"
printf '%-8s %6s %9s | %8s %9s %8s | %8s %9s %8s %6s | %7s %7s\n' input prot residues \
       prot/s res/s RSS_MB prot/s res/s RSS_MB loaded timed whole
printf '%s\n' "${rows[@]}"
cat <<EOF
esmtrain: wall time of the whole process (model load, FASTA, output files). transformers:
'timed' is its FASTA-to-saved-means time (not the ~s of imports and model load), 'whole' its
process wall time; ratio = transformers seconds / esmtrain seconds (> 1: esmtrain faster).
RSS_MB: each process's peak resident set; 'loaded': torch's RSS after import and model load.
EOF
