#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Top-L/5 long-range contact precision of MODEL on real protein structures:
#   bash scripts/contact_precision.sh MODEL [WORK]
# The set: the 51 single-chain PDB entries of MDAnalysisTests' DSSP test
# data (PyPI MDAnalysisTests 2.11.0, LGPL-2.1+; the coordinates are the
# PDB's, CC0), 12..173 residues, fetched once with `pip download` (a 59 MB
# source archive; only data/dssp/ is kept, 1.3 MB) into
# ${XDG_CACHE_HOME:-~/.cache}/esmtrain/pdb-dssp. Contacts: C-beta < 8 A,
# |i - j| >= 6 (scripts/pdb_contacts.py); the figure counts pairs >= 24
# apart (scripts/contact_precision.py).
# MODEL with a contact head is scored on all 51. A model without one (as
# esmtrain pre-trains them) gets one fitted with `contacts --train-head` on
# the 1st, 3rd, 5th, ... protein (by file name) and is scored on the others.
# Env: ESMT_CLI (default build/bin/esmtrain-example), ESMT_PDB_DIR (a
# directory of *.pdb / *.pdb.gz to use instead), THREADS (default 0: all).
# WORK (default a new temporary directory) must not exist.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
model=${1:?usage: contact_precision.sh MODEL [WORK]}
cli=${ESMT_CLI:-$here/../build/bin/esmtrain-example}
threads=${THREADS:-0}
py=/usr/bin/python3
if [ $# -ge 2 ]; then
  work=$2
  mkdir "$work" # refuses an existing one: nothing of the user's is written into
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/contact-precision-XXXXXX")
fi
pdb=${ESMT_PDB_DIR:-}
if [ -z "$pdb" ]; then
  pdb=${XDG_CACHE_HOME:-$HOME/.cache}/esmtrain/pdb-dssp
  if [ ! -d "$pdb" ]; then
    dl="$work/download"
    mkdir -p "$dl" "$(dirname "$pdb")"
    echo "contact_precision: fetching MDAnalysisTests 2.11.0 (59 MB) for its PDB test structures"
    $py -m pip download --quiet --no-deps --no-binary :all: mdanalysistests==2.11.0 -d "$dl"
    tar -xzf "$dl"/mdanalysistests-2.11.0.tar.gz -C "$dl" \
        mdanalysistests-2.11.0/MDAnalysisTests/data/dssp mdanalysistests-2.11.0/LICENSE
    cp "$dl"/mdanalysistests-2.11.0/LICENSE "$dl"/mdanalysistests-2.11.0/MDAnalysisTests/data/dssp/
    mv "$dl"/mdanalysistests-2.11.0/MDAnalysisTests/data/dssp "$pdb.tmp.$$" && mv "$pdb.tmp.$$" "$pdb"
    rm -rf "$dl"
  fi
fi
shopt -s nullglob
files=("$pdb"/*.pdb "$pdb"/*.pdb.gz)
[ ${#files[@]} -gt 0 ] || { echo "contact_precision: no *.pdb or *.pdb.gz in $pdb" >&2; exit 1; }
# one structure per protein: 1mr1D_failing is 1mr1D again
files=($(printf '%s\n' "${files[@]}" | grep -v '_failing\.'))
$py "$here/pdb_contacts.py" "$work/all" "${files[@]}"
echo "contact_precision: $(grep -c '>' "$work/all.fasta") proteins, $(grep -vc '^#' "$work/all.pairs") contacts (C-beta < 8 A, |i-j| >= 6) from $pdb"
out="$work/all.safetensors"
if "$cli" contacts "$model" "$work/all.fasta" -o "$out" --threads "$threads" --quiet 2>"$work/err"; then
  $py "$here/contact_precision.py" "$out" "$work/all.pairs"
  exit 0
fi
grep -q "contact head" "$work/err" || { cat "$work/err" >&2; exit 1; }
echo "contact_precision: $model has no trained contact head: fitting one on half the proteins"
awk '/^>/{n++} {print > (n % 2 ? FILENAME ".train" : FILENAME ".test")}' "$work/all.fasta"
awk 'NR==FNR { if (/^>/) keep[substr($1, 2)] = 1; next } /^#/ || ($1 in keep)' \
    "$work/all.fasta.train" "$work/all.pairs" > "$work/train.pairs"
"$cli" contacts "$model" "$work/all.fasta.train" --train-head "$work/train.pairs" \
    -o "$work/headed" --threads "$threads"
"$cli" contacts "$work/headed" "$work/all.fasta.test" -o "$work/test.safetensors" \
    --threads "$threads" --quiet
echo -n "held-out half: "
$py "$here/contact_precision.py" "$work/test.safetensors" "$work/all.pairs"
