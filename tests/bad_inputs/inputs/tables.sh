# SPDX-License-Identifier: MIT
# Inputs of cases/tables.tsv (#21 tables): CSV/TSV tables ingest must
# refuse with the file and the line, under $W/tab/. Sourced by run_cases.sh
# with $CLI and $W set.
T="$W/tab"
mkdir -p "$T"
printf 'id,seqence,length\nP1,MKVLA,5\n' > "$T/missing.csv"
printf 'id,description,sequence\nP1,"kinase, A",MKVLA\nP2,MKVLA\n' > "$T/short.csv"
printf 'id\tsequence\nP1\tMKVLA\nP2 MKVLA\n' > "$T/short.tsv"
printf 'id,sequence\nP1,MKVLA\nP2,"MKVLA\nP3,GGHH\n' > "$T/unterm.csv"
printf 'id,sequence\nP1,MK"VLA\n' > "$T/quote.csv"
printf 'id\tsequence\nP1\tMK\000VLA\n' > "$T/nul.tsv"
printf 'id,sequence\nP1,MKVLA\nP2,MK\000VLA\n' | gzip -c > "$T/nul.csv.gz"
printf 'name,sequence\nP1,MKVLA\n' > "$T/noid.csv"
