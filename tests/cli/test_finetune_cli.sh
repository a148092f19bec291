#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The finetune command end to end on a tiny model: a class that only the
# residues tell (more K+R than D+E) is learnt to validation accuracy well
# above chance in seconds; metrics.jsonl has the task metrics and the best
# checkpoint is kept; --resume latest continues; predict gives the learnt
# classes for the table and FASTA; export names the classes in config.json
# (cls pooling, the default, crosses over) and import-hf keeps them; its
# checkpoint starts a
# LoRA model (head and encoder kept); a table with a bad row
# writes nothing; an existing run is not written over.
# Usage: test_finetune_cli.sh CLI
set -euo pipefail
cli=$1
work=$(mktemp -d /tmp/esmt-ft-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(5); aa = "AGSKRDE"; print "id,sequence,label";
  for (r = 0; r < 800;) { n = 10 + int(rand() * 11); s = ""; c = 0;
    for (i = 0; i < n; i++) { x = substr(aa, 1 + int(rand() * 7), 1); s = s x;
      c += (x == "K" || x == "R") - (x == "D" || x == "E") }
    if (c != 0) printf("p%d,%s,%s\n", r++, s, c > 0 ? "more" : "fewer") } }' > "$work/charge.csv"
common=(--data "$work/charge.csv" --task seq-class --layers 2 --width 32 --heads 4 --max-len 32
        --lr 3e-3 --warmup 10 --eval-every 50 --log-every 0 --threads 2 --best-metric accuracy)

echo "== learns the charge class"
"$cli" finetune "${common[@]}" --steps 200 --out "$work/run" > "$work/run.log"
cat "$work/run.log"
best=$(grep -o '"accuracy":[0-9.]*' "$work/run/metrics.jsonl" | cut -d: -f2 | sort -g | tail -1)
awk -v a="$best" 'BEGIN { exit !(a >= 0.85) }' || { echo "best validation accuracy $best < 0.85"; exit 1; }
grep -q '"macro_f1":' "$work/run/metrics.jsonl"
test -e "$work/run/checkpoints/best"

echo "== --resume latest continues to the new step count"
"$cli" finetune "${common[@]}" --steps 250 --out "$work/run" --resume latest > "$work/resume.log"
grep -q "eval step 250" "$work/resume.log"

echo "== predict: the run's classes for the table and for FASTA; an existing OUT is kept"
"$cli" predict "$work/run" "$work/charge.csv" -o "$work/pred.csv" --quiet
head -1 "$work/pred.csv" | grep -qx 'id,sequence,label,predicted,p_fewer,p_more'
acc=$(awk -F, 'NR > 1 { n++; ok += ($3 == $4) } END { print ok / n }' "$work/pred.csv")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || { echo "predict accuracy $acc < 0.85"; exit 1; }
awk -F, 'NR > 1 && NR < 12 { print ">" $1; print $2 }' "$work/charge.csv" > "$work/ten.fasta"
"$cli" predict "$work/run" "$work/ten.fasta" -o "$work/ten.csv" --quiet
test "$(wc -l < "$work/ten.csv")" -eq 11
head -1 "$work/ten.csv" | grep -qx 'id,sequence,predicted,p_fewer,p_more'
sum=$(md5sum < "$work/ten.csv")
if "$cli" predict "$work/run" "$work/ten.fasta" -o "$work/ten.csv" 2> "$work/exists.err"; then
  echo "an existing OUT was written over"; exit 1
fi
grep -q "ten.csv exists; not replaced" "$work/exists.err"
test "$(md5sum < "$work/ten.csv")" = "$sum"

echo "== export names the classes for transformers; import-hf reads them back"
"$cli" export "$work/run" -o "$work/hf" > /dev/null
python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(c["id2label"] != {"0": "fewer", "1": "more"} or c["label2id"] != {"fewer": 0, "more": 1})' \
  "$work/hf/config.json" ||
  { echo "id2label without the class names:"; cat "$work/hf/config.json"; exit 1; }
"$cli" import-hf "$work/hf" -o "$work/imported" > /dev/null
"$cli" predict "$work/imported" "$work/ten.fasta" -o "$work/ten-imported.csv" --quiet
head -1 "$work/ten-imported.csv" | grep -qx 'id,sequence,predicted,p_fewer,p_more'
cmp <(cut -d, -f1-3 "$work/ten.csv") <(cut -d, -f1-3 "$work/ten-imported.csv")

echo "== a fine-tuned checkpoint starts a LoRA model, its head and encoder kept"
"$cli" finetune "${common[@]}" --steps 10 --eval-every 10 --warmup 2 --lr 1e-4 --lora-rank 4 \
  --lora-targets q,v --class-weights auto --init-from "$work/run" --out "$work/lora" > "$work/lora.log"
first=$(grep -o '"accuracy":[0-9.]*' "$work/lora/metrics.jsonl" | head -1 | cut -d: -f2)
awk -v a="$first" 'BEGIN { exit !(a >= 0.85) }' || { echo "LoRA from the fine-tuned run: accuracy $first"; exit 1; }
grep -q '"label_names": \[' "$work/lora/checkpoints/step-00000010/state.json"

echo "== a bad row writes nothing"
{ head -3 "$work/charge.csv"; echo "q1,MKV,"; } > "$work/missing.csv"
if "$cli" finetune "${common[@]}" --data "$work/missing.csv" --steps 20 --out "$work/bad" 2> "$work/bad.err"; then
  echo "a missing label was accepted"; exit 1
fi
grep -q "line 4: column 'label': the label is missing" "$work/bad.err"
test ! -e "$work/bad"

echo "== an existing run is not written over"
if "$cli" finetune "${common[@]}" --steps 20 --out "$work/run" 2> "$work/again.err"; then
  echo "a run was written over"; exit 1
fi
echo "ok"
