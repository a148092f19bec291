#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the libFuzzer targets with clang + ASan/UBSan and run each for
# SECONDS (default 30), starting from the committed seeds. A crash, leak
# or sanitizer report fails the run; the reproducer is left in
# build-fuzz/crashes/. Usage: run_fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_fasta fuzz_safetensors fuzz_shard fuzz_config_yaml fuzz_hf_config)
# cpu.so's generic kernels only (ESMT_CPU_ISAS): the targets never run the
# AVX2/AVX-512 variants, each ~80 s of this build under the sanitizers.
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DESMT_FUZZ=ON \
  -DESMT_SANITIZE=address,undefined -DESMT_ENABLE_CUDA=OFF -DESMT_CPU_ISAS=generic \
  -DESMT_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}" >/dev/null
mkdir -p build-fuzz/crashes
export ESMTRAIN_BACKEND_PATH=$PWD/build-fuzz/lib/esmtrain/backends
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
# One target: its verdict line goes to build-fuzz/$t.verdict. The targets
# are single-threaded and independent: ESMT_FUZZ_JOBS at a time (default:
# the core count).
run_one() {
  local t=$1 corpus=build-fuzz/corpus/$1 log=build-fuzz/$1.log
  mkdir -p "$corpus"
  if ./build-fuzz/bin/$t -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=20 \
       -artifact_prefix=build-fuzz/crashes/$t- "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "$t: $(grep -E '^Done [0-9]+ runs' "$log" | tail -1) ($(ls "$corpus" | wc -l) corpus files)" \
      > "build-fuzz/$t.verdict"
  else
    { echo "$t: FAILED"; tail -30 "$log"; } > "build-fuzz/$t.verdict"
    return 1
  fi
}
# shellcheck source=../job_pool.sh
. tests/job_pool.sh
pool_run "${ESMT_FUZZ_JOBS:-$(nproc)}" build-fuzz run_one "${targets[@]}"
