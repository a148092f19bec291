#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Kill anywhere, for embed: SIGKILL an embed at KILLS random moments (in a
# chunk's computation, its commit, the record's rename, the safetensors
# copy at the end); the same command run again must continue, and every
# output it finishes must equal an uninterrupted embed of the same input
# byte for byte (.npy and safetensors formats in turn). Once some proteins
# are committed, a re-run with the model trained one step further, or with
# one residue of the input changed, must be refused naming what changed,
# leaving the output as it was.
# Usage: embed_kill_anywhere.sh CLI [KILLS] [SEED] (KILLS: kills that
# landed before the embed ended; a longer run: KILLS=500)
set -euo pipefail
cli=$1 kills=${2:-50} seed=${3:-1}
work=$(mktemp -d /tmp/esmt-embed-kill-XXXXXX)
trap 'rm -rf "$work"' EXIT
# a tiny model (3 steps) and the same run one step further
awk 'BEGIN { srand(5); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 100; r++) { printf(">t%d\n", r); n = 20 + int(rand() * 60);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' > "$work/t.fa"
"$cli" ingest "$work/t.fa" -o "$work/data" --valid-fraction 0 --quiet >/dev/null
tiny=(--data "$work/data" --no-mfu --layers 2 --width 16 --heads 2 --warmup 1 --eval-every 0 --threads 1)
"$cli" train "${tiny[@]}" --steps 3 --out "$work/model-a" >/dev/null
cp -a "$work/model-a" "$work/model-b"
"$cli" train "${tiny[@]}" --steps 4 --out "$work/model-b" --resume latest >/dev/null 2>&1
cp -a "$work/model-a" "$work/model"
# the input: ~5 chunks of 131072 residues, so that kills land between commits
awk 'BEGIN { srand(7); aa = "ACDEFGHIKLMNPQRSTVWY";
  for (r = 0; r < 4500; r++) { printf(">p%d\n", r); n = 30 + int(rand() * 230);
    for (i = 0; i < n; i++) printf("%s", substr(aa, 1 + int(rand() * 20), 1)); printf("\n") } }' > "$work/p.fa"
formats=(npy safetensors)
args() { # args FORMAT OUT
  echo "$work/model" "$work/p.fa" -o "$2" --format "$1" --include mean,cls,per_tok --repr-layers 0,-1 \
    --threads 1 --quiet
}
# the uninterrupted outputs, and how long one takes
t0=$(date +%s.%N)
for f in "${formats[@]}"; do
  # shellcheck disable=SC2046
  "$cli" embed $(args "$f" "$work/ref-$f") >/dev/null
done
span=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", (b - a) / 2 * 1000 }')
# same FORMAT OUT: the finished output equals the reference file for file
same() {
  local f name
  for f in "$work/ref-$1"/*; do
    name=$(basename "$f")
    case $name in embed.json|run.lock) continue ;; esac
    cmp "$f" "$2/$name" || { echo "$2/$name differs from the uninterrupted embed"; exit 1; }
  done
  [ "$(ls "$2" | grep -cv '^embed.json$\|^run.lock$')" -eq "$(ls "$work/ref-$1" | grep -cv '^embed.json$\|^run.lock$')" ] ||
    { echo "$2 holds other files than the uninterrupted embed:"; ls "$2"; exit 1; }
}
committed() { # proteins embed.json of OUT commits (0 when none yet)
  [ -f "$1/embed.json" ] || { echo 0; return; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(0 if r["complete"] else r["committed"]["proteins"])' "$1/embed.json"
}
snapshot() { find "$1" -type f ! -name run.lock -printf '%p %s %T@\n' | sort; md5sum "$1"/* 2>/dev/null | sort; }
# refused DESCRIPTION FRAGMENT OUT FORMAT: the re-run is refused with FRAGMENT, OUT unchanged
refused() {
  local before after log rc=0
  before=$(snapshot "$3")
  # shellcheck disable=SC2046
  log=$("$cli" embed $(args "$4" "$3") 2>&1) || rc=$?
  after=$(snapshot "$3")
  [ "$rc" -eq 1 ] && grep -qF "$2" <<<"$log" && [ "$before" = "$after" ] ||
    { echo "a re-run after $1 was not refused as it should (exit $rc):"; echo "$log"; exit 1; }
}
RANDOM=$seed
round=0 killed=0 finished=0 model_checked=0 input_checked=0
out=$work/out-0 fmt=npy
tries=0
while [ "$killed" -lt "$kills" ] && [ "$tries" -lt $((3 * kills)) ]; do
  tries=$((tries + 1)) k=$tries
  # shellcheck disable=SC2046
  "$cli" embed $(args "$fmt" "$out") >"$work/last.log" 2>&1 &
  pid=$!
  sleep "$(awk -v r=$RANDOM -v s="$span" 'BEGIN { printf "%.3f", (r % 1000) / 1000.0 * s / 1000 * 0.6 }')"
  if kill -KILL "$pid" 2>/dev/null; then
    killed=$((killed + 1))
    set +e; wait "$pid" 2>/dev/null; rc=$?; set -e
    [ "$rc" -eq 137 ] || [ "$rc" -eq 0 ] || { echo "kill $k: exit $rc:"; cat "$work/last.log"; exit 1; }
  else
    set +e; wait "$pid"; rc=$?; set -e
    [ "$rc" -eq 0 ] || { echo "kill $k: embed failed on its own (exit $rc):"; cat "$work/last.log"; exit 1; }
  fi
  n=$(committed "$out")
  if [ "$n" -gt 0 ] && [ "$model_checked" -eq 0 ]; then
    rm -rf "$work/model" && cp -a "$work/model-b" "$work/model"
    refused "the model was trained one step further" "the model's weights changed" "$out" "$fmt"
    rm -rf "$work/model" && cp -a "$work/model-a" "$work/model"
    model_checked=1
  elif [ "$n" -gt 0 ] && [ "$input_checked" -eq 0 ]; then
    cp "$work/p.fa" "$work/p.orig"
    sed -i '2s/^./W/; 2s/^W/Y/' "$work/p.fa" # the first protein's first residue, same size
    cmp -s "$work/p.fa" "$work/p.orig" && sed -i '2s/^./C/' "$work/p.fa"
    refused "one residue of the input changed" "the input's content changed" "$out" "$fmt"
    cp "$work/p.orig" "$work/p.fa"
    input_checked=1
  fi
  if [ -f "$out/embed.json" ] && grep -q '"complete": true' "$out/embed.json"; then
    # a re-run says it is complete (and removes safetensors staging arrays
    # a kill between the complete record and their removal left)
    rc=0
    # shellcheck disable=SC2046
    "$cli" embed $(args "$fmt" "$out") >"$work/last.log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] && grep -q "complete already" "$work/last.log" ||
      { echo "a re-run of finished $out:"; cat "$work/last.log"; exit 1; }
    same "$fmt" "$out"
    finished=$((finished + 1))
    round=$((round + 1))
    out=$work/out-$round fmt=${formats[$((round % 2))]}
  fi
done
# finish the last one uninterrupted
# shellcheck disable=SC2046
"$cli" embed $(args "$fmt" "$out") >"$work/last.log" 2>&1 || { cat "$work/last.log"; exit 1; }
same "$fmt" "$out"
finished=$((finished + 1))
[ "$killed" -eq "$kills" ] || { echo "only $killed of $kills kills landed in $tries runs"; exit 1; }
[ "$model_checked" -eq 1 ] && [ "$input_checked" -eq 1 ] ||
  { echo "no kill left committed proteins to check a changed model and input against"; exit 1; }
echo "embed kill anywhere: $killed SIGKILLs, $finished outputs finished (npy and safetensors), each identical to an uninterrupted embed; a changed model and a changed input refused"
