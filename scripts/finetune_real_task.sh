#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real task end to end: protein families named in the UniProt headers of
# Debian's mmseqs2-examples (DB.fasta.gz, 20,000 records). A protein whose
# name holds "kinase", "transporter"/"permease", "ribosomal protein" or
# "dehydrogenase"/"reductase"/"oxidase" gets that class (names matching two
# are dropped); the labelled proteins are clustered by MMseqs2 (30% identity,
# 80% coverage) and whole clusters drawn into train/valid/test, so no test
# protein has a near-duplicate in training. A small ESM-2 is pre-trained with
# esmtrain on the other, unlabelled records (PRETRAIN_STEPS updates); then
#   - fine-tuning it (finetune --init-from, best checkpoint by validation
#     macro-F1, `predict` on the test rows; by default the head alone on the
#     frozen encoder, with balanced class weights), and
#   - a logistic regression on the same checkpoint's mean embeddings
#     (`embed`, L2 strength chosen on validation),
# are scored on the test clusters, both figures printed; RECORD=1 appends
# them to the table in docs/finetune.md with the commit and this command.
#   bash scripts/finetune_real_task.sh [CLI]       (env: OUT, PRETRAIN_SECONDS,
#   PRETRAIN_STEPS, FT_STEPS, POOLING, FT_LR, CLASS_WEIGHTS, FREEZE, FREEZE_ENCODER_STEPS,
#   HEAD_LR_SCALE, LAYERS, WIDTH, HEADS, MAX_LEN, LIMIT, THREADS, SEED, RECORD,
#   PRETRAINED)
# PRETRAINED=DIR takes an earlier run of this script (its OUT, the same
# shape, LIMIT and SEED): its pre-trained checkpoint and its split, instead
# of pre-training and drawing again; other fine-tuning recipes on the same
# checkpoint and the same clusters (set PRETRAIN_STEPS or PRETRAIN_SECONDS to
# what made it: RECORD writes the command that makes it again).
# The fine-tuning recipe (the defaults below) was chosen on the validation
# clusters only; the test clusters are scored once, at the end.
# LIMIT keeps the first N labelled proteins (the CI-sized run of
# tests/cli/test_finetune_real_task.sh uses a few hundred).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cli=$(realpath "${1:-$here/build/bin/esmtrain-example}")
fasta=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
out=${OUT:-runs/real-task}
pretrain_s=${PRETRAIN_SECONDS:-300}
# PRETRAIN_STEPS bounds pre-training by updates (600 unless set): the same
# updates on any machine; PRETRAIN_STEPS= (empty) bounds it by
# PRETRAIN_SECONDS instead
pretrain_steps=${PRETRAIN_STEPS-600}
pretrained=${PRETRAINED:-}
ft_lr=${FT_LR:-1e-3}
pooling=${POOLING:-mean} # the sequence head's pooling (finetune's own default is cls)
ft_steps=${FT_STEPS:-450}
class_weights=${CLASS_WEIGHTS:-auto} # auto: balanced (macro-F1 weighs the unequal classes alike); none
freeze=${FREEZE:-encoder}                      # finetune --freeze: none, encoder or N layers
freeze_encoder_steps=${FREEZE_ENCODER_STEPS:-0} # a head warm-up with the encoder held
head_lr_scale=${HEAD_LR_SCALE:-1}
layers=${LAYERS:-4} width=${WIDTH:-128} heads=${HEADS:-4} max_len=${MAX_LEN:-256}
limit=${LIMIT:-0} threads=${THREADS:-0} seed=${SEED:-1}
[ -f "$fasta" ] || { echo "no $fasta: apt-get install mmseqs2-examples" >&2; exit 1; }
command -v mmseqs > /dev/null || { echo "no mmseqs: apt-get install mmseqs2" >&2; exit 1; }
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "$out exists and is not empty: choose another OUT" >&2; exit 1
fi
mkdir -p "$out"
shape=(--layers "$layers" --width "$width" --heads "$heads" --max-len "$max_len" --threads "$threads")

echo "== labels from the protein names"
zcat "$fasta" | awk -v limit="$limit" -v lab="$out/labelled.fasta" -v rest="$out/rest.fasta" \
    -v tsv="$out/labels.tsv" '
  function flush() {
    if (id == "") return
    if (cls != "" && (limit == 0 || n < limit)) {
      printf(">%s\n%s\n", id, seq) > lab; printf("%s\t%s\n", id, cls) > tsv; n++
    } else if (cls == "") printf(">%s\n%s\n", id, seq) > rest
  }
  /^>/ { flush(); split($1, f, "|"); id = f[2]; seq = ""; h = tolower($0); sub(/ os=.*/, "", h)
         k = 0; cls = ""
         if (h ~ /kinase/) { cls = "kinase"; k++ }
         if (h ~ /transporter|permease/) { cls = "transporter"; k++ }
         if (h ~ /ribosomal protein/) { cls = "ribosomal"; k++ }
         if (h ~ /dehydrogenase|reductase|oxidase/) { cls = "oxidoreductase"; k++ }
         if (k > 1) cls = "ambiguous"
         next }
  { seq = seq $0 }
  END { flush() }'
# the ambiguous ones are neither labelled nor pre-trained on
grep -v "ambiguous" "$out/labels.tsv" > "$out/labels.clean.tsv" || true

if [ -n "$pretrained" ]; then
  echo "== the split of $pretrained"
  cp "$pretrained/labelled.csv" "$out/labelled.csv"
else
  echo "== clusters (MMseqs2, 30% identity, 80% coverage) and a split by cluster"
  mmseqs easy-cluster "$out/labelled.fasta" "$out/clu" "$out/mmseqs-tmp" --min-seq-id 0.3 -c 0.8 \
    -v 1 > /dev/null
  # clusters in sorted order: MMseqs2 writes them in an order that varies
  # from run to run, and each draws its part in turn
  awk -v seed="$seed" 'BEGIN { srand(seed) }
    FNR == NR { if (!($1 in part)) { r = rand(); part[$1] = r < 0.2 ? "test" : r < 0.3 ? "valid" : "train" }
                of[$2] = part[$1]; next }
    FILENAME ~ /labels/ { label[$1] = $2; next }
    /^>/ { id = substr($0, 2); next }
    id in label { printf("%s,%s,%s,%s\n", id, $0, label[id], of[id]) }' \
    <(LC_ALL=C sort "$out/clu_cluster.tsv") "$out/labels.clean.tsv" "$out/labelled.fasta" \
    | { echo "id,sequence,label,split"; cat; } > "$out/labelled.csv"
fi
# embed and predict read the table's proteins, in its order
awk -F, 'NR > 1 { printf(">%s\n%s\n", $1, $2) }' "$out/labelled.csv" > "$out/labelled.table.fasta"
counts=$(awk -F, 'NR > 1 { n[$4]++ } END { printf("train %d, valid %d, test %d", n["train"], n["valid"], n["test"]) }' "$out/labelled.csv")
echo "$counts; classes: $(awk -F, 'NR > 1 { n[$3]++ } END { for (c in n) printf("%s %d ", c, n[c]) }' "$out/labelled.csv")"

if [ -n "$pretrain_steps" ]; then pretrain_limit=(--steps "$pretrain_steps"); pretrain_what="$pretrain_steps updates"
else pretrain_limit=(--steps 1000000 --max-time "$pretrain_s"); pretrain_what="$pretrain_s s"; fi
if [ -n "$pretrained" ]; then
  echo "== the pre-trained checkpoint $pretrained/pretrain"
  pre=$(realpath "$pretrained/pretrain")
else
  echo "== pre-training on the unlabelled records ($pretrain_what)"
  "$cli" ingest "$out/rest.fasta" -o "$out/pretrain-data" --valid-fraction 0.02 --quiet > /dev/null
  "$cli" train --data "$out/pretrain-data" --out "$out/pretrain" "${shape[@]}" --no-mfu \
    "${pretrain_limit[@]}" --lr 1e-3 --warmup 50 --batch-tokens 4096 \
    --eval-every 0 --log-every 0 > "$out/pretrain.log"
  pre=$out/pretrain
fi

echo "== fine-tuning the pre-trained checkpoint (${ft_steps} steps)"
"$cli" finetune --init-from "$pre" --data "$out/labelled.csv" --split-col split \
  --task seq-class "${shape[@]}" --steps "$ft_steps" --lr "$ft_lr" --warmup 30 --batch-rows 16 \
  --pooling "$pooling" --class-weights "${class_weights/#none/}" \
  --freeze "$freeze" --freeze-encoder-steps "$freeze_encoder_steps" --head-lr-scale "$head_lr_scale" \
  --eval-every 50 --log-every 0 --best-metric macro_f1 --seed "$seed" --out "$out/finetune" \
  > "$out/finetune.log"
"$cli" predict "$out/finetune/checkpoints/best" "$out/labelled.csv" -o "$out/predictions.csv" \
  --long truncate --threads "$threads" --quiet
py=("/usr/bin/python3" "$here/scripts/finetune_real_task.py")
ft=$("${py[@]}" score "$out/labelled.csv" "$out/predictions.csv")
ft_valid=$("${py[@]}" score "$out/labelled.csv" "$out/predictions.csv" valid)

echo "== logistic regression on the same checkpoint's mean embeddings"
"$cli" embed "$pre" "$out/labelled.table.fasta" -o "$out/embeddings" --threads "$threads" \
  --quiet > /dev/null
lr=$("${py[@]}" logreg "$out/labelled.csv" "$out/embeddings")
lr_valid=$("${py[@]}" logreg "$out/labelled.csv" "$out/embeddings" valid)

base=$("${py[@]}" majority "$out/labelled.csv" -)
echo "validation clusters (where the recipe and the L2 strength were chosen):"
echo "  fine-tuning:                    $ft_valid"
echo "  logistic regression:            $lr_valid"
echo "held-out test clusters ($counts):"
echo "  the most frequent class:        $base"
echo "  fine-tuned:                     $ft"
echo "  logistic regression on embed:   $lr"
if [ "${RECORD:-0}" = 1 ]; then
  commit=$(git -C "$here" rev-parse --short HEAD)
  cmd="${pretrain_steps:+PRETRAIN_STEPS=$pretrain_steps }PRETRAIN_SECONDS=$pretrain_s FT_STEPS=$ft_steps FT_LR=$ft_lr POOLING=$pooling CLASS_WEIGHTS=$class_weights FREEZE=$freeze FREEZE_ENCODER_STEPS=$freeze_encoder_steps HEAD_LR_SCALE=$head_lr_scale LAYERS=$layers WIDTH=$width HEADS=$heads MAX_LEN=$max_len LIMIT=$limit SEED=$seed bash scripts/finetune_real_task.sh"
  printf '| %s | %s | %s | %s | %s | `%s` |\n' "$(date -u +%Y-%m-%d)" "$commit" "$counts" \
    "$(echo "$ft" | awk '{ printf("%s / %s", $2, $4) }')" \
    "$(echo "$lr" | awk '{ printf("%s / %s", $2, $4) }')" "$cmd" >> "$here/docs/finetune.md"
  echo "appended to docs/finetune.md"
fi
