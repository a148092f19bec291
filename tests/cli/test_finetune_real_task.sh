#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/finetune_real_task.sh on a slice: 300 labelled UniProt proteins
# (family from the name), split by MMseqs2 cluster, a 2-layer model
# pre-trained for 100 updates, fine-tuned with balanced class weights, a
# head warm-up of 100 updates, then everything (the warm-up's path, which
# the full-size recipe, a frozen encoder, does not take); it must
# beat always answering the most frequent class on the held-out test
# clusters by macro-F1 (the classes are unbalanced: with ~60 test proteins
# the accuracy of so small a model is within a protein or two of that
# baseline's, its macro-F1 about twice it). It does not assert beating the
# logistic regression: on ~60 test proteins that order turns with the seed.
# Skips (77) without Debian's mmseqs2 and mmseqs2-examples.
# Usage: test_finetune_real_task.sh CLI
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -f /usr/share/doc/mmseqs2/example-data/DB.fasta.gz ] && command -v mmseqs > /dev/null || {
  echo "skip: needs mmseqs2 and mmseqs2-examples"; exit 77; }
work=$(mktemp -d /tmp/esmt-real-XXXXXX)
trap 'rm -rf "$work"' EXIT
OUT="$work/run" LIMIT=300 PRETRAIN_STEPS=100 FT_STEPS=200 FT_LR=3e-3 FREEZE=none \
  FREEZE_ENCODER_STEPS=100 HEAD_LR_SCALE=1 LAYERS=2 WIDTH=32 HEADS=4 MAX_LEN=128 \
  THREADS=2 bash "$here/scripts/finetune_real_task.sh" "$cli" | tee "$work/out.txt"
ft=$(grep "fine-tuned:" "$work/out.txt" | awk '{ print $5 }')
base=$(grep "most frequent class:" "$work/out.txt" | awk '{ print $8 }')
awk -v a="$ft" -v b="$base" 'BEGIN { exit !(a > b + 0.05) }' || {
  echo "fine-tuned test macro-F1 $ft does not beat the most frequent class's ($base)"; exit 1; }
echo "ok: fine-tuned macro-F1 $ft > the most frequent class's $base"
