#!/usr/bin/env bash
# The core's folders may include only the folders listed for them below
# (libesmtrain/*/README.md says why; docs/architecture.md draws the graph).
# An include across folders that is not listed fails with the file, the
# line and the edge, so a new dependency is a decision, not an accident.
# Usage: check_layers.sh [SOURCE_ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
core=$root/libesmtrain
# folder: the folders it may include (base is allowed everywhere).
declare -A allowed=(
  [base]=""
  [backend]="dist"          # debt: context.c reads the rank layout to pick a device
  [config]="backend model optim"
  [data]=""
  [dist]="backend model io" # debt: dp_zero.c uses checkpoint.h
  [io]="model memory optim"     # buffer copies through the parameter memory's layer
  [memory]="backend model optim" # debt: its layers take the whole esmt_model (ops, stream,
                                 # layout), not a context of their own: memory <-> model cycle
  [model]="backend memory optim" # the model's parameter memory (memory/param_layer.h) and
                                 # its optimizer's state size (optimizer.h)
  [optim]="backend model memory"     # the step runs through the parameter memory's layer
  [train]="backend config data dist io memory model optim"
)
declare -A home=()
for dir in "$core"/*/; do
  d=$(basename "$dir")
  [ -n "${allowed[$d]+x}" ] || { echo "FAIL: libesmtrain/$d has no entry in $0"; exit 1; }
  for f in "$dir"*.h; do [ -e "$f" ] && home[$(basename "$f")]=$d; done
done
bad=0
for dir in "$core"/*/; do
  d=$(basename "$dir")
  while IFS=: read -r file line inc; do
    h=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$inc")
    t=${home[$h]:-}
    [ -z "$t" ] || [ "$t" = "$d" ] || [ "$t" = base ] && continue
    [[ " ${allowed[$d]} " == *" $t "* ]] && continue
    echo "FAIL: ${file#"$root"/}:$line includes $h ($d -> $t is not an allowed edge)"
    bad=$((bad + 1))
  done < <(grep -Hn '^#include "' "$dir"*.c "$dir"*.h 2>/dev/null || true)
done
[ "$bad" -eq 0 ] && echo "layering: every include across libesmtrain's folders is an allowed edge"
[ "$bad" -eq 0 ]
