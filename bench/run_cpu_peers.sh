#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The CPU benchmarks against their peers, one after another, each appending
# its results lines (bench/record.py), then docs/performance.md's table
# regenerated from the results file. The PyTorch peers need the reference
# environment (scripts/setup_reference_env.sh; the scripts install it).
# Usage: run_cpu_peers.sh [THREADS]   (default 2)
#   ESMT_BENCH_RESULTS  the results file (default bench/results/results.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}
bash bench/bench_data.sh
bash bench/bench_vs_torch.sh esm2_t6_8M 4 512 "$threads" 5
bash bench/bench_adamw_vs_torch.sh "$threads"
bash bench/bench_embed_vs_torch.sh 500 "$threads" 4096
/usr/bin/python3 bench/make_performance_table.py
