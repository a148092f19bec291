# SPDX-License-Identifier: MIT
# Inputs of cases/metrics_limits.tsv: a run whose metrics.jsonl holds one
# 3 MB line (no newline), which plot and watch must refuse, not hold.
mkdir -p "$W/longm" && head -c 3000000 /dev/zero | tr '\0' x > "$W/longm/metrics.jsonl"
