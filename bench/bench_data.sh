#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Data pipeline benchmarks (issue 4's bars), all in one run:
#  - ingest of DB.fasta.gz against `zcat DB.fasta.gz > /dev/null` (best of 5 each)
#  - the loader alone on esm2_t6_8M-shaped batches (4 x 512), one thread
#  - loader resident memory with the dataset 1x and 10x (the file concatenated 10 times)
set -euo pipefail
cd "$(dirname "$0")/.."
db=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
cli=${ESMT_BUILD_DIR:-build}/bin/esmtrain-example   # ESMT_BUILD_DIR=build-x for another build
[ -x "$cli" ] || { echo "bench_data: $cli not built (cmake --build ${ESMT_BUILD_DIR:-build})" >&2; exit 1; }
[ -r "$db" ] || { echo "bench_data: $db missing (scripts/setup_deps.sh installs mmseqs2-examples)" >&2; exit 1; }
work=$(mktemp -d /tmp/esmt-bench-data-XXXXXX)
trap 'rm -rf "$work"' EXIT
best() { sort -n | head -1; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); echo "$t1 - $t0" | awk '{print $1 - $3}'; }
zc=$(for i in 1 2 3 4 5; do secs sh -c "zcat $db > /dev/null"; done | best)
ing=$(for i in 1 2 3 4 5; do rm -rf "$work/db"; secs $cli ingest "$db" -o "$work/db" --quiet; done | best)
mb=$(du -m "$db" | cut -f1)
cmd="bash bench/bench_data.sh"
/usr/bin/python3 bench/record.py ingest --config "DB.fasta.gz (mmseqs2-examples), best of 5" --command "$cmd" \
  --figure "seconds=$ing:s" --peer "zcat DB.fasta.gz > /dev/null" --peer-figure "seconds=$zc:s" \
  --ratio "seconds=$(awk -v z="$zc" -v i="$ing" 'BEGIN { print z / i }'):peer / esmtrain (share of decompression speed)"
awk -v z="$zc" -v i="$ing" 'BEGIN { printf "ingest %.3f s vs zcat %.3f s: ingest runs at %.0f%% of decompression speed\n", i, z, 100 * z / i }'
one=$($cli bench-loader --data "$work/db" | tee /dev/stderr | grep ESMT_LOADER_RESULT)
for i in $(seq 10); do cat "$db"; done > "$work/db10.fasta.gz"
$cli ingest "$work/db10.fasta.gz" -o "$work/db10" --quiet >/dev/null
ten=$($cli bench-loader --data "$work/db10" | tee /dev/stderr | grep ESMT_LOADER_RESULT)
field() { sed -n "s/.*$2=\([^ ]*\).*/\1/p" <<<"$1"; }
echo "loader RSS: $(field "$one" rss_mib) MiB with $(field "$one" records) records, $(field "$ten" rss_mib) MiB with $(field "$ten" records) records" \
  "(ratio $(awk -v a="$(field "$one" rss_mib)" -v b="$(field "$ten" rss_mib)" 'BEGIN { printf "%.2f", b / a }') for 10x the data)"
/usr/bin/python3 bench/record.py loader --config "esm2_t6_8M batches 4 x 512, one thread" --command "$cmd" \
  --figure "batches_per_s=$(field "$one" batches_per_s):batches/s" \
  --figure "rss_1x=$(field "$one" rss_mib):MiB" --figure "rss_10x=$(field "$ten" rss_mib):MiB"
