# SPDX-License-Identifier: MIT
# Inputs of cases/supervise.sh (#35 supervision, locks, cursors, threads):
# copies of the tiny run $W/run-ok with a damaged data cursor, runs whose
# checkpoints/ is a symbolic link, and run locks held with damaged records.
# Sourced by run_cases.sh with $CLI and $W set.

# sv_cursor NAME FIELD VALUE: a copy of run-ok whose state.json (2-space
# indent; the cursor's fields at 6 spaces) has FIELD set to VALUE.
sv_cursor() {
  local state="$W/$1/checkpoints/step-00000003/state.json"
  cp -r "$W/run-ok" "$W/$1" && rm -f "$W/$1/run.lock"
  sed -i "s/^      \"$2\": [0-9]*,\$/      \"$2\": $3,/" "$state"
  grep -q "^      \"$2\": $3,\$" "$state" || { echo "$1: no cursor field $2 in $state"; return 1; }
}
sv_cursor cur-batch-2p62 batch 4611686018427387904
sv_cursor cur-batch-past batch 4
sv_cursor cur-batch-negative batch -1
sv_cursor cur-batch-string batch '"3"'
sv_cursor cur-epoch-2p62 epoch 4611686018427387904
sv_cursor cur-epoch-negative epoch -1
sv_cursor cur-window-past window 1
sv_cursor cur-window-2p62 window 4611686018427387904
cp -r "$W/run-ok" "$W/cur-seed-missing" && rm -f "$W/cur-seed-missing/run.lock"
sed -i '/^      "seed": [0-9]*,$/d' "$W/cur-seed-missing/checkpoints/step-00000003/state.json"

# Runs whose checkpoints/ links to another run's, to a missing directory
# (a new run), and a run to resume with another thread count.
mkdir -p "$W/lk-shared" "$W/lk-dangling"
ln -s ../run-keep/checkpoints "$W/lk-shared/checkpoints"
ln -s ../no-such-dir "$W/lk-dangling/checkpoints"
cp -r "$W/run-ok" "$W/thr-run" && rm -f "$W/thr-run/run.lock"

# Run locks held (as a live esmtrain would hold them) with records whose
# pid is out of range or not a number; each holder ends once $W is gone.
for d in lk-pid-big:4294967297 lk-pid-junk:12x; do
  mkdir -p "$W/${d%%:*}"
  printf 'pid %s\nhost holder-host\nstarted 2026-01-01 00:00:00\ncommand esmtrain-example train\n' \
    "${d#*:}" > "$W/${d%%:*}/run.lock"
  flock -n "$W/${d%%:*}/run.lock" bash -c "touch '$W/.held-${d%%:*}'; while [ -d '$W' ]; do sleep 1; done" &
done
for d in lk-pid-big lk-pid-junk; do
  for _ in $(seq 1200); do [ -e "$W/.held-$d" ] && break; sleep 0.05; done
  [ -e "$W/.held-$d" ] || { echo "the lock holder of $d did not start in 60 s"; return 1; }
done
