#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `esmtrain-example launch` on one machine (issue #9), CPU backend:
#  - 2 ranks train; only rank 0 writes the log, metrics and checkpoints;
#  - dist.zero 1, 2 and 3 (ZeRO-1, ZeRO-2, ZeRO-3 with the weights sharded
#    from the model's creation: one micro-batch per rank) write the same
#    checkpoint as dist.zero 0, the banner names the stage; dist.zero 1, 2
#    and 3 with offload.optimizer on (each rank's shard on its host) write
#    it too;
#  - 2 ranks stopped at update 4 and resumed by 2 ranks end bit-identical
#    to an uninterrupted 2-rank run;
#  - Ctrl-C (SIGINT to the launcher) reaches every rank: they stop after the
#    same update, save, and the launcher exits 130;
#  - the launcher killed with SIGKILL: every rank stops within seconds (the
#    kernel's SIGTERM), saving after the same update; the latest checkpoint
#    loads and `--resume latest` ends bit-identical to an uninterrupted run;
#  - a rank killed with SIGKILL makes the other exit with a message naming
#    it, and the launcher reports the failure (no hang).
# Usage: test_launch.sh CLI
set -euo pipefail
cli=$1
work=$(mktemp -d /tmp/esmt-launch-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(11); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 600; r++) { printf(">p%d\n", r); n = 40 + int(rand() * 100);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet >/dev/null
common=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 128 --batch-tokens 1024
        --warmup 2 --eval-every 4 --log-every 1 --no-mfu)

echo "== 2 ranks, 8 updates"
"$cli" launch -n 2 train "${common[@]}" --steps 8 --out "$work/full" > "$work/full.log" 2>&1
grep -q "step 8/8" "$work/full.log"
[ "$(grep -c 'step 8/8' "$work/full.log")" -eq 1 ] || { echo "rank 1 printed progress"; exit 1; }
[ -f "$work/full/checkpoints/step-00000008/model.safetensors" ]
[ "$(wc -l < "$work/full/metrics.jsonl")" -ge 8 ]

echo "== 2 ranks, dist.zero 1, 2 and 3: the same checkpoint as dist.zero 0, bit for bit"
# without clipping: the ZeRO norm is summed per shard, its last bits may
# differ, and with them an active clip factor (docs/distributed.md)
for z in 0 1 2 3; do
  "$cli" launch -n 2 train "${common[@]}" --steps 8 --out "$work/zero$z" --set dist.zero=$z \
    --set train.grad_clip=0 > "$work/zero$z.log" 2>&1 || { cat "$work/zero$z.log"; exit 1; }
done
for z in 1 2 3; do
  grep -q "reduce-scattered (ZeRO-$z)" "$work/zero$z.log" || { cat "$work/zero$z.log"; exit 1; }
  for f in model optimizer; do
    cmp "$work/zero0/checkpoints/step-00000008/$f.safetensors" \
        "$work/zero$z/checkpoints/step-00000008/$f.safetensors"
  done
done
echo "== dist.zero 1, 2 and 3 with offload.optimizer on: the same checkpoint"
for z in 1 2 3; do
  "$cli" launch -n 2 train "${common[@]}" --steps 8 --out "$work/zoff$z" --set dist.zero=$z \
    --set train.grad_clip=0 --set offload.optimizer=on > "$work/zoff$z.log" 2>&1 \
    || { cat "$work/zoff$z.log"; exit 1; }
  grep -q "(ZeRO-$z) .*optimizer offloaded: fp32 master, moments and gradients of \[0, " \
    "$work/zoff$z.log" || { cat "$work/zoff$z.log"; exit 1; }
  for f in model optimizer; do
    cmp "$work/zero0/checkpoints/step-00000008/$f.safetensors" \
        "$work/zoff$z/checkpoints/step-00000008/$f.safetensors"
  done
done

echo "== SIGINT to the launcher mid-run, then 2 ranks --resume latest: bit-identical"
"$cli" launch -n 2 train "${common[@]}" --steps 40 --save-every 5 --out "$work/ref" > /dev/null 2>&1
"$cli" launch -n 2 train "${common[@]}" --steps 40 --save-every 5 --out "$work/run" \
  > "$work/run.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$work/run/checkpoints/latest" ] && break; sleep 0.05; done
kill -INT "$pid"
set +e; wait "$pid"; rc=$?; set -e
[ "$rc" -eq 130 ] || { echo "expected exit 130 after SIGINT, got $rc"; cat "$work/run.log"; exit 1; }
grep -q "interrupted by signal 2" "$work/run.log"
stopped=$(cat "$work/run/checkpoints/latest")
echo "   stopped at $stopped"
"$cli" launch -n 2 train "${common[@]}" --steps 40 --save-every 5 --out "$work/run" \
  --resume latest > "$work/resume.log" 2>&1
cmp "$work/ref/checkpoints/step-00000040/model.safetensors" \
    "$work/run/checkpoints/step-00000040/model.safetensors"
cmp "$work/ref/checkpoints/step-00000040/optimizer.safetensors" \
    "$work/run/checkpoints/step-00000040/optimizer.safetensors"

echo "== the launcher killed with SIGKILL: its ranks stop, save, and the run resumes exactly"
# 1000 updates: ranks left running would go on for seconds more (about 10 ms
# an update here), far past the limit below. A constant learning rate, so
# that the resume and the reference can stop soon after the kill and still
# follow the killed run's schedule.
long=(--steps 1000 --save-every 5 --log-every 50 --set schedule.kind=constant)
"$cli" launch -n 2 train "${common[@]}" "${long[@]}" --out "$work/orphan" > "$work/orphan.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$work/orphan/checkpoints/latest" ] && break; sleep 0.05; done
ranks=$(pgrep -P "$pid" | tr '\n' ' ')
[ "$(echo $ranks | wc -w)" -eq 2 ] || { echo "expected 2 ranks under the launcher, got '$ranks'"; exit 1; }
kill -KILL "$pid"
start=$(date +%s.%N)
{ wait "$pid"; } 2>/dev/null || true # the shell's "Killed" notice: expected here
# gone: no such process, or a zombie waiting for its new parent to reap it
alive_ranks() {
  local n=0 c
  for c in $ranks; do
    [ -r "/proc/$c/stat" ] && [ "$(awk '{ print $3 }' "/proc/$c/stat" 2>/dev/null)" != Z ] && n=$((n + 1))
  done
  echo $n
}
for _ in $(seq 100); do [ "$(alive_ranks)" -eq 0 ] && break; sleep 0.05; done
took=$(echo "$(date +%s.%N) - $start" | bc)
left=$(alive_ranks)
[ "$left" -eq 0 ] || { echo "$left rank(s) still running 5 s after the launcher was killed"; \
  kill -KILL $ranks 2>/dev/null; cat "$work/orphan.log"; exit 1; }
printf '   both ranks gone %.2f s after the launcher was killed\n' "$took"
grep -q "interrupted by signal 15" "$work/orphan.log" || { cat "$work/orphan.log"; exit 1; }
stopped=$(cat "$work/orphan/checkpoints/latest")
echo "   stopped at $stopped"
[ "$stopped" != step-00001000 ] || { echo "the run ended before the launcher was killed"; exit 1; }
# the saved checkpoint loads and verifies (sizes and checksums)
"$cli" export "$work/orphan/checkpoints/$stopped" -o "$work/orphan-export" > /dev/null
end=$((10#${stopped#step-} + 10)) # ten updates past the kill, resumed and uninterrupted
"$cli" launch -n 2 train "${common[@]}" "${long[@]}" --steps "$end" --out "$work/orphan" \
  --resume latest > "$work/orphan-resume.log" 2>&1 || { cat "$work/orphan-resume.log"; exit 1; }
"$cli" launch -n 2 train "${common[@]}" "${long[@]}" --steps "$end" --out "$work/orphan-ref" \
  > /dev/null 2>&1
last=$(printf 'step-%08d' "$end")
for f in model optimizer; do
  cmp "$work/orphan-ref/checkpoints/$last/$f.safetensors" \
      "$work/orphan/checkpoints/$last/$f.safetensors"
done
echo "   resumed to $last: model and optimizer identical to the uninterrupted run"

echo "== rank 1 killed: rank 0 stops naming it, the launcher reports it"
"$cli" launch -n 2 train "${common[@]}" --steps 100000 --save-every 5 --out "$work/kill" \
  > "$work/kill.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$work/kill/checkpoints/latest" ] && break; sleep 0.05; done
victim=
for c in $(pgrep -P "$pid"); do
  if tr '\0' '\n' < "/proc/$c/environ" | grep -qx 'RANK=1'; then victim=$c; fi
done
[ -n "$victim" ] || { echo "rank 1 not found"; exit 1; }
kill -KILL "$victim"
start=$(date +%s)
set +e; wait "$pid"; rc=$?; set -e
took=$(( $(date +%s) - start ))
cat "$work/kill.log" | tail -4
[ "$rc" -ne 0 ] || { echo "launcher exited 0 after a rank was killed"; exit 1; }
grep -q "rank 1 failed" "$work/kill.log"
grep -q "launch: rank 1 exited with status 137" "$work/kill.log"
[ "$took" -lt 60 ] || { echo "took ${took}s to stop"; exit 1; }
# One rank alone would halve the tokens per update (train.tokens_per_update
# 0: one micro-batch per rank), so it is refused naming the world size;
# the last checkpoint still loads with the run's two ranks.
set +e; "$cli" train "${common[@]}" --steps 100000 --out "$work/kill" --resume latest --max-time 1 \
  > "$work/one.log" 2>&1; rc=$?; set -e
[ "$rc" -eq 1 ] && grep -q "world_size: 2 -> 1" "$work/one.log" || { cat "$work/one.log"; exit 1; }
step=$(cat "$work/kill/checkpoints/latest")
"$cli" launch -n 2 train "${common[@]}" --steps $((10#${step#step-} + 1)) --out "$work/kill" \
  --resume latest > "$work/two.log" 2>&1 || { cat "$work/two.log"; exit 1; }
echo "launch ok"
