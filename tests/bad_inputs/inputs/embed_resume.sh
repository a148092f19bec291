# SPDX-License-Identifier: MIT
# Inputs of cases/embed_resume.tsv (#35 embed): unfinished embed outputs
# (their record says not complete) with a file planted or replaced, a
# model trained further or re-exported, an input edited or re-ingested, a
# damaged record; the user's files the planted links point at. Sourced by
# run_cases.sh with $CLI and $W set.
e2_part() { # e2_part OUT MODEL INPUT [options]: an unfinished embed output
  local out=$1 model=$2 input=$3
  shift 3
  "$CLI" embed "$model" "$input" -o "$out" --quiet "$@" >/dev/null &&
    sed -i 's/"complete": true/"complete": false/' "$out/embed.json"
}
seq 100000 > "$W/e2-user.txt"
e2_part "$W/e2-part" "$W/hfexp" "$W/good.fa" &&
for d in link-ids link-len link-mean hardlink replaced fifo jsonlink tmplink \
         req-null proteins-text proteins-neg hash-missing version1 files-missing \
         complete-text committed-array; do
  e2_part "$W/e2-$d" "$W/hfexp" "$W/good.fa" || return 1 # each its own files (inodes)
done &&
ln -sf ../e2-user.txt "$W/e2-link-ids/ids.txt" &&
ln -sf ../e2-user.txt "$W/e2-link-len/lengths.npy" &&
ln -sf ../e2-user.txt "$W/e2-link-mean/mean.layer1.npy" &&
ln -f "$W/e2-user.txt" "$W/e2-hardlink/lengths.npy" &&
rm "$W/e2-replaced/lengths.npy" && cp "$W/e2-user.txt" "$W/e2-replaced/lengths.npy" &&
rm "$W/e2-fifo/ids.txt" && mkfifo "$W/e2-fifo/ids.txt" &&
rm "$W/e2-jsonlink/embed.json" && ln -s ../e2-part/embed.json "$W/e2-jsonlink/embed.json" &&
ln -s ../e2-user.txt "$W/e2-tmplink/embed.json.tmp" &&
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def edit(d, f):
    p = f"{w}/e2-{d}/embed.json"
    r = json.load(open(p))
    f(r)
    json.dump(r, open(p, "w"), indent=2)
edit("req-null", lambda r: r.update(request=None))
edit("proteins-text", lambda r: r["committed"].update(proteins="2"))
edit("proteins-neg", lambda r: r["committed"].update(proteins=-5))
edit("hash-missing", lambda r: r["committed"].pop("ids_hash"))
edit("version1", lambda r: r.update(version=1))
edit("files-missing", lambda r: r.pop("files", None))
edit("complete-text", lambda r: r.update(complete="no"))
edit("committed-array", lambda r: r.update(committed=[2]))
PY
# The model changes between the attempt and the resume: the run trained one
# step further (same path), an export replaced by another one.
cp -a "$W/run-ok" "$W/e2-run" && cp -a "$W/hfexp" "$W/e2-hf" &&
e2_part "$W/e2-model-run" "$W/e2-run" "$W/good.fa" &&
e2_part "$W/e2-model-hf" "$W/e2-hf" "$W/good.fa" &&
"$CLI" train --data "$W/data" --no-mfu --layers 1 --width 16 --heads 2 --steps 4 --warmup 1 \
  --eval-every 0 --out "$W/e2-run" --resume latest >/dev/null &&
rm -r "$W/e2-hf" && "$CLI" export "$W/e2-run" -o "$W/e2-hf" >/dev/null &&
# The input changes: one residue of a FASTA (same ids, same size); a
# dataset re-ingested from another FASTA (the same ids train:N).
printf '>a\nMKVLAGGHH\n>b\nKKLLAAGG\n' > "$W/e2-in.fa" &&
e2_part "$W/e2-input" "$W/hfexp" "$W/e2-in.fa" &&
printf '>a\nMKVLAGGHA\n>b\nKKLLAAGG\n' > "$W/e2-in.fa" &&
"$CLI" ingest "$W/prot.fa" -o "$W/e2-ds" --valid-fraction 0 --quiet >/dev/null &&
e2_part "$W/e2-dsout" "$W/hfexp" "$W/e2-ds" &&
rm -r "$W/e2-ds" &&
awk 'BEGIN { srand(9); for (r = 0; r < 200; r++) { printf(">s%d\n", r); n = 20 + int(rand() * 60);
  for (i = 0; i < n; i++) printf("%s", substr("ACDEFGHIKLMNPQRSTVWY", 1 + int(rand() * 20), 1)); printf("\n") } }' > "$W/e2-other.fa" &&
"$CLI" ingest "$W/e2-other.fa" -o "$W/e2-ds" --valid-fraction 0 --quiet >/dev/null &&
# A first attempt that failed on a byte-order mark, then a file of the
# user's put into its directory, or a link in place of one of its files.
printf '\xef\xbb\xbf>a\nMKV\n' > "$W/e2-bom.fa" &&
for d in bom-notes bom-link; do
  ! "$CLI" embed "$W/hfexp" "$W/e2-bom.fa" -o "$W/e2-$d" --quiet 2>/dev/null || return 1
done &&
echo "my notes" > "$W/e2-bom-notes/notes.txt" &&
rm "$W/e2-bom-link/lengths.npy" && ln -s ../e2-user.txt "$W/e2-bom-link/lengths.npy" &&
ln -s data "$W/e2-to-data" && ln -s run-ok "$W/e2-to-run"
