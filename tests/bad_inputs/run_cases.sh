#!/usr/bin/env bash
# The bad-input corpus: every line of cases.tsv is a command that must end
# with the given exit status and print the given message fragment, and
# must not crash (exit >= 128) or hang. Usage:
#   run_cases.sh CLI API_MISUSE BACKEND_DIR
# ($API in a case is tests/bad_inputs/api_misuse.c: wrong call sequences
# against the C API, run on the cpu backend from BACKEND_DIR.)
set -uo pipefail
CLI=$1
API=$2
export ESMT_BACKEND_DIR=$3
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /tmp/esmt-bad-XXXXXX)
trap 'rm -rf "$W"' EXIT
export ESMTRAIN_BACKEND_PATH=
# ---- inputs ----
: > "$W/empty.fa"
printf 'MKVLA\nGG\n' > "$W/noheader.fa"
printf '>only a header\n' > "$W/headeronly.fa"
printf '\x7fELF\x02\x01\x01\x00\xff\xfe' > "$W/binary.fa"
printf '>a\nMK\x00VL\n' > "$W/nul.fa"
printf '>a\nMK\xc3\xa9VL\n' > "$W/utf8.fa"
printf '>a\nMK12VL\n' > "$W/digits.fa"
printf '>a\x01b\nMKV\n' > "$W/ctl.fa"
printf '>a\nMKJV\n' > "$W/unknown.fa"
printf '>a\nMK-V\n' > "$W/gaps.fa"
awk 'BEGIN { srand(5); printf(">t\n"); for (i = 0; i < 20000; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1)); printf("\n") }' | gzip -c > "$W/trunc.fa.gz"
truncate -s $(( $(stat -c %s "$W/trunc.fa.gz") / 2 )) "$W/trunc.fa.gz"
printf '>a\nMKVLAGGHH\n>b\nKKLLAAGG\n' > "$W/good.fa"
mkdir -p "$W/full" "$W/emptydir" && echo keep > "$W/full/precious"
awk 'BEGIN { srand(3); for (r = 0; r < 200; r++) { printf(">r%d\n", r); n = 20 + int(rand() * 60);
  for (i = 0; i < n; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1)); printf("\n") } }' > "$W/prot.fa"
"$CLI" ingest "$W/prot.fa" -o "$W/data" --valid-fraction 0.2 --quiet >/dev/null
for d in corrupt truncated badmagic; do cp -r "$W/data" "$W/$d"; done
printf '\x07' | dd of="$W/corrupt/train-00000.shard" bs=1 seek=100 conv=notrunc status=none
truncate -s 100 "$W/truncated/train-00000.shard"
printf 'XXXXXXXX' | dd of="$W/badmagic/train-00000.shard" bs=1 seek=0 conv=notrunc status=none
"$CLI" ingest "$W/prot.fa" -o "$W/novalid" --valid-fraction 0 --quiet >/dev/null
tiny=(--data "$W/data" --no-mfu --layers 1 --width 16 --heads 2 --steps 3 --warmup 1 --eval-every 0)
for r in run-ok run-trunc run-flip run-fmt; do "$CLI" train "${tiny[@]}" --out "$W/$r" >/dev/null; done
truncate -s 500 "$W/run-trunc/checkpoints/step-00000003/model.safetensors"
printf '\x5a' | dd of="$W/run-flip/checkpoints/step-00000003/optimizer.safetensors" bs=1 seek=300 conv=notrunc status=none
printf '{"format":"other","version":1}' > "$W/run-fmt/checkpoints/step-00000003/state.json"
mkdir -p "$W/pickled" "$W/bert" "$W/noweights"
printf '{"model_type":"esm","hidden_size":16,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":64,"vocab_size":33}' | tee "$W/pickled/config.json" > "$W/noweights/config.json"
printf 'PK pickle' > "$W/pickled/pytorch_model.bin"
printf '{"model_type":"bert"}' > "$W/bert/config.json"
printf 'model:\n\tnum_layers: 4\n' > "$W/tab.yaml"
printf 'optimizer:\n  lrr: 1\n' > "$W/bad.yaml"
# ---- cases ----
pass=0 fail=0
while IFS=$'\t' read -r id want frag cmd; do
  [ -z "$id" ] || [ "${id#\#}" != "$id" ] && continue
  cmd=${cmd//\$CLI/$CLI}
  cmd=${cmd//\$API/$API}
  cmd=${cmd//\$W/$W}
  out=$(timeout 120 bash -c "$cmd" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want" ] && [[ "$out" == *"$frag"* ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $id: exit $rc (want $want), output lacks '$frag':"
    echo "$out" | tail -3 | sed 's/^/    /'
  fi
done < "$here/cases.tsv"
[ -f "$W/full/precious" ] || { echo "FAIL: an existing directory was touched"; fail=$((fail + 1)); }
echo "bad-input corpus: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
