#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `esmtrain-example watch` against a run being written, on a real
# pseudo-terminal (tmux, 100x40): it waits for metrics.jsonl, follows the
# steps (progress bar, loss, sparklines, "GPUs:"), goes on through a SIGTERM
# and `--resume latest` and through a resume from an earlier checkpoint
# (metrics.jsonl replaced), fits a narrow window, and leaves on q and on
# Ctrl-C with the terminal restored (alternate screen off, cursor shown, tty
# settings as before). Then --plain through a pipe (--exit-when-done) and
# --once. Every screen captured is printed into the log.
# Usage: test_watch.sh CLI
set -euo pipefail
cli=$1
command -v tmux >/dev/null || { echo "SKIP: no tmux"; exit 77; }
export LANG=C.UTF-8 LC_ALL=C.UTF-8
work=$(mktemp -d /tmp/esmt-watch-XXXXXX)
sock=esmt-watch-$$
tm() { tmux -u -L "$sock" -f /dev/null "$@"; }
pids=()
cleanup() {
  tm kill-server 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- screen helpers ----
ncap=0
screen=""
capture() { # capture the pane into $screen and the log
  ncap=$((ncap + 1))
  screen=$(tm capture-pane -p -t w)
  printf '%s\n' "---- screen $ncap: $1 ----" "$screen" "---- end of screen $ncap ----"
}
peek() { screen=$(tm capture-pane -p -t w); }
shows() { grep -Eq -- "$1" <<<"$screen"; }
step_shown() { sed -n 's/^progress *step \([0-9]*\).*/\1/p' <<<"$screen" | head -n 1; }
# wait_for SECONDS WHAT TEST...: peek until TEST passes
wait_for() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until peek && "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || { capture "timed out waiting for $what"; fail "$what"; }
    sleep 0.2
  done
}
step_above() { local s; s=$(step_shown); [ -n "$s" ] && [ "$s" -gt "$1" ]; }
alt_on() { tm display -p -t w '#{alternate_on}'; }
watch_pid() { ps -o pid= --ppid "$(tm display -p -t w '#{pane_pid}')" | tr -d ' ' | head -n 1; }

# ---- a small synthetic protein set ----
awk 'BEGIN { srand(11); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 400; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 120);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' \
  > "$work/prot.fa"
"$cli" ingest "$work/prot.fa" -o "$work/data" --valid-fraction 0.1 --quiet >/dev/null
run=$work/run
mkdir "$run"
common=(--data "$work/data" --layers 2 --width 32 --heads 2 --max-len 128 --batch-tokens 1024
        --warmup 4 --eval-every 10 --save-every 10 --threads 2 --log-every 1 --out "$run")

echo "== errors and help"
rc=0; "$cli" watch "$work/prot.fa" 2>"$work/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "esmtrain-example: watch: $work/prot.fa: not a directory" "$work/err" \
  || fail "a file as RUN: exit $rc, $(cat "$work/err")"
rc=0; "$cli" watch 2>/dev/null || rc=$?; [ "$rc" -eq 2 ] || fail "no RUN: exit $rc"
rc=0; "$cli" watch --interval x "$run" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "bad --interval: exit $rc"
"$cli" watch --help | grep -q -- "--exit-when-done"

echo "== watch waits for a run that has not started"
tm new-session -d -s w -x 100 -y 40 \
  "env -i PATH=$PATH HOME=$HOME TERM=xterm-256color LANG=C.UTF-8 PS1='$ ' bash --norc --noprofile"
tm send-keys -t w "stty -g > $work/stty.before; '$cli' watch --interval 0.3 '$run'" \
  "; echo WATCH_EXIT=\$?" Enter
wait_for 10 "the waiting screen" shows "waiting for $run/metrics.jsonl"
capture "before the trainer starts"
[ "$(alt_on)" = 1 ] || fail "not on the alternate screen"
shows "state +finished/stopped" || fail "no writer yet, but the state says otherwise"

echo "== a run being written"
"$cli" train "${common[@]}" --steps 2000 > "$work/a.log" 2>&1 &
tpid=$!; pids+=("$tpid")
wait_for 30 "steps on the screen" step_above 2
capture "training"
s1=$(step_shown)
wait_for 40 "the step to advance past $s1 and an evaluation" \
  eval 'step_above "$s1" && shows "^eval +step [1-9][0-9]*:"'
capture "training, later"
s2=$(step_shown)
echo "step $s1 -> $s2 between two screens"
shows "^state +running: pid $tpid" || fail "state: not running with pid $tpid"
shows "^progress +step $s2/2000  \[[█▏▎▍▌▋▊▉░]+\] +[0-9]+\.[0-9]%  ETA " \
  || fail "no progress bar, percent and ETA"
shows "^train +loss [0-9]+\.[0-9]{4}" || fail "no loss value"
shows "[▁▂▃▄▅▆▇█]{3,}  train loss, steps 1-$s2" || fail "no train loss sparkline"
shows "[▁▂▃▄▅▆▇█]+  eval loss" || fail "no eval loss sparkline"
shows "^speed +[0-9.]+k? tok/s  MFU" || fail "no tokens/s"
shows "^GPUs: " || fail "no GPUs line"

echo "== SIGTERM, then --resume latest: watch follows"
kill -TERM "$tpid"
rc=0; wait "$tpid" || rc=$?
[ "$rc" -eq 143 ] || { cat "$work/a.log"; fail "trainer: exit $rc after SIGTERM"; }
stopped=$(sed 's/^step-0*//' "$run/checkpoints/latest")
wait_for 10 "the stopped state" shows "^state +finished/stopped"
capture "trainer stopped at step $stopped"
end=$((stopped + 30))
"$cli" train "${common[@]}" --steps "$end" --resume latest > "$work/b.log" 2>&1 &
tpid=$!; pids+=("$tpid")
for _ in $(seq 200); do grep -q "^pid $tpid" "$run/run.lock" 2>/dev/null && break; sleep 0.05; done
grep -q "^pid $tpid" "$run/run.lock" || fail "the resumed trainer holds no run.lock"
# --plain through a pipe, while the resumed run goes on
( set +e; "$cli" watch --plain --exit-when-done --interval 0.2 "$run" 2>"$work/plain.err" \
    | cat > "$work/plain.log"; echo "${PIPESTATUS[0]}" > "$work/plain.rc" ) &
plain=$!; pids+=("$plain")
wait_for 30 "steps after the resume" \
  eval 'step_above "$stopped" && shows "^state +running: pid $tpid"'
capture "after --resume latest (from step $stopped)"
wpid=$(watch_pid)
[ -n "$wpid" ] && kill -0 "$wpid" && [ "$(alt_on)" = 1 ] || fail "watch is not running any more"
shows "^progress +step [0-9]+/$end " || fail "the resumed run's max_steps $end not shown"

echo "== a narrow window (SIGWINCH): lines cut to 40 columns"
tm resize-window -t w -x 40 -y 40
# a line longer than the window would wrap onto the next row: each stays on its own
row() { sed -n "$1p" <<<"$screen" | cut -c "1-${#2}"; }
wait_for 10 "the redraw at 40 columns" \
  eval '[ "$(row 2 "state ")" = "state " ] && [ "$(row 4 "progress ")" = "progress " ]'
capture "40 columns"
tm resize-window -t w -x 100 -y 40

echo "== the resumed run ends; --plain exits by itself"
rc=0; wait "$tpid" || rc=$?
[ "$rc" -eq 0 ] || { cat "$work/b.log"; fail "resumed trainer: exit $rc"; }
for _ in $(seq 100); do [ -f "$work/plain.rc" ] && break; sleep 0.1; done
[ -f "$work/plain.rc" ] || fail "watch --plain --exit-when-done did not exit after the run ended"
echo "--- watch --plain (first and last lines):"; head -n 3 "$work/plain.log"; echo "..."
tail -n 3 "$work/plain.log"
[ "$(cat "$work/plain.rc")" = 0 ] \
  || fail "watch --plain: exit $(cat "$work/plain.rc"): $(cat "$work/plain.err")"
grep -Eq "^step $end/$end  loss [0-9.]+  lr [0-9.e+-]+  grad [0-9.]+  tok/s " "$work/plain.log" \
  || fail "--plain: no line of step $end"
grep -Eq "^eval step [0-9]+  loss [0-9.]+  ppl " "$work/plain.log" || fail "--plain: no eval line"
! grep -q $'\033' "$work/plain.log" || fail "--plain wrote escape sequences"
! grep -Ev '^(step |eval step |-- )' "$work/plain.log" || fail "--plain: unexpected lines"
[ "$(grep -c "^step $((stopped + 1))/" "$work/plain.log")" = 1 ] \
  || fail "--plain: step $((stopped + 1)) not printed once"
wait_for 10 "the finished run" \
  eval 'shows "^state +finished/stopped" && shows "^progress +step $end/$end .*100\.0%  done"'
capture "the resumed run finished"

echo "== a resume from an earlier checkpoint replaces metrics.jsonl"
oldest=$(ls "$run/checkpoints" | grep '^step-' | sort | head -n 1)
from=$(sed 's/^step-0*//' <<<"$oldest")
[ "$from" -lt "$end" ] || fail "no checkpoint before step $end: $(ls "$run/checkpoints")"
"$cli" train "${common[@]}" --steps "$end" --resume "$run/checkpoints/$oldest" \
  > "$work/c.log" 2>&1 &
tpid=$!; pids+=("$tpid")
# The resumed run is short (tens of ms a step): watch may see it running or
# already finished, and either way it must have followed the replaced file.
wait_for 30 "the replaced file followed" \
  eval 'shows "replaced 1 time" && step_above "$from" &&
        { shows "^state +running: pid $tpid" || ! kill -0 "$tpid" 2>/dev/null; }'
capture "resumed from step $from: metrics.jsonl replaced"
rc=0; wait "$tpid" || rc=$?
[ "$rc" -eq 0 ] || { cat "$work/c.log"; fail "trainer from step $from: exit $rc"; }
wait_for 10 "step $end again" shows "^progress +step $end/$end "

echo "== q quits and restores the terminal"
tm send-keys -t w q
wait_for 5 "watch to exit on q" shows "^WATCH_EXIT=0"
tm send-keys -t w "stty -g > $work/stty.after" Enter
sleep 0.3
capture "after q"
[ "$(alt_on)" = 0 ] || fail "the alternate screen is still on"
[ "$(tm display -p -t w '#{cursor_flag}')" = 1 ] || fail "the cursor is still hidden"
! shows "^progress" || fail "the watch screen is still shown"
cmp "$work/stty.before" "$work/stty.after" || fail "terminal settings not restored"

echo "== Ctrl-C quits with status 0"
tm send-keys -t w "clear; '$cli' watch '$run'; echo WATCH_EXIT=\$?" Enter
wait_for 10 "watch again" shows "^progress"
tm send-keys -t w C-c
wait_for 5 "watch to exit on Ctrl-C" shows "^WATCH_EXIT=0"
[ "$(alt_on)" = 0 ] || fail "the alternate screen is still on after Ctrl-C"

echo "== --once"
"$cli" watch --once "$run" > "$work/once.txt"
cat "$work/once.txt"
grep -Eq "^progress +step $end/$end .*100\.0%" "$work/once.txt" || fail "--once: no final step"
grep -q "^GPUs: " "$work/once.txt" || fail "--once: no GPUs line"
! grep -q $'\033' "$work/once.txt" || fail "--once wrote escape sequences"
echo "== --once on a written file: mixed precision, device figures, old lines, a dead writer"
fake=$work/fake
mkdir "$fake"
sleep 0 & dead=$!; wait "$dead"
printf 'pid %s\nhost %s\nstarted 2026-01-01 00:00:00\ncommand train\n' "$dead" "$(hostname)" \
  > "$fake/run.lock"
{
  echo '{"kind":"train","step":1,"loss":3.5,"lr":1e-4,"tokens":100,"tokens_per_s":50}'
  echo 'not json'
  for s in 2 3 4 5; do
    echo '{"kind":"train","step":'$s',"max_steps":0,"loss":3.'$((9 - s))',"lr":2e-4,'\
'"grad_norm":1.5,"tokens_per_s":12345,"mfu":0.4,"step_ms":80,"elapsed_s":9,"padding":0.05,'\
'"loss_scale":32768,"overflows":3,"skipped":2,"rss_mib":900,"device_mem_mib":2048,'\
'"device_mem_total_mib":8192,"device_util":87}'
  done
  echo '{"kind":"eval","step":5,"loss":3.2,"perplexity":24.5,"accuracy":0.12,'\
'"unigram_perplexity":null}'
} > "$fake/metrics.jsonl"
LC_ALL=C "$cli" watch --once "$fake" > "$work/fake.txt"
cat "$work/fake.txt"
for want in "^state +finished/stopped.*\(run.lock names pid $dead, which is gone\)" \
    "5 train, 1 eval records \(1 other line\)" "^progress +step 5 \(until the data ends\)" \
    "^scaling +loss scale 32768  overflows 3  skipped 2" \
    "^memory +RSS 900 MiB  device 2048/8192 MiB \(25%\)  device util 87%" \
    "^eval +step 5: .*baseline -\)" "[.:=+*#%@-]{5}  train loss" "^GPUs: "; do
  grep -Eq -- "$want" "$work/fake.txt" || fail "--once of the written file lacks /$want/"
done
! LC_ALL=C grep -q '[^ -~]' "$work/fake.txt" || fail "not ASCII in the C locale"
echo "== a pid alive but not the writer, a pid out of range, a closed output"
printf 'pid %s\nhost %s\n' "$$" "$(hostname)" > "$fake/run.lock" # this shell: no run.lock open
"$cli" watch --once "$fake" | grep -q "^state .*pid $$, which is another process now" \
  || fail "a live pid that does not hold run.lock is taken for the writer"
timeout -k 2 10 "$cli" watch --plain --exit-when-done --interval 0.1 "$fake" > /dev/null \
  || fail "--exit-when-done on a reused pid: exit $?"
printf 'pid 4294967297\nhost %s\n' "$(hostname)" > "$fake/run.lock" # pid 1 in 32 bits
timeout -k 2 10 "$cli" watch --plain --exit-when-done --interval 0.1 "$fake" 2> "$work/err" \
  > /dev/null || fail "--exit-when-done on pid 4294967297: exit $?"
grep -q "run.lock is damaged (its pid '4294967297' is not a process id)" "$work/err" \
  || fail "no 'damaged' message: $(cat "$work/err")"
rc=0; timeout -k 2 10 "$cli" watch --plain --interval 0.1 "$fake" | head -n 1 > /dev/null \
  || rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || fail "watch | head -1: exit $rc (124: it did not notice the closed pipe)"
if [ -n "${2:-}" ]; then
  echo "== the GPU table, from the emulator's NVML ($2)"
  ESMT_NVML_LIBRARY=$2 ESMT_EMU_DEVICES=2 "$cli" watch --once "$fake" > "$work/gpus.txt"
  sed -n '/^GPUs:/,$p' "$work/gpus.txt"
  grep -q "^GPUs: *2 (NVML" "$work/gpus.txt" || fail "no 2 GPUs"
  [ "$(grep -Ec '^ +[01]  .*%  .*GiB .* C .* W$' "$work/gpus.txt")" = 2 ] || fail "no table rows"
fi
echo "watch test passed in ${SECONDS}s"
