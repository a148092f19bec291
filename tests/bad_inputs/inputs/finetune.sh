# SPDX-License-Identifier: MIT
# Inputs of cases/finetune.tsv (#40 fine-tuning): labelled tables broken in
# one way each. Sourced by run_cases.sh with $CLI and $W set.
F="$W/ft"
mkdir -p "$F"
printf 'sequence,label,split\nMKV,a,train\nMKA,b,train\nACD,c,valid\n' > "$F/unseen.csv"
printf 'sequence,label\nMKV,HHE\nACD,HE\n' > "$F/residue_short.csv"
printf 'sequence,label\nMKV,1.5\nACD,high\n' > "$F/not_number.csv"
printf 'sequence,label\nMKV,a\nACD,\n' > "$F/missing.csv"
printf 'sequence,lbl\nMKV,a\nACD,b\n' > "$F/no_column.csv"
printf 'sequence,label\nMKV,a\nAC1,b\n' > "$F/bad_residue.csv"
printf 'sequence,label\nMKV,a\nACD,b\nMKA,a\nACE,b\n' > "$F/good.csv"
