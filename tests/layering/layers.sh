# SPDX-License-Identifier: MIT
# The core's layer table, sourced by check_layers.sh (includes) and
# check_calls.sh (calls between objects): one table, two proofs.
# folder: the folders it may use (base is allowed everywhere).
# libesmtrain/*/README.md says why; docs/architecture.md draws the graph.
declare -A allowed=(
  [base]=""
  [backend]="dist"          # debt: context.c reads the rank layout to pick a device
  [config]="backend model optim"
  [data]=""
  [dist]="backend model io memory" # debt: dp_zero.c uses checkpoint.h; ZeRO-1 shards the
                                   # parameter memory's moments
  [infer]="data io model"          # the alphabet; the model through its public calls;
                                   # the contact head it carries (io/contact_head.c)
  [io]="data model memory optim"   # buffer copies through the parameter memory's layer;
                                   # hf_export.c writes the vocabulary from the alphabet
  [memory]="backend optim"         # the backend's ops and the optimizer's step arguments;
                                   # never the model (its owner describes it: esmt_param_env)
  [model]="backend memory optim"   # the model's parameter memory (memory/param_layer.h) and
                                   # the optimizer step it drives (optim/optimizer.h)
  [optim]=""                       # kinds, state sizes, step arguments: nothing above base
  [plan]="model memory optim"      # the memory planner: the model's activations, the memory
                                   # levels' sizes, the optimizer's state
  [train]="backend config data dist io memory model optim plan"
)
# Two folders that use each other are one component in two places. The
# pairs below are known debt; any other two-way pair fails, in the table or
# in the code.
two_way_debt=" backend:dist "

# Fails when the table itself lets two folders use each other.
check_table_acyclic() {
  local a b
  for a in "${!allowed[@]}"; do
    for b in ${allowed[$a]}; do
      [[ " ${allowed[$b]:-} " == *" $a "* ]] || continue
      [[ "$two_way_debt" == *" $a:$b "* || "$two_way_debt" == *" $b:$a "* ]] && continue
      echo "FAIL: $a and $b may use each other (a cycle between folders)"
      return 1
    done
  done
}

# Whether folder $1 may use folder $2.
edge_allowed() {
  [ "$1" = "$2" ] || [ "$2" = base ] || [[ " ${allowed[$1]:-} " == *" $2 "* ]]
}
