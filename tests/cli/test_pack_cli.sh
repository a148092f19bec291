#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `train --set data.pack=on` end to end on a tiny model (cpu backend):
# packed training and evaluation run, the progress line and metrics.jsonl
# report padding, a run resumed from a mid-run checkpoint ends bit-identical
# to the uninterrupted one, and resuming an unpacked run with packing on is
# refused naming data.pack; 2 data-parallel ranks train packed and resume
# bit-identically. Usage: test_pack_cli.sh CLI
set -euo pipefail
cli=$1
work=$(mktemp -d /tmp/esmt-pack-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(11); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 300; r++) { printf(">p%d\n", r); n = 5 + int(rand() * 150);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet >/dev/null
common=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 128 --batch-tokens 512
        --steps 12 --warmup 2 --eval-every 6 --eval-batches 2 --save-every 4 --threads 2
        --log-every 1 --keep 0)

echo "== packed reference run"
"$cli" train "${common[@]}" --set data.pack=on --out "$work/ref" > "$work/ref.log" 2>&1 ||
  { cat "$work/ref.log"; exit 1; }
grep -q "pad [0-9]*%" "$work/ref.log" || { echo "no pad figure in the progress line"; exit 1; }
grep -q '"padding":' "$work/ref/metrics.jsonl"
grep -q "eval step 6" "$work/ref.log"

echo "== resume from step 4 to the end"
mkdir -p "$work/run/checkpoints"
cp -r "$work/ref/checkpoints/step-00000004" "$work/run/checkpoints/"
echo step-00000004 > "$work/run/checkpoints/latest"
"$cli" train "${common[@]}" --set data.pack=on --out "$work/run" --resume latest >/dev/null
cmp "$work/ref/checkpoints/step-00000012/model.safetensors" \
    "$work/run/checkpoints/step-00000012/model.safetensors"
cmp "$work/ref/checkpoints/step-00000012/optimizer.safetensors" \
    "$work/run/checkpoints/step-00000012/optimizer.safetensors"
echo "resumed packed run identical to the uninterrupted one"

echo "== an unpacked run resumed with packing on is refused"
"$cli" train "${common[@]}" --steps 4 --eval-every 0 --set data.pack=off --out "$work/off" >/dev/null
set +e
"$cli" train "${common[@]}" --steps 8 --eval-every 0 --set data.pack=on --out "$work/off" \
  --resume latest > "$work/bad.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "data.pack" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
echo "== 2 data-parallel ranks packed; resumed from step 3 by 2 ranks: bit-identical"
dp=(--steps 6 --save-every 3 --eval-every 3 --set data.pack=on)
"$cli" launch -n 2 train "${common[@]}" "${dp[@]}" --out "$work/dp" > "$work/dp.log" 2>&1 ||
  { cat "$work/dp.log"; exit 1; }
grep -q "step 6/6" "$work/dp.log"
mkdir -p "$work/dp2/checkpoints"
cp -r "$work/dp/checkpoints/step-00000003" "$work/dp2/checkpoints/"
echo step-00000003 > "$work/dp2/checkpoints/latest"
"$cli" launch -n 2 train "${common[@]}" "${dp[@]}" --out "$work/dp2" --resume latest >/dev/null 2>&1
cmp "$work/dp/checkpoints/step-00000006/model.safetensors" \
    "$work/dp2/checkpoints/step-00000006/model.safetensors"
echo "pack CLI test passed"
