#!/usr/bin/env bash
# The core suites under valgrind memcheck: any invalid access, use of
# uninitialised memory or definite leak fails. Usage: run_valgrind.sh BUILD_DIR
set -uo pipefail
build=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
export ESMT_TEST_BACKEND_DIR=$build/lib/esmtrain/backends ESMT_TEST_SRC_DIR=$src ESMT_TEST_BUILD_DIR=$build
unset ESMTRAIN_BACKEND_PATH ESMTRAIN_BACKEND
export OMP_WAIT_POLICY=passive
status=0
for t in test_api test_registry test_schedule test_config test_planner test_checkpoint test_data test_hf_interop test_mixed_fake test_offload test_recompute test_cpu_varlen test_packing; do
  log=$(mktemp)
  start=$(date +%s)
  valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
    --suppressions="$src/tests/valgrind/openmp.supp" "$build/bin/$t" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "$t: valgrind FAILED (exit $rc)"; grep -E "==[0-9]+==|FAIL|ERROR" "$log" | head -40; status=1
  else
    echo "$t: valgrind clean ($(( $(date +%s) - start )) s)"
  fi
  rm -f "$log"
done
exit $status
