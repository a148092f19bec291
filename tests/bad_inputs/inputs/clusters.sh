# SPDX-License-Identifier: MIT
# Inputs of cases/clusters.tsv (#21 clusters): cluster files broken in one
# way each, a dataset ingested with clusters ($W/dcl) and copies of it with a
# damaged or foreign train.clusters. Sourced by run_cases.sh with $CLI and $W
# set; $W/prot.fa (records r0..r199) and $W/data are never modified.
C="$W/cl"
mkdir -p "$C"
awk 'BEGIN { for (r = 0; r < 200; r++) printf("r%d\tr%d\n", r - r % 4, r) }' > "$C/good.tsv"
printf 'r0 r1\n' > "$C/space.tsv"
: > "$C/empty.tsv"
gzip -c "$C/good.tsv" > "$C/trunc.tsv.gz"
truncate -s $(( $(stat -c %s "$C/trunc.tsv.gz") / 2 )) "$C/trunc.tsv.gz"
"$CLI" ingest "$W/prot.fa" -o "$W/dcl" --clusters "$C/good.tsv" --valid-fraction 0.2 --quiet \
  >/dev/null || return 1
"$CLI" ingest "$W/prot.fa" -o "$C/other" --clusters "$C/good.tsv" --valid-fraction 0.2 --quiet \
  >/dev/null || return 1
cp -r "$W/dcl" "$C/flip" && cp -r "$W/dcl" "$C/foreign"
printf '\x03' | dd of="$C/flip/train.clusters" bs=1 seek=$(( $(stat -c %s "$C/flip/train.clusters") - 3 )) conv=notrunc status=none
cp "$C/other/train.clusters" "$C/foreign/train.clusters"
