#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `plan --world N` for the sharded stages: esm2_t48_15B on 8 ranks of
# 80 GiB and esm2_t36_3B on 3 ranks of 20 GiB fit, with no stage named the
# planner takes the lowest that fits (ZeRO-3 for both) and says so; a stage
# named with --zero or --set dist.zero= is planned as named (15B at stage
# 0 fits only with the optimizer offloaded, at stage 2 not at all: exit 3).
# Usage: test_plan_world.sh ESMTRAIN_EXAMPLE
set -u
CLI=$1
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

out=$("$CLI" plan --world 8 --device-mem 80GiB --model esm2_t48_15B)
rc=$?
echo "$out"
check "15B on 8 x 80 GiB fits (exit 0)" '[ $rc -eq 0 ]'
check "15B on 8 x 80 GiB: the advice names ZeRO-3" 'echo "$out" | grep -q "per rank of 8, ZeRO-3"'
out=$("$CLI" plan --world 3 --device-mem 20GiB --model esm2_t36_3B)
rc=$?
echo "$out"
check "3B on 3 x 20 GiB fits (exit 0)" '[ $rc -eq 0 ]'
check "3B on 3 x 20 GiB: the advice names ZeRO-3" 'echo "$out" | grep -q "per rank of 3, ZeRO-3"'
out=$("$CLI" plan --world 8 --device-mem 80GiB --model esm2_t48_15B --zero 0)
check "15B at --zero 0 as named: stage 0, the optimizer offloaded" \
  'echo "$out" | grep -q "optimizer offload on.*per rank of 8, ZeRO-0"'
"$CLI" plan --world 8 --device-mem 80GiB --model esm2_t48_15B --set dist.zero=2 > /dev/null
rc=$?
check "15B at --set dist.zero=2 as named: does not fit (exit 3)" '[ $rc -eq 3 ]'
exit $fail
