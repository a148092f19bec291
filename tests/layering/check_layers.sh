#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
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
  [dist]="backend model io memory" # debt: dp_zero.c uses checkpoint.h; ZeRO-1 shards the
                                   # parameter memory's moments
  [io]="model memory optim"        # buffer copies through the parameter memory's layer
  [memory]="backend optim"         # the backend's ops and the optimizer's step arguments;
                                   # never the model (its owner describes it: esmt_param_env)
  [model]="backend memory optim"   # the model's parameter memory (memory/param_layer.h) and
                                   # the optimizer step it drives (optim/optimizer.h)
  [optim]=""                       # kinds, state sizes, step arguments: nothing above base
  [plan]="model memory optim"      # the memory planner: the model's activations, the memory
                                   # levels' sizes, the optimizer's state
  [train]="backend config data dist io memory model optim plan"
)
# Two folders that include each other are one component in two places. The
# pairs below are known debt; any other two-way pair fails, in the table or
# in the code.
two_way_debt=" backend:dist "
for a in "${!allowed[@]}"; do
  for b in ${allowed[$a]}; do
    [[ " ${allowed[$b]:-} " == *" $a "* ]] || continue
    [[ "$two_way_debt" == *" $a:$b "* || "$two_way_debt" == *" $b:$a "* ]] && continue
    echo "FAIL: $a and $b may include each other (a cycle between folders)"
    exit 1
  done
done
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
