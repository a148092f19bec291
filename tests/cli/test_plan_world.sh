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
# ZeRO-1/2/3 with each rank's shard offloaded: the table shows those rows
# with a rank's host bytes and the host's; the 3 x 10 GiB box with 12 GiB
# of host memory gets a plan saying why 3B cannot train there (16 bytes a
# parameter of fp32 state, 42.3 GiB, against 30 + 12 GiB) and what can.
out=$("$CLI" plan --world 2 --zero 1 --device-mem 6GiB --model esm2_t33_650M --precision bf16)
rc=$?
echo "$out"
check "650M at --zero 1 on 2 x 6 GiB fits with each rank's shard offloaded" \
  '[ $rc -eq 0 ] && echo "$out" | grep -q "optimizer offload on.*per rank of 2, ZeRO-1.*host memory .* GiB a rank, .* GiB for the 2 ranks of a host"'
check "the table has the offloaded rows" \
  'echo "$out" | grep -q "^  ZeRO-1 + offload .*GiB.*GiB.*GiB.*fits" && echo "$out" | grep -q "^  ZeRO-2 + offload" && echo "$out" | grep -q "^  ZeRO-3 + offload .*GiB.*GiB.*GiB.*fits"'
# ZeRO-3 with each rank's shard offloaded: neither weights, gradients nor
# state whole on the device; 15B on 8 x 80 GiB fits it too
out=$("$CLI" plan --world 8 --device-mem 80GiB --model esm2_t48_15B --zero 3 --offload on)
rc=$?
echo "$out" | tail -1
check "15B at --zero 3 --offload on fits per rank with its host shard" \
  '[ $rc -eq 0 ] && echo "$out" | grep -q "optimizer offload on.*per rank of 8, ZeRO-3" && echo "$out" | grep -q "^  master weights *0 B" && echo "$out" | grep -q "^  AdamW moments *0 B"'
out=$("$CLI" plan --world 3 --device-mem 10GiB --host-mem 12GiB --model esm2_t36_3B)
rc=$?
echo "$out"
check "3B on 3 x 10 GiB + 12 GiB: a plan that does not fit (exit 3)" '[ $rc -eq 3 ]'
check "3B on the box: the arithmetic" \
  'echo "$out" | grep -q "keep 16 bytes each of fp32 master weights, gradients and moments, 42.3 GiB.*against 3 x 10.0 GiB of device memory and 12.0 GiB of host memory"'
check "3B on the box: what fits instead, with figures" \
  'echo "$out" | grep -q "the largest ESM-2 that fits as asked is esm2_t33_650M (651M parameters): micro-batch [0-9]* x 512"'
out=$("$CLI" plan --world 3 --device-mem 10GiB --host-mem 12GiB --ranks-per-host 1 --model esm2_t33_650M --zero 1 --offload on --precision bf16)
echo "$out" | tail -1
check "--ranks-per-host 1: the host figure is one rank's" \
  'echo "$out" | grep -q "for the 1 ranks of a host"'
exit $fail
