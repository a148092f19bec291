#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The bad-input corpus: every line of cases.tsv is a command that must end
# with the given exit status and print the given message fragment, and
# must not crash (exit >= 128) or hang. Usage:
#   run_cases.sh CLI API_MISUSE BACKEND_DIR
# ($API in a case is tests/bad_inputs/api_misuse.c: wrong call sequences
# against the C API, run on the cpu backend from BACKEND_DIR.)
set -uo pipefail
CLI=$(realpath "$1") # absolute: each case runs in the work dir
API=$(realpath "$2")
ESMT_BACKEND_DIR=$(realpath "$3")
export ESMT_BACKEND_DIR
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
# ---- #16 run-dir safety (h-runsafety) ----
# Runs to protect, exports, a directory the user made, live lock holders,
# a large input; helpers for the cases that send signals.
for r in run-keep run-exp run-nolatest run-xfsz run-busy; do cp -r "$W/run-ok" "$W/$r"; done
rm "$W/run-nolatest/checkpoints/latest"
ln -s run-keep "$W/link-run"
ln -s run-exp "$W/link-exp"
"$CLI" export "$W/run-ok" -o "$W/hfexp" >/dev/null
cp -r "$W/hfexp" "$W/hfexp-extra" && echo "the user's notes" > "$W/hfexp-extra/notes.txt"
mkdir -m 0700 "$W/mine" "$W/busy-empty"
# Holders of two run locks (as another esmtrain would hold them), with a
# record to name; each ends once $W is gone.
for d in run-busy busy-empty; do
  printf 'pid 4242\nhost holder-host\nstarted 2026-01-01 00:00:00\ncommand esmtrain-example train --out %s\n' \
    "$d" > "$W/$d/run.lock"
  flock -n "$W/$d/run.lock" bash -c "touch '$W/.held-$d'; while [ -d '$W' ]; do sleep 1; done" &
done
# Each holder says when it holds its lock (on a loaded machine that can take
# seconds); a corpus run without the locks held would test nothing.
for d in run-busy busy-empty; do
  for _ in $(seq 1200); do [ -e "$W/.held-$d" ] && break; sleep 0.05; done
  [ -e "$W/.held-$d" ] || { echo "FAIL: the lock holder of $d did not start in 60 s"; exit 1; }
done
awk 'BEGIN { s = "MKVLAGGHHKKLLAAGGDEFPQRSTVWYCINMKVLAGGHHKKLLAAGGDEFPQRSTVWYCINMKVLAGGHHKKLLAAGGDEFPQRSTVWYCIN";
  for (r = 0; r < 400000; r++) printf(">b%d\n%s\n", r, substr(s, 1 + r % 20, 60)) }' > "$W/big.fa"
# signal_run SIG CLI RUN DATA: a tiny train into RUN gets SIG once its
# first checkpoint exists; prints its output and exits with its status,
# or 99 when `--resume latest` then fails.
signal_run() {
  local sig=$1 cli=$2 run=$3 data=$4 log rc
  local tiny=(--data "$data" --no-mfu --layers 1 --width 16 --heads 2 --warmup 1 --eval-every 0
              --threads 1)
  log=$(mktemp)
  "$cli" train "${tiny[@]}" --steps 100000 --save-every 20 --out "$run" > "$log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do [ -f "$run/checkpoints/latest" ] || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.05; done
  kill -"$sig" "$pid"
  wait "$pid"; rc=$?
  cat "$log"; rm -f "$log"
  local step; step=$(cat "$run/checkpoints/latest")
  "$cli" train "${tiny[@]}" --steps $((10#${step#step-} + 2)) --out "$run" --resume latest >/dev/null 2>&1 || return 99
  return $rc
}
# signal_startup SIG CLI RUN DATA: SIG to a train in start-up (it holds the
# run's lock and evaluates before its first update); it must end at once
# with its status and a message, and leave no checkpoint. The model is wide
# enough that this start-up lasts about 0.6 s on a 2-core host: at width 16
# it lasted a millisecond and a busy host reached step 1 before the signal.
signal_startup() {
  local sig=$1 cli=$2 run=$3 data=$4 log rc
  log=$(mktemp)
  "$cli" train --data "$data" --layers 2 --width 256 --heads 4 --warmup 1 --steps 5 --out "$run" \
    > "$log" 2>&1 &
  local pid=$!
  for _ in $(seq 3000); do [ -s "$run/run.lock" ] || ! kill -0 "$pid" 2>/dev/null && break; sleep 0.002; done
  kill -"$sig" "$pid"
  wait "$pid"; rc=$?
  cat "$log"; rm -f "$log"
  [ ! -e "$run/checkpoints" ] || return 99
  return $rc
}
# signal_ingest SIG CLI IN OUT: SIG to an ingest once it writes.
signal_ingest() {
  local sig=$1 cli=$2 in=$3 out=$4 log rc
  log=$(mktemp)
  "$cli" ingest "$in" -o "$out" --quiet > "$log" 2>&1 &
  local pid=$!
  for _ in $(seq 2000); do # the temporary: beside a new OUT, inside an existing one
    compgen -G "$out.esmtrain-tmp-*" >/dev/null || compgen -G "$out/.esmtrain-tmp-*" >/dev/null ||
      ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.005
  done
  kill -"$sig" "$pid"
  wait "$pid"; rc=$?
  cat "$log"; rm -f "$log"
  return $rc
}
export -f signal_run signal_startup signal_ingest
# More inputs, one file per class of cases (inputs/*.sh, sourced here with
# $CLI and $W set; each makes only what its cases/*.tsv use).
for f in "$here"/inputs/*.sh; do
  [ -e "$f" ] || continue
  # shellcheck source=/dev/null
  . "$f" || { echo "FAIL: making the inputs of $(basename "$f")"; exit 1; }
done
# ---- what a case may change ----
# Every path under $W ("PATH<TAB>type mode [size mtime | link]"), with an
# md5 for files under 1 MiB; the runs' own bookkeeping (run.lock,
# train.log, metrics.jsonl, checkpoint temporaries) left out: a case may
# append to a run's log and take its lock, and change nothing else. A case
# that makes inputs of its own in its command puts them under $W/scratch/.
snapshot() {
  ( cd "$W" || exit 1
    local skip=( \( -path ./scratch -o -name run.lock -o -name train.log -o -name metrics.jsonl -o -name 'events.out.tfevents.*' -o -path '*/checkpoints/.tmp-*' \) -prune )
    find . -mindepth 1 "${skip[@]}" -o -type d -printf '%p\t%y %m\n'
    find . -mindepth 1 "${skip[@]}" -o ! -type d -printf '%p\t%y %m %s %T@ %l\n'
    find . -mindepth 1 "${skip[@]}" -o -type f -size -1024k -print0 | xargs -0 -r md5sum |
      awk '{ h = $1; sub(/^[0-9a-f]+  /, ""); print $0 "\tmd5 " h }'
  ) | LC_ALL=C sort
}
# The entries that differ between snapshots $1 and $2, except a directory
# the case created for a new run (it holds run.lock), what is inside it and
# the parents made for it.
changes() {
  local line path d new_runs=()
  while IFS=$'\t' read -r path line; do
    [[ "$line" == d* ]] && [ -e "$W/$path/run.lock" ] && new_runs+=("$path")
  done < <(LC_ALL=C comm -13 <(echo "$1") <(echo "$2"))
  LC_ALL=C comm -3 <(echo "$1") <(echo "$2") | sed 's/^\t//' | while IFS=$'\t' read -r path line; do
    for d in "${new_runs[@]}"; do
      [[ "$path" == "$d" || "$path" == "$d"/* || "$d" == "$path"/* ]] && continue 2
    done
    echo "$path ($line)"
  done
}
# ---- cases ----
# cases.tsv, then cases/*.tsv; ESMT_BAD_CASES=REGEX runs only the ids it
# matches (while working on one class); ESMT_BAD_SKIP=REGEX skips the ids
# it matches and says so with ESMT_BAD_SKIP_WHY (set by a build that cannot
# run them: under AddressSanitizer, the ulimit -v cases).
pass=0 fail=0 skipped=0
# A case's "before" is the previous case's "after" (nothing else writes
# under $W in between): one snapshot a case instead of two.
after=$(snapshot)
while IFS=$'\t' read -r id want frag cmd; do
  [ -z "$id" ] || [ "${id#\#}" != "$id" ] && continue
  [ -z "${ESMT_BAD_CASES:-}" ] || [[ "$id" =~ $ESMT_BAD_CASES ]] || continue
  if [ -n "${ESMT_BAD_SKIP:-}" ] && [[ "$id" =~ $ESMT_BAD_SKIP ]]; then
    echo "skip $id: ${ESMT_BAD_SKIP_WHY:-excluded by ESMT_BAD_SKIP}"
    skipped=$((skipped + 1))
    continue
  fi
  cmd=${cmd//\$CLI/$CLI}
  cmd=${cmd//\$API/$API}
  cmd=${cmd//\$W/$W}
  before=$after
  out=$(cd "$W" && timeout 120 bash -c "$cmd" 2>&1 </dev/null) # defaults like runs/ land in $W
  rc=$?
  after=$(snapshot)
  changed=$(changes "$before" "$after")
  if [ "$rc" -eq "$want" ] && [[ "$out" == *"$frag"* ]] && [ -z "$changed" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $id: exit $rc (want $want), output lacks '$frag', or it changed files:"
    echo "$out" | tail -3 | sed 's/^/    /'
    [ -z "$changed" ] || echo "$changed" | head -5 | sed 's/^/    changed: /'
  fi
done < <(cat "$here/cases.tsv" "$here"/cases/*.tsv 2>/dev/null)
[ -f "$W/full/precious" ] || { echo "FAIL: an existing directory was touched"; fail=$((fail + 1)); }
echo "bad-input corpus: $pass passed, $fail failed, $skipped skipped"
[ "$fail" -eq 0 ]
