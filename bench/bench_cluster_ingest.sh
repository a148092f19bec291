#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ingest with and without a cluster file of N members (issue #21): time and
# peak resident memory of each, and their ratio. The proteins are synthetic
# (30-80 residues cut from a random pool), the clusters ~5 members each, with
# the ids of MMseqs2's TSV. Needs a build (CLI path) and ~0.6 GB in /tmp.
# Usage: bench_cluster_ingest.sh [CLI] [N]   (defaults build-nocuda's CLI, 5000000)
set -euo pipefail
cli=${1:-build-nocuda/bin/esmtrain-example}
n=${2:-5000000}
work=$(mktemp -d /tmp/esmt-bench-clusters-XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "== $n synthetic proteins and their cluster TSV"
awk -v n="$n" 'BEGIN { srand(3); aa = "ACDEFGHIKLMNPQRSTVWY"; pool = "";
  for (i = 0; i < 65536; i++) pool = pool substr(aa, 1 + int(rand() * 20), 1);
  c = 0; left = 0;
  for (r = 0; r < n; r++) {
    len = 30 + int(rand() * 51); s = 1 + int(rand() * (65536 - len));
    printf(">UniRef90_S%09d\n%s\n", r, substr(pool, s, len)) > "'"$work"'/prot.fa";
    if (left == 0) { c = r; left = 1 + int(rand() * 9) }
    printf("UniRef90_S%09d\tUniRef90_S%09d\n", c, r) > "'"$work"'/clusters.tsv"; left--
  } }'
ls -la "$work/prot.fa" "$work/clusters.tsv" | awk '{ printf("  %s %.0f MB\n", $NF, $5 / 1e6) }'
measure() {  # NAME ARGS...: prints "seconds peak_MiB"
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/$name.time" "$cli" ingest "$work/prot.fa" -o "$work/$name" \
    --quiet "$@" > "$work/$name.log"
  rm -rf "${work:?}/$name"
  awk '{ printf("%s %.0f", $1, $2 / 1024) }' "$work/$name.time"
}
read -r t0 m0 <<< "$(measure plain)"
echo "without clusters: ${t0} s, peak RSS ${m0} MiB"
read -r t1 m1 <<< "$(measure clustered --clusters "$work/clusters.tsv")"
echo "with clusters:    ${t1} s, peak RSS ${m1} MiB"
grep "clusters:" "$work/clustered.log" | sed 's/^ */  /'
awk -v a="$t0" -v b="$t1" -v m="$m1" 'BEGIN {
  printf("speed with clusters: %.2f of without (issue #21 asks >= 0.5); peak RSS %s MiB (asks < 300)\n", a / b, m) }'
/usr/bin/python3 "$(dirname "$0")/record.py" cluster_ingest --config "$n synthetic proteins, clusters of ~5" \
  --command "bash bench/bench_cluster_ingest.sh $cli $n" \
  --figure "seconds=$t1:s" --figure "peak_rss=$m1:MiB" \
  --peer "the same ingest without clusters" --peer-figure "seconds=$t0:s" --peer-figure "peak_rss=$m0:MiB" \
  --ratio "seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print a / b }'):speed with clusters / without"
