#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The core suites under valgrind memcheck: any invalid access, use of
# uninitialised memory or definite leak fails. Usage: run_valgrind.sh BUILD_DIR
# Valgrind runs each program on one core, so the suites run ESMT_VALGRIND_JOBS
# at a time (default: the core count), longest first, so that no long one
# ends up last in a queue.
set -uo pipefail
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
export ESMT_TEST_SRC_DIR=$src ESMT_TEST_BUILD_DIR=$build
unset ESMTRAIN_BACKEND_PATH ESMTRAIN_BACKEND
export OMP_WAIT_POLICY=passive
# No FMA instructions: valgrind emulates each fused multiply-add lane in a
# generic helper (h_generic_calc_MAddF32), which made the training suites
# ~10x slower than with plain AVX multiplies and adds. So cpu.so runs its
# baseline kernels (ESMT_CPU_ISA=generic) and OpenBLAS its Sandy Bridge
# (AVX, no FMA) ones here; the AVX2/AVX-512 kernels are checked for memory
# errors by the AddressSanitizer suite instead.
export ESMT_CPU_ISA=generic OPENBLAS_CORETYPE=Sandybridge
jobs=${ESMT_VALGRIND_JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# The suites load backends from a directory of the build's backends that do
# not link the CUDA libraries: these suites test the core and cpu.so, and
# under valgrind mapping and relocating libcublasLt & co. for the GPU
# backends' probe cost 20-35 s a process, most of this phase's time.
mkdir "$logs/backends"
for so in "$build"/lib/esmtrain/backends/*.so; do
  readelf -d "$so" | grep -qE 'NEEDED.*\[lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-ml)[.]' ||
    ln -s "$so" "$logs/backends/"
done
export ESMT_TEST_BACKEND_DIR=$logs/backends

# one suite: its verdict line goes to $logs/$t.verdict
run_one() {
  local t=$1 start=$SECONDS rc
  valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
    --suppressions="$src/tests/valgrind/openmp.supp" "$build/bin/$t" >"$logs/$t.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    { echo "$t: valgrind FAILED (exit $rc)"; grep -E "==[0-9]+==|FAIL|ERROR" "$logs/$t.log" | head -40; } \
      > "$logs/$t.verdict"
    return 1
  fi
  echo "$t: valgrind clean ($((SECONDS - start)) s)" > "$logs/$t.verdict"
}

# longest first (seconds each took on a 2-core machine: 25, 23, 19, 17, 15, 14, 14, then
# <= 6). test_zero1 and test_zero3 (63 s together) are left out: test_data_parallel covers
# the same sharded paths in less time.
suites=(test_data_parallel test_registry test_cpu_ops_half test_data test_table_stream
        test_recompute test_offload test_model_reference test_trainer test_mixed_fake
        test_trainer_api test_dist_env test_checkpoint test_cpu_ops test_mixed_precision
        test_packing test_loss_scale test_infer test_dataset_checks test_clusters
        test_hf_interop test_planner test_cpu_varlen test_config test_out_dir
        test_sequence_reader test_api test_checkpoint_checks test_tfevents test_input_checks
        test_config_read test_schedule)
# shellcheck source=../job_pool.sh
. "$src/tests/job_pool.sh"
pool_run "$jobs" "$logs" run_one "${suites[@]}"
