#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The core's folders may include only the folders listed for them in
# layers.sh, and every core file is named in its folder's README.md.
# An include across folders that is not listed fails with the file, the
# line and the edge, so a new dependency is a decision, not an accident.
# Calls are proved from the objects by check_calls.sh.
# Usage: check_layers.sh [SOURCE_ROOT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:-$(cd "$here/../.." && pwd)}
core=$root/libesmtrain
# shellcheck source=layers.sh
source "$here/layers.sh"
check_table_acyclic
declare -A home=()
for dir in "$core"/*/; do
  d=$(basename "$dir")
  [ -n "${allowed[$d]+x}" ] || { echo "FAIL: libesmtrain/$d has no entry in $here/layers.sh"; exit 1; }
  for f in "$dir"*.h; do [ -e "$f" ] && home[$(basename "$f")]=$d; done
done
bad=0
for dir in "$core"/*/; do
  d=$(basename "$dir")
  while IFS=: read -r file line inc; do
    h=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$inc")
    t=${home[$h]:-}
    [ -z "$t" ] || edge_allowed "$d" "$t" && continue
    echo "FAIL: ${file#"$root"/}:$line includes $h ($d -> $t is not an allowed edge)"
    bad=$((bad + 1))
  done < <(grep -Hn '^#include "' "$dir"*.c "$dir"*.h 2>/dev/null || true)
done

# A file is named in its README by its name or by a `stem*.c` pattern; a
# header is also named through the .c file of the same stem.
named_in() { # README FILE
  local readme=$1 f=$2 pat
  grep -qF "\`$f\`" "$readme" && return 0
  while read -r pat; do
    # shellcheck disable=SC2053 # pat is a glob on purpose
    [[ "$f" == $pat ]] && return 0
  done < <(grep -o '`[A-Za-z0-9_]*\*[A-Za-z0-9_.]*`' "$readme" | tr -d '`')
  return 1
}
for dir in "$core"/*/; do
  readme=${dir}README.md
  [ -f "$readme" ] || { echo "FAIL: ${dir#"$root"/} has no README.md"; bad=$((bad + 1)); continue; }
  for f in "$dir"*.c "$dir"*.h; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    named_in "$readme" "$b" && continue
    [[ "$b" == *.h ]] && named_in "$readme" "${b%.h}.c" && continue
    echo "FAIL: ${f#"$root"/} is not named in ${readme#"$root"/}"
    bad=$((bad + 1))
  done
done
[ "$bad" -eq 0 ] && echo "layering: every include across libesmtrain's folders is an allowed edge; every file is named in its README"
[ "$bad" -eq 0 ]
