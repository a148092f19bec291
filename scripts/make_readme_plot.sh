#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates docs/img/training-curves.png, the README's picture: the main
# job of scripts/demo.sh (esm2_t6_8M trained on the CPU on the 20,000 UniProt
# proteins of Debian's mmseqs2-examples, evaluated against the amino-acid
# frequency model) drawn by `esmtrain-example plot`. A finished run in WORK
# is reused, an interrupted one resumed.
#   CLI=build/bin/esmtrain-example STEPS=150 THREADS=0 WORK=runs/readme-plot \
#     bash scripts/make_readme_plot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cli=${CLI:-build/bin/esmtrain-example}
steps=${STEPS:-150}
threads=${THREADS:-0}
work=${WORK:-runs/readme-plot}
fasta=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
out=docs/img/training-curves.png

[ -x "$cli" ] || { echo "no $cli: build first (cmake -S . -B build && cmake --build build)" >&2; exit 1; }
[ -f "$fasta" ] || { echo "no $fasta: apt-get install mmseqs2-examples" >&2; exit 1; }
mkdir -p "$work" "$(dirname "$out")"
[ -f "$work/data/manifest.json" ] || "$cli" ingest "$fasta" -o "$work/data" --quiet

run=$work/esm2_t6_8M
last=$(printf 'step-%08d' "$steps")
if [ "$(cat "$run/checkpoints/latest" 2>/dev/null)" != "$last" ]; then
  resume=()
  [ -f "$run/checkpoints/latest" ] && resume=(--resume latest)
  "$cli" train --data "$work/data" --out "$run" --model esm2_t6_8M --steps "$steps" \
    --lr 1e-3 --warmup $((steps / 5)) --max-len 512 --batch-tokens 4096 \
    --eval-every $((steps / 6)) --log-every 1 --threads "$threads" "${resume[@]}"
fi

# --force replaces only a figure of `plot`; an older one without its mark is replaced here by name
if [ -f "$out" ] && ! grep -aq "esmtrain-example plot" "$out"; then rm -f "$out"; fi
"$cli" plot "$run" -o "$out" --force --width 1200 --height 750 \
  --title "esm2_t6_8M on 20,000 UniProt proteins, CPU: $steps updates of 4,096 tokens"
ls -l "$out"
