#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job on a fresh machine: install, build, ingest 20,000 real
# UniProt proteins (Debian's mmseqs2-examples), train a small ESM-2 on the
# CPU backend for a few minutes, evaluate before and after against an
# amino-acid frequency model, and write checkpoints.
#   STEPS=150 THREADS=0 OUT=runs/demo bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${STEPS:-150}
threads=${THREADS:-0}
out=${OUT:-runs/demo}
bash scripts/setup_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
cli=./build/bin/esmtrain-example
$cli probe
data=runs/uniprot-sample
if [ ! -f "$data/manifest.json" ]; then
  $cli ingest /usr/share/doc/mmseqs2/example-data/DB.fasta.gz -o "$data"
fi
$cli train --data "$data" --out "$out" --model esm2_t6_8M --steps "$steps" \
     --lr 1e-3 --warmup 30 --max-len 512 --batch-tokens 4096 --eval-every 50 \
     --threads "$threads"
