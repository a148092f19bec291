# SPDX-License-Identifier: MIT
# Inputs of cases/predict.tsv (#40 predictions of a fine-tuned model): a
# tiny fine-tuned run, a table without its sequence column, a protein
# longer than the model's window, an output that exists. Sourced by
# run_cases.sh with $CLI and $W set (after inputs/finetune.sh).
P="$W/pr"
mkdir -p "$P"
"$CLI" finetune --data "$W/ft/good.csv" --valid-fraction 0 --layers 1 --width 16 --heads 2 \
  --max-len 16 --steps 2 --warmup 1 --eval-every 0 --out "$P/run" > /dev/null
printf 'seq,label\nMKV,a\n' > "$P/noseq.csv"
awk 'BEGIN { printf("sequence\n"); for (i = 0; i < 1100; i++) printf("A"); printf("\n") }' > "$P/long.csv"
printf 'the user'"'"'s predictions\n' > "$P/keep.csv"
