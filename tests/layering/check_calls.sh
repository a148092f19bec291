#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The core's folders call only the folders listed for them in layers.sh.
# An include check alone cannot prove it: the public header declares every
# public function, so a lower folder could call a higher one's public API
# (esmt_config_*, esmt_token_string) without a new include. The objects can:
# each object's undefined symbols are matched with the folder whose object
# defines them, and a call (or data reference) that is not an allowed edge
# fails with the file, the symbol and the edge.
# Usage: check_calls.sh SOURCE_ROOT CORE_ARCHIVE (libesmtrain_internal.a)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$1
archive=$2
core=$root/libesmtrain
# shellcheck source=layers.sh
source "$here/layers.sh"
check_table_acyclic
[ -r "$archive" ] || { echo "FAIL: cannot read the core's archive $archive"; exit 1; }

# Object "name.c.o" -> folder of libesmtrain/*/name.c; code generated from
# a folder's name.proto (name.pb-c.c.o) belongs to that folder.
declare -A folder_of=()
for f in "$core"/*/*.c "$core"/*/*.proto; do
  b=$(basename "$f")
  [[ $b == *.proto ]] && b=${b%.proto}.pb-c.c
  [ -z "${folder_of[$b.o]:-}" ] || { echo "FAIL: two core files named $b"; exit 1; }
  folder_of[$b.o]=$(basename "$(dirname "$f")")
done

# nm -P: "archive[member.o]: symbol TYPE ..."
symbols=$(nm -A -P -g "$archive")
declare -A defined_in=()
while read -r obj sym; do
  defined_in[$sym]=$obj
done < <(awk '$3 != "U" { m = $1; sub(/.*\[/, "", m); sub(/\]:$/, "", m); print m, $2 }' <<<"$symbols")

bad=0
while read -r obj sym; do
  def=${defined_in[$sym]:-}
  [ -n "$def" ] || continue # the C library, jansson, zlib, ...
  d=${folder_of[$obj]:-}
  t=${folder_of[$def]:-}
  [ -n "$d" ] || { echo "FAIL: $obj in $archive has no source under libesmtrain/"; bad=$((bad + 1)); continue; }
  [ -n "$t" ] || { echo "FAIL: $def in $archive has no source under libesmtrain/"; bad=$((bad + 1)); continue; }
  edge_allowed "$d" "$t" && continue
  echo "FAIL: libesmtrain/$d/${obj%.o} uses $sym of libesmtrain/$t/${def%.o} ($d -> $t is not an allowed edge)"
  bad=$((bad + 1))
done < <(awk '$3 == "U" { m = $1; sub(/.*\[/, "", m); sub(/\]:$/, "", m); print m, $2 }' <<<"$symbols" | sort -u)
[ "$bad" -eq 0 ] && echo "layering: every call across libesmtrain's folders is an allowed edge"
[ "$bad" -eq 0 ]
