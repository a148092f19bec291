#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The train command end to end on a tiny model: SIGTERM mid-run saves a
# checkpoint and exits 143; --resume latest finishes the run; the final
# weights equal those of an uninterrupted run bit for bit; a corrupted
# latest checkpoint is refused with a message; the same for a Lion run.
# Usage: test_train_cli.sh CLI
set -euo pipefail
cli=$1
work=$(mktemp -d /tmp/esmt-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
# A small synthetic protein set (deterministic).
awk 'BEGIN { srand(7); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 400; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 120);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet >/dev/null
common=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 128 --batch-tokens 1024
        --steps 40 --warmup 4 --eval-every 0 --save-every 5 --threads 2 --log-every 1)

echo "== uninterrupted reference run"
"$cli" train "${common[@]}" --out "$work/ref" >/dev/null

echo "== activation recompute: the same weights and moments bit for bit"
"$cli" train "${common[@]}" --set offload.recompute=on --out "$work/rec" > "$work/rec.log"
grep -q "activation recompute on" "$work/rec.log"
for f in model optimizer; do
  cmp "$work/ref/checkpoints/step-00000040/$f.safetensors" "$work/rec/checkpoints/step-00000040/$f.safetensors"
done

echo "== a device memory limit too small: out of memory with advice, no crash"
set +e
"$cli" train "${common[@]}" --set backend.device_memory_limit=1MiB --set offload.optimizer=off \
  --set offload.recompute=off --out "$work/oom" > "$work/oom.log" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q "out of memory" "$work/oom.log" && grep -q "offload.recompute: on" "$work/oom.log" \
  || { echo "expected exit 1 with advice, got $rc"; cat "$work/oom.log"; exit 1; }

echo "== SIGTERM once the first checkpoint exists"
"$cli" train "${common[@]}" --out "$work/run" > "$work/run.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$work/run/checkpoints/latest" ] && break; sleep 0.05; done
kill -TERM "$pid"
set +e; wait "$pid"; rc=$?; set -e
[ "$rc" -eq 143 ] || { echo "expected exit 143 after SIGTERM, got $rc"; cat "$work/run.log"; exit 1; }
grep -q "interrupted by signal 15" "$work/run.log"
stopped=$(cat "$work/run/checkpoints/latest")
echo "stopped at $stopped"

echo "== resume to the end"
"$cli" train "${common[@]}" --out "$work/run" --resume latest >/dev/null
[ "$(cat "$work/run/checkpoints/latest")" = "step-00000040" ]
cmp "$work/ref/checkpoints/step-00000040/model.safetensors" \
    "$work/run/checkpoints/step-00000040/model.safetensors"
cmp "$work/ref/checkpoints/step-00000040/optimizer.safetensors" \
    "$work/run/checkpoints/step-00000040/optimizer.safetensors"
echo "final weights and moments identical to the uninterrupted run"

echo "== Lion: stopped and resumed, the same weights and moment as uninterrupted"
lion=(--set optimizer.kind=lion --set optimizer.lr=1e-4 --set optimizer.beta2=0.99
      --set optimizer.weight_decay=0.1 --steps 20)
"$cli" train "${common[@]}" "${lion[@]}" --out "$work/lref" > "$work/lref.log"
grep -q '"optimizer": "lion"' "$work/lref/checkpoints/step-00000020/state.json"
"$cli" train "${common[@]}" "${lion[@]}" --out "$work/lrun" > "$work/lrun.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$work/lrun/checkpoints/latest" ] && break; sleep 0.05; done
kill -TERM "$pid"
set +e; wait "$pid"; rc=$?; set -e
[ "$rc" -eq 143 ] || [ "$rc" -eq 0 ] || { echo "Lion run: exit $rc"; cat "$work/lrun.log"; exit 1; }
echo "Lion run stopped at $(cat "$work/lrun/checkpoints/latest")"
"$cli" train "${common[@]}" "${lion[@]}" --out "$work/lrun" --resume latest >/dev/null
for f in model optimizer; do
  cmp "$work/lref/checkpoints/step-00000020/$f.safetensors" "$work/lrun/checkpoints/step-00000020/$f.safetensors"
done
# one moment: the optimizer file is half of AdamW's (plus its header)
la=$(stat -c %s "$work/ref/checkpoints/step-00000040/optimizer.safetensors")
ll=$(stat -c %s "$work/lref/checkpoints/step-00000020/optimizer.safetensors")
[ $((ll * 10)) -lt $((la * 6)) ] || { echo "Lion optimizer file $ll bytes, AdamW $la"; exit 1; }
echo "Lion: resumed run identical; optimizer state $ll bytes against AdamW's $la"

echo "== a truncated latest checkpoint is refused; the previous one still loads"
ck="$work/run/checkpoints/step-00000040/model.safetensors"
truncate -s 1000 "$ck"
set +e; "$cli" train "${common[@]}" --out "$work/run" --resume latest > "$work/bad.log" 2>&1; rc=$?; set -e
[ "$rc" -ne 0 ] && grep -q "truncated" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
prev=$(ls "$work/run/checkpoints" | grep '^step-' | sort | tail -2 | head -1)
"$cli" train "${common[@]}" --out "$work/run" --resume "$work/run/checkpoints/$prev" --steps 41 >/dev/null
echo "train CLI test passed"
