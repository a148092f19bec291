#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The GPU backends under the host CUDA emulator, in one command: configure
# and build build-emu (-DESMT_CUDA_EMULATE=ON: no GPU, no nvcc), then run
# every test labelled gpu-emu (ctest -L gpu-emu) and end with one line
# "N passed, N failed". Usage: run_emu_suite.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../../.."
build=${1:-build-emu}
jobs=$(nproc)
cmake -S . -B "$build" -DESMT_CUDA_EMULATE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DESMT_WERROR=ON -DESMT_CPU_ISAS="$(bash scripts/host_cpu_isas.sh)" >/dev/null || { echo "0 passed, 1 failed (configure)"; exit 1; }
cmake --build "$build" -j"$jobs" --target gpu-emu-suite >"$build/emu-build.log" 2>&1 ||
  { tail -40 "$build/emu-build.log"; echo "0 passed, 1 failed (build)"; exit 1; }
log=$(mktemp)
(cd "$build" && ctest -L gpu-emu --output-on-failure -j"$jobs") | tee "$log"
rc=${PIPESTATUS[0]}
total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log")
failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$log")
rm -f "$log"
total=${total:-0}
failed=${failed:-1}
echo "$((total - failed)) passed, $failed failed"
exit "$rc"
