#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Kill anywhere: interrupt a training run at KILLS random moments
# (checkpoint writes included), cycling through SIGKILL, SIGHUP, SIGPIPE
# and SIGXFSZ. A caught signal must end the run like SIGTERM: a checkpoint
# saved and exit status 128 + the signal (or, before training began, that
# status and a message); SIGKILL ends it anywhere. After each, `--resume
# latest` (the newest step-* when `latest` was not yet written; a fresh
# start when no checkpoint exists yet) must succeed, and the final weights
# and moments must equal an uninterrupted run bit for bit.
# Usage: kill_anywhere.sh CLI [KILLS] [SEED] [STEPS]
# STEPS (800) only has to outlast the kills: each interrupted run advances a
# few steps at most (it is stopped at start-up, in a checkpoint write or
# just after its next one), and after the last kill the run finishes the
# rest uninterrupted, which is most of the test's time.
set -euo pipefail
cli=$1 kills=${2:-50} seed=${3:-1} steps=${4:-800}
work=$(mktemp -d /tmp/esmt-kill-XXXXXX)
trap 'rm -rf "$work"' EXIT
awk 'BEGIN { srand(11); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 300; r++) { printf(">k%d\n", r); n = 20 + int(rand() * 100);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' > "$work/p.fa"
"$cli" ingest "$work/p.fa" -o "$work/data" --valid-fraction 0 --quiet >/dev/null
args=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 96 --batch-tokens 768
      --steps $steps --warmup 5 --eval-every 0 --save-every 1 --keep 2 --threads 2 --no-mfu --log-every 0)
"$cli" train "${args[@]}" --out "$work/ref" >/dev/null
RANDOM=$seed
done_runs=0 killed=0 midsave=0
ckpt=$work/run/checkpoints
# The temporary checkpoint directories there now, one name per line (stale
# ones of killed runs stay until the next save prunes them).
tmp_dirs() { compgen -G "$ckpt/.tmp-*" || true; }
# Whether a temporary directory exists that was not in $1.
new_tmp_dir() {
  local d
  while read -r d; do
    [ -n "$d" ] && ! grep -qxF "$d" <<<"$1" && return 0
  done < <(tmp_dirs)
  return 1
}
# Poll (~1 ms) until the run has begun a checkpoint write (a new temporary
# directory), or has ended; 60 s at most.
wait_for_save_start() {
  local i
  for ((i = 0; i < 60000; i++)); do
    new_tmp_dir "$stale" && return 0
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.001
  done
}
# Until `latest` names a newer checkpoint than when called, or the run ended.
wait_for_next_checkpoint() {
  local before="" now i
  [ -f "$ckpt/latest" ] && before=$(<"$ckpt/latest")
  for ((i = 0; i < 60000; i++)); do
    now=""
    [ -f "$ckpt/latest" ] && now=$(<"$ckpt/latest")
    [ "$now" != "$before" ] && return 0
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.001
  done
}
# How to continue the run: `latest`, else the newest checkpoint (a kill
# between publishing the first one and naming it in `latest`), else anew.
resume_args() {
  resume=()
  local newest
  newest=$(compgen -G "$ckpt/step-*" | sort | tail -1 || true)
  if [ -f "$ckpt/latest" ]; then resume=(--resume latest)
  elif [ -n "$newest" ]; then resume=(--resume "$newest")
  fi
}
signals=(KILL HUP PIPE XFSZ)
declare -A sent=() saved=() early=()
for k in $(seq "$kills"); do
  resume_args
  stale=$(tmp_dirs)
  # each signal in turn for 4 kills, so that each meets every kind of moment
  sig=${signals[$(( (k - 1) / 4 % 4 ))]}
  "$cli" train "${args[@]}" --out "$work/run" "${resume[@]}" >"$work/last.log" 2>&1 &
  pid=$!
  # The moment, by the run's progress rather than by the clock (on a loaded
  # machine start-up alone can outlast any fixed delay): every 4th kill a
  # random moment of start-up, every 4th as soon as a checkpoint write has
  # begun, the rest a random moment after the run has published its next
  # checkpoint (inside a step or the next write).
  case $((k % 4)) in
    0) sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", (r % 1000) / 1000.0 * 0.15 }')" ;;
    1) wait_for_save_start "$pid" ;;
    *) wait_for_next_checkpoint "$pid"
       sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", (r % 1000) / 1000.0 * 0.06 }')" ;;
  esac
  in_save=0
  new_tmp_dir "$stale" && in_save=1
  if kill -"$sig" "$pid" 2>/dev/null; then
    killed=$((killed + 1))
    sent[$sig]=$(( ${sent[$sig]:-0} + 1 ))
    set +e; wait "$pid" 2>/dev/null; rc=$?; set -e
    if [ "$sig" = KILL ]; then
      # a new temporary checkpoint directory means the kill landed mid-save
      if new_tmp_dir "$stale"; then midsave=$((midsave + 1)); fi
    else
      [ "$in_save" -eq 1 ] && midsave=$((midsave + 1))
      num=$(kill -l "$sig")
      if [ "$rc" -eq 0 ]; then
        : # it finished as the signal came
      elif [ "$rc" -ne $((128 + num)) ]; then
        echo "run $k: SIG$sig gave exit $rc, not $((128 + num)):"; cat "$work/last.log"; exit 1
      elif grep -q "interrupted by signal $num, .* checkpoint saved" "$work/last.log"; then
        saved[$sig]=$(( ${saved[$sig]:-0} + 1 ))
      elif grep -q "stopped by signal $num[ ,].*before training began" "$work/last.log" || [ ! -s "$work/last.log" ]; then
        early[$sig]=$(( ${early[$sig]:-0} + 1 )) # in start-up: nothing to save
      else
        echo "run $k: SIG$sig gave exit $rc without saying why:"; cat "$work/last.log"; exit 1
      fi
    fi
  else
    # it ended before the kill: that must have been a success
    set +e; wait "$pid"; rc=$?; set -e
    [ "$rc" -eq 0 ] || { echo "run $k failed on its own (exit $rc):"; cat "$work/last.log"; exit 1; }
  fi
  if [ -f "$work/run/checkpoints/latest" ] && [ "$(cat "$work/run/checkpoints/latest")" = "$(printf step-%08d $steps)" ]; then
    done_runs=$((done_runs + 1))
    break
  fi
done
# finish whatever is left
resume_args
"$cli" train "${args[@]}" --out "$work/run" "${resume[@]}" >"$work/last.log" 2>&1 || { cat "$work/last.log"; exit 1; }
final=$(printf step-%08d $steps)
cmp "$work/ref/checkpoints/$final/model.safetensors" "$work/run/checkpoints/$final/model.safetensors"
cmp "$work/ref/checkpoints/$final/optimizer.safetensors" "$work/run/checkpoints/$final/optimizer.safetensors"
leftovers=$(ls -a "$work/run/checkpoints" | grep -c '^\.tmp-' || true)
per=""
for sig in "${signals[@]}"; do
  per+=" SIG$sig ${sent[$sig]:-0}"
  [ "$sig" = KILL ] || per+=" (${saved[$sig]:-0} saved a checkpoint, ${early[$sig]:-0} in start-up)"
  per+=";"
done
echo "kill anywhere: $killed interruptions ($midsave during a checkpoint write):$per every resume succeeded, final weights and moments identical ($leftovers stale temp dirs left)"
rm -rf "$work" # kept when anything above failed, for a look
