#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoints and resume across world sizes and ZeRO stages (`launch -n N`,
# CPU backend, TCP ranks). Proteins of one length and a global token budget
# of six batches make every update take the same six batches of the shared
# batch order at 1, 2 and 3 ranks (6, 3 and 2 rounds):
#  - 4 updates at world 1, 2 (dist.zero 0, 1, 2) and 3 (dist.zero 0, 2) write
#    the same data cursor and the same tokens, and weights and moments equal
#    within data-parallel rounding (the attention key bias left out: softmax
#    cancels it, so its gradient is rounding noise that AdamW scales up);
#  - 3 ranks -> 2 ranks at dist.zero 2, 2 ranks at dist.zero 2 -> 1 rank, and
#    dist.zero 2 -> 0 -> 2 at 2 ranks end where the uninterrupted runs end:
#    the same cursor (no batch seen twice or skipped), weights within
#    rounding, and the change recorded with its reason in resume_changes;
#  - 3 ranks at dist.zero 2 with offload.optimizer on (each rank's shard on
#    its host) write the same content, and their checkpoint resumed on one
#    process with offload.stream gradients, and weights, ends where the
#    uninterrupted run ends;
#  - 3 ranks at dist.zero 3 with offload.optimizer on write the same
#    content, and their checkpoint resumed by 2 ranks at dist.zero 3 ends
#    where the uninterrupted run ends.
# Usage: test_resume_world.sh CLI
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
compare=$here/../gpu/emu/compare_checkpoints.py
work=$(mktemp -d /tmp/esmt-resume-world-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(7); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 320; r++) { printf(">p%d\n", r);
    for (i = 0; i < 60; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet > /dev/null
# rows of 62 tokens, 8 a batch (496 real tokens); 5 batches are 2480 < 2481 <= 6
common=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 128 --batch-tokens 496
        --update-tokens 2481 --warmup 2 --eval-every 1000 --log-every 1 --no-mfu --threads 1
        --clip 0 --save-every 4)

# train RUN WORLD ZERO STEPS [more options]
train() {
  local out=$1 world=$2 zero=$3 steps=$4
  shift 4
  local cmd=("$cli" train)
  [ "$world" -eq 1 ] || cmd=("$cli" launch -n "$world" train)
  "${cmd[@]}" "${common[@]}" --set dist.zero="$zero" --steps "$steps" --out "$work/$out" "$@" \
    > "$work/$out.log" 2>&1 || { tail -20 "$work/$out.log"; exit 1; }
}
ckpt() { printf '%s/%s/checkpoints/step-%08d' "$work" "$1" "$2"; }
# the trainer's cursor and tokens, and the recorded changes' keys and reasons
field() {
  python3 -c 'import json, sys
t = json.load(open(sys.argv[1] + "/state.json"))["trainer"]
if sys.argv[2] == "position": print(json.dumps(t["train_cursor"], sort_keys=True), t["tokens"])
else:
  for c in t.get("resume_changes", []): print(c["key"], c["old"], "->", c["new"], ":", c["reason"])' \
    "$1" "$2"
}
# same A B: the same position, weights and moments within rounding
same() {
  local a=$1 b=$2
  [ "$(field "$a" position)" = "$(field "$b" position)" ] \
    || { echo "positions differ: $(field "$a" position) vs $(field "$b" position)"; exit 1; }
  for f in model optimizer; do
    python3 "$compare" "$a/$f.safetensors" "$b/$f.safetensors" 1e-5 --skip key.bias > "$work/cmp" \
      || { cat "$work/cmp"; exit 1; }
    echo "   $(basename "$(dirname "$(dirname "$b")")") $(basename "$b") $f: $(cut -d' ' -f3-4 "$work/cmp")"
  done
}

# back RUN STEP: the run as it was when checkpoint STEP was its latest
back() {
  local d
  for d in "$work/$1"/checkpoints/step-*; do
    [ "$((10#${d##*step-}))" -le "$2" ] || rm -r "$d"
  done
  printf 'step-%08d\n' "$2" > "$work/$1/checkpoints/latest"
}

echo "== 8 updates at 1, 2 and 3 ranks, ZeRO 0/1/2: the same checkpoint content"
train w1 1 0 8
for run in "w2z0 2 0" "w2z1 2 1" "w2z2 2 2" "w3z0 3 0" "w3z2 3 2"; do
  set -- $run
  train "$1" "$2" "$3" 8
  same "$(ckpt w1 4)" "$(ckpt "$1" 4)"
  same "$(ckpt w1 8)" "$(ckpt "$1" 8)"
done
echo "   cursor and tokens at update 8: $(field "$(ckpt w3z2 8)" position)"
# 2 ranks sum the same two values with or without ZeRO-1: the same bits
for f in model optimizer; do cmp "$(ckpt w2z0 8)/$f.safetensors" "$(ckpt w2z1 8)/$f.safetensors"; done

echo "== resumed with another world size and ZeRO stage: where the uninterrupted run ends"
cp -r "$work/w3z0" "$work/r32" && back r32 4
train r32 2 2 8 --resume latest
same "$(ckpt w2z2 8)" "$(ckpt r32 8)"
field "$(ckpt r32 8)" changes > "$work/changes"
grep -q "^world_size 3 -> 2 : .*no batch seen twice or skipped" "$work/changes" \
  || { cat "$work/changes"; exit 1; }
grep -q "^dist.zero 0 -> 2 : " "$work/changes" || { cat "$work/changes"; exit 1; }
cp -r "$work/w2z2" "$work/r21" && back r21 4
train r21 1 0 8 --resume latest
same "$(ckpt w1 8)" "$(ckpt r21 8)"
grep -q "^world_size 2 -> 1 : " <(field "$(ckpt r21 8)" changes)
cp -r "$work/w2z2" "$work/r202" && back r202 4
train r202 2 0 8 --resume latest --save-every 2
back r202 6
train r202 2 2 8 --resume latest --save-every 2
same "$(ckpt w2z2 8)" "$(ckpt r202 8)"
[ "$(field "$(ckpt r202 8)" changes | grep -c '^dist.zero')" -eq 2 ] \
  || { field "$(ckpt r202 8)" changes; exit 1; }
echo "== ZeRO-2 with each rank's shard offloaded, and 3 ranks -> 1 process streaming"
train w3z2o 3 2 8 --set offload.optimizer=on
grep -q "(ZeRO-2) .*optimizer offloaded: fp32 master, moments and gradients of \[0, " \
  "$work/w3z2o.log" || { head -3 "$work/w3z2o.log"; exit 1; }
same "$(ckpt w1 4)" "$(ckpt w3z2o 4)"
same "$(ckpt w1 8)" "$(ckpt w3z2o 8)"
for level in gradients weights; do
  cp -r "$work/w3z2o" "$work/r31$level" && back "r31$level" 4
  train "r31$level" 1 0 8 --resume latest --set offload.stream="$level"
  same "$(ckpt w1 8)" "$(ckpt "r31$level" 8)"
  grep -q "^world_size 3 -> 1 : " <(field "$(ckpt "r31$level" 8)" changes) \
    || { field "$(ckpt "r31$level" 8)" changes; exit 1; }
done
echo "== ZeRO-3 with each rank's shard offloaded, and 3 ranks -> 2 ranks at ZeRO-3"
train w3z3o 3 3 8 --set offload.optimizer=on
grep -q "(ZeRO-3) .*optimizer offloaded: fp32 master, moments and gradients of \[0, " \
  "$work/w3z3o.log" || { head -3 "$work/w3z3o.log"; exit 1; }
same "$(ckpt w1 4)" "$(ckpt w3z3o 4)"
same "$(ckpt w1 8)" "$(ckpt w3z3o 8)"
cp -r "$work/w3z3o" "$work/r32z3" && back r32z3 4
train r32z3 2 3 8 --resume latest --set offload.optimizer=on
same "$(ckpt w1 8)" "$(ckpt r32z3 8)"
grep -q "^world_size 3 -> 2 : .*no batch seen twice or skipped" <(field "$(ckpt r32z3 8)" changes) \
  || { field "$(ckpt r32z3 8)" changes; exit 1; }
# the ranks do not stream: refused, naming what combines
if "$cli" launch -n 2 train "${common[@]}" --set dist.zero=2 --set offload.stream=gradients \
     --steps 4 --out "$work/refused" > "$work/refused.log" 2>&1; then
  echo "dist.zero 2 with offload.stream ran"; exit 1
fi
grep -q "does not combine with dist.zero 2.*dist.zero 1, 2 or 3 combine with offload.optimizer on" "$work/refused.log" \
  || { tail -5 "$work/refused.log"; exit 1; }
echo "resume across world sizes ok"
