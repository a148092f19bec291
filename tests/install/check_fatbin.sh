#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every GPU backend must embed SASS for sm_75, 80, 86, 89, 90 and PTX for
# compute_90 (for newer GPUs). Usage: check_fatbin.sh BACKEND_DIR
set -euo pipefail
dir=$1
status=0
for so in "$dir"/turing_fp16.so "$dir"/ampere_bf16.so "$dir"/nccl_dp.so; do
  [ -f "$so" ] || { echo "missing $so"; status=1; continue; }
  text=$(strings -a "$so")
  archs=$(grep -oE '\bsm_[0-9]+' <<<"$text" | sort -u | tr '\n' ' ')
  for a in sm_75 sm_80 sm_86 sm_89 sm_90; do
    if ! grep -qw "$a" <<<"$archs"; then echo "$so: no SASS for $a (found: $archs)"; status=1; fi
  done
  if ! grep -q '\.target sm_90' <<<"$text"; then echo "$so: no PTX for compute_90"; status=1; fi
  echo "$(basename "$so"): $archs+ PTX"
done
exit $status
