#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CUDA compiler launcher of the real GPU build (backends/cuda_common): runs
# the nvcc command it is given (which carries -Xptxas=-v) and keeps ptxas's
# per-kernel resource report in DIR/<object name>.ptxas instead of the build
# log, for tests/gpu/check_kernel_budget.py. Everything else nvcc prints is
# passed through; a failed compile prints all of it.
# Usage (CMake CUDA_COMPILER_LAUNCHER): ptxas_log.sh DIR nvcc ARGS...
set -uo pipefail
dir=$1; shift
obj=unknown
prev=
for a in "$@"; do [ "$prev" = "-o" ] && obj=$a; prev=$a; done
mkdir -p "$dir"
err=$(mktemp)
"$@" 2> "$err"
rc=$?
if [ "$rc" -eq 0 ]; then
  grep -E '^ptxas info|^    [0-9]+ bytes stack frame' "$err" > "$dir/$(basename "$obj").ptxas"
  grep -vE '^ptxas info|^    [0-9]+ bytes stack frame' "$err" >&2
else
  cat "$err" >&2
fi
rm -f "$err"
exit "$rc"
