#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CLI's rough edges (#37): "did you mean" for commands and options, one
# meaning per option name (embed --layers is --repr-layers, with a
# warning), quiet on a closed pipe, no --out left by a train that fails
# before its first step. Needs no model: each case fails or ends early.
set -u
CLI=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
expect() { # NAME STATUS FRAGMENT -- command...
  local name=$1 want=$2 frag=$3 rc=0
  shift 4
  "$@" >"$work/out" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$frag" "$work/out"; then
    echo "FAIL $name: exit $rc (want $want), output lacks '$frag':"
    sed 's/^/    /' "$work/out" | head -5
    fail=1
  fi
}
expect command 2 "unknown command 'trian'; did you mean 'train'?" -- "$CLI" trian
expect command-far 2 "unknown command 'zzzzzz'" -- "$CLI" zzzzzz
if "$CLI" zzzzzz 2>&1 | grep -q "did you mean"; then
  echo "FAIL command-far: a suggestion for a word near no command"
  fail=1
fi
expect train-option 2 "unknown option '--warmpu'; did you mean '--warmup'?" -- "$CLI" train --warmpu 3
expect embed-option 2 "did you mean '--include'?" -- "$CLI" embed M I -o O --inclde mean
expect score-option 2 "did you mean '--mutation-col'?" -- "$CLI" score M I -o O --mutation-cols=x
expect config-option 2 "did you mean '--keys'?" -- "$CLI" config --key
expect embed-layers-alias 1 "--layers is deprecated, use --repr-layers" -- \
  "$CLI" embed "$work/no-model" "$work/no.fa" -o "$work/e" --layers 1
# a reader that goes away: no message; 0 when the output fit in the pipe,
# else ended by SIGPIPE as coreutils are (bad_inputs' stdout-broken-pipe
# closes the pipe first, every time)
("$CLI" config --keys 2>"$work/err" | head -1 >/dev/null; echo "${PIPESTATUS[0]}" >"$work/rc")
if ! grep -qx '0\|141' "$work/rc" || [ -s "$work/err" ]; then
  echo "FAIL epipe: config --keys | head -1 exited $(cat "$work/rc") (want 0 or 141) with:"
  sed 's/^/    /' "$work/err"
  fail=1
fi
# a train that fails before its first step leaves no new --out
mkdir "$work/data"
echo junk >"$work/data/manifest.json"
expect train-early-failure 1 "manifest.json" -- "$CLI" train --data "$work/data" \
  --out "$work/new-run" --steps 3 --warmup 1 --layers 1 --width 16 --heads 2 --no-mfu
if [ -e "$work/new-run" ]; then
  echo "FAIL train-early-failure: left $(ls -A "$work/new-run" | tr '\n' ' ') in a new --out"
  fail=1
fi
[ "$fail" -eq 0 ] && echo "cli edges ok"
exit "$fail"
