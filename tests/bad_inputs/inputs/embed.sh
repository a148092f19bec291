# SPDX-License-Identifier: MIT
# Inputs of cases/embed.tsv (#19 embed): a complete embed output and an
# unfinished one (its record says not complete), from the tiny export
# $W/hfexp. Sourced by run_cases.sh with $CLI and $W set.
"$CLI" embed "$W/hfexp" "$W/good.fa" -o "$W/emb-done" --quiet >/dev/null &&
  "$CLI" embed "$W/hfexp" "$W/good.fa" -o "$W/emb-part" --quiet >/dev/null &&
  sed -i 's/"complete": true/"complete": false/' "$W/emb-part/embed.json"
