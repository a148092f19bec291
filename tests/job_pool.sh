# SPDX-License-Identifier: MIT
# Sourced by the test scripts that run independent single-threaded jobs
# (tests/valgrind/run_valgrind.sh, tests/fuzz/run_fuzz.sh).
# pool_run JOBS VERDICT_DIR FUNCTION ITEM...: runs `FUNCTION ITEM` for each
# item, JOBS at a time, in the given order (put the longest first); each
# call writes its one-line verdict (or a failure report) to
# VERDICT_DIR/ITEM.verdict and returns non-zero on failure. Then prints the
# verdicts in item order; returns 1 if any job failed or left no verdict.
pool_run() {
  local jobs=$1 dir=$2 fn=$3 status=0 item
  shift 3
  for item in "$@"; do
    rm -f "$dir/$item.verdict"
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || status=1; done
    "$fn" "$item" &
  done
  while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || status=1; done
  for item in "$@"; do
    if [ -f "$dir/$item.verdict" ]; then cat "$dir/$item.verdict"; else echo "$item: no verdict"; status=1; fi
  done
  return $status
}
