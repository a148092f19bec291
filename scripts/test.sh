#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what is needed, build, and run every test: the normal build (with
# the GPU backends when a CUDA toolkit is present; GPU tests skip without a
# GPU), the whole suite again under AddressSanitizer + UBSan, and the
# thread suites under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, so that the log shows where CI's time goes.
t_phase=$SECONDS
took() { echo "== $1 took $((SECONDS - t_phase)) s (total $SECONDS s)"; t_phase=$SECONDS; }
bash scripts/setup_deps.sh
# torch + transformers + fair-esm for the interop proof (tests/interop) and
# the fixture tools; without them that test reports itself skipped.
bash scripts/setup_reference_env.sh || echo "warning: reference Python environment unavailable; interop test will skip"
jobs=$(nproc)
took "setup (Debian packages, reference Python environment)"

echo "== build (Release, warnings as errors)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DESMT_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
took "Release build"
echo "== tests"
(cd build && ctest --output-on-failure -j"$jobs")
took "Release tests"

echo "== GPU backends under the host CUDA emulator (ctest -L gpu-emu)"
bash tests/gpu/emu/run_emu_suite.sh build-emu
took "emulated GPU build and suite"

echo "== build with AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DESMT_WERROR=ON \
      -DESMT_SANITIZE=address,undefined -DESMT_ENABLE_CUDA=OFF \
      -DESMT_CPU_ISAS="$(bash scripts/host_cpu_isas.sh)" >/dev/null
cmake --build build-asan -j"$jobs"
took "sanitizer build"
echo "== tests under sanitizers"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
(cd build-asan && ctest --output-on-failure -j"$jobs")
took "sanitizer tests"
echo "== the embedder suite against the installed ASan build"
bash tests/embedder/run_embedder_suite.sh . build-asan address,undefined
took "embedder suite under AddressSanitizer"

echo "== the thread rules under ThreadSanitizer (ctest -L threads)"
# only what those suites need: the library, cpu.so with its generic kernels,
# the CLI (a run.lock holder), the two suites, and what an install holds for
# the embedder suite (measured: about 3 minutes of build on 2 busy cores, 1 s
# of tests)
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DESMT_WERROR=ON \
      -DESMT_SANITIZE=thread -DESMT_ENABLE_CUDA=OFF -DESMT_CPU_ISAS=generic >/dev/null
tsan_targets=(test_threads test_run_dir test_host_sums esmt_backend_cpu esmtrain-example)
# the MPI plugin is installed (and so built) where MPI was found (the list
# is read whole: grep -q would end the pipe early, which pipefail fails)
tsan_help=$(cmake --build build-tsan --target help)
[[ $tsan_help == *esmt_comm_mpi* ]] && tsan_targets+=(esmt_comm_mpi)
cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}"
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ESMT_TEST_THREADS=1 \
   ctest --output-on-failure -L threads)
took "ThreadSanitizer build and thread tests"
echo "== the embedder suite against the installed ThreadSanitizer build"
bash tests/embedder/run_embedder_suite.sh . build-tsan thread
took "embedder suite under ThreadSanitizer"

echo "== core suites under valgrind memcheck"
bash tests/valgrind/run_valgrind.sh "$PWD/build"
took "valgrind"

echo "== fuzzing (libFuzzer + ASan/UBSan, ${ESMT_FUZZ_SECONDS:-20} s per target)"
bash tests/fuzz/run_fuzz.sh "${ESMT_FUZZ_SECONDS:-20}"
took "fuzzing (build and runs)"
echo "== all tests passed"
