#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One writer per run directory (issue #16): two trainers started together
# on one directory, in each round: exactly one runs, the other is refused
# at once with exit status 1 and a message naming the holder's pid and
# host. Rounds: two new runs; two `--resume latest` of the same run; a
# 2-rank `launch` against a plain train. The one that ran is then stopped
# with SIGTERM (exit 143, checkpoint saved) and its run resumes. A run
# whose checkpoints/ links to a training run's is refused while that one
# trains on; a second new run into a training run names its writer.
# Usage: test_run_lock.sh CLI [ROUNDS]
set -euo pipefail
cli=$1 rounds=${2:-3}
work=$(mktemp -d /tmp/esmt-lock-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
awk 'BEGIN { srand(5); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 300; r++) { printf(">q%d\n", r); n = 20 + int(rand() * 60);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/p.fa"
"$cli" ingest "$work/p.fa" -o "$work/data" --valid-fraction 0 --quiet >/dev/null
tiny=(--data "$work/data" --no-mfu --layers 1 --width 16 --heads 2 --warmup 1 --eval-every 0
      --save-every 5 --threads 1 --log-every 0)
host=$(hostname)
refusals=0

# race NAME CMD_A... -- CMD_B...: start both at once (each with its output
# in $work/NAME.a|b.log); exactly one may still run once the other ended.
race() {
  local name=$1; shift
  local a=() b=()
  while [ "$1" != "--" ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  "${a[@]}" > "$work/$name.a.log" 2>&1 & local pa=$!
  "${b[@]}" > "$work/$name.b.log" 2>&1 & local pb=$!
  local loser="" winner="" wpid="" rc
  for _ in $(seq 1200); do
    if ! kill -0 "$pa" 2>/dev/null; then loser=a winner=b wpid=$pb; break; fi
    if ! kill -0 "$pb" 2>/dev/null; then loser=b winner=a wpid=$pa; break; fi
    sleep 0.05
  done
  [ -n "$loser" ] || { echo "$name: both are still running after 60 s"; exit 1; }
  set +e; wait "$([ $loser = a ] && echo "$pa" || echo "$pb")"; rc=$?; set -e
  [ "$rc" -eq 1 ] || { echo "$name: the refused one exited $rc, not 1:"; cat "$work/$name.$loser.log"; exit 1; }
  grep -q "is in use by another esmtrain process (pid $wpid, host $host" "$work/$name.$loser.log" || {
    echo "$name: the refusal does not name the holder (pid $wpid, host $host):"
    cat "$work/$name.$loser.log"; exit 1; }
  sleep 1
  kill -0 "$wpid" 2>/dev/null || { echo "$name: the other one is not running:"; cat "$work/$name.$winner.log"; exit 1; }
  refusals=$((refusals + 1))
  WINNER_PID=$wpid
}

# stop RUN PID: SIGTERM once RUN has a checkpoint; it saves and exits 143 (or
# 130 from launch forwarding SIGINT; 143 here); the run then resumes.
stop_and_resume() {
  local run=$1 pid=$2 rc
  for _ in $(seq 600); do [ -f "$run/checkpoints/latest" ] && break; sleep 0.05; done
  kill -TERM "$pid"
  set +e; wait "$pid"; rc=$?; set -e
  [ "$rc" -eq 143 ] || { echo "expected exit 143 after SIGTERM, got $rc"; exit 1; }
  local step; step=$(cat "$run/checkpoints/latest")
  "$cli" train "${tiny[@]}" --steps $((10#${step#step-} + 1)) --out "$run" --resume latest >/dev/null
}

for r in $(seq "$rounds"); do
  run=$work/new-$r
  echo "== round $r: two new runs on one directory"
  race "new$r" "$cli" train "${tiny[@]}" --steps 1000000 --out "$run" -- \
               "$cli" train "${tiny[@]}" --steps 1000000 --out "$run"
  stop_and_resume "$run" "$WINNER_PID"
  echo "== round $r: two resumes of one run"
  race "resume$r" "$cli" train "${tiny[@]}" --steps 1000000 --out "$run" --resume latest -- \
                  "$cli" train "${tiny[@]}" --steps 1000000 --out "$run" --resume latest
  stop_and_resume "$run" "$WINNER_PID"
done
echo "== launch -n 2 against a train on one directory"
# the train holds the lock first; rank 0 of the launch is refused and the
# launcher stops its other rank
"$cli" train "${tiny[@]}" --steps 1000000 --out "$work/dp" > "$work/dp.train.log" 2>&1 &
holder=$!
for _ in $(seq 600); do [ -s "$work/dp/run.lock" ] && break; sleep 0.05; done
set +e
"$cli" launch --grace 2 -n 2 train "${tiny[@]}" --steps 1000000 --out "$work/dp" --resume latest \
  > "$work/dp.launch.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "launch exited $rc, not 1"; cat "$work/dp.launch.log"; exit 1; }
grep -q "is in use by another esmtrain process (pid $holder, host $host" "$work/dp.launch.log" \
  || { cat "$work/dp.launch.log"; exit 1; }
kill -0 "$holder" || { echo "the train holding the run stopped"; exit 1; }
refusals=$((refusals + 1))
stop_and_resume "$work/dp" "$holder"
echo "== a run whose checkpoints/ links to a training run's checkpoints"
# each run holds its own lock: the link, which would let both write and
# prune one directory, is refused naming it
"$cli" train "${tiny[@]}" --steps 1000000 --out "$work/owner" > "$work/owner.log" 2>&1 &
owner=$!
for _ in $(seq 600); do [ -f "$work/owner/checkpoints/latest" ] && break; sleep 0.05; done
mkdir "$work/borrower" && ln -s ../owner/checkpoints "$work/borrower/checkpoints"
set +e
# (a timeout: a linked run that is not refused trains on beside the owner)
timeout 20 "$cli" train "${tiny[@]}" --steps 1000000 --out "$work/borrower" --resume latest \
  > "$work/borrower.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "the linked run exited $rc, not 1 (124: it trained beside the owner)"; \
  tail -3 "$work/borrower.log"; exit 1; }
grep -q "borrower/checkpoints is a symbolic link (to $(realpath "$work/owner/checkpoints"))" \
  "$work/borrower.log" || { cat "$work/borrower.log"; exit 1; }
kill -0 "$owner" || { echo "the run owning the checkpoints stopped"; exit 1; }
refusals=$((refusals + 1))
# A new run into a directory that already holds the training run's
# checkpoints: the refusal names the process writing it (not only that a
# run is there), whether it came before or after the checkpoint appeared.
set +e
timeout 20 "$cli" train "${tiny[@]}" --steps 1000000 --out "$work/owner" > "$work/second.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "a second new run into a held run exited $rc, not 1"; exit 1; }
grep -q "in use by another esmtrain process (pid $owner, host $host" "$work/second.log" ||
  { echo "the refusal of a second run does not name the holder:"; cat "$work/second.log"; exit 1; }
refusals=$((refusals + 1))
stop_and_resume "$work/owner" "$owner"
echo "run lock: $refusals races, each with exactly one writer and a refusal naming it"
