#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Tables as ingest inputs (issue #21) against the FASTA they came from: the
# first 2,000 UniProt proteins of the README's main job (Debian's
# mmseqs2-examples DB.fasta.gz) written by python3 as CSV (RFC 4180: quoted
# descriptions holding commas and quotes, some sequences wrapped inside a
# quoted field, CRLF line ends, columns in another order), TSV, CSV.gz, CSV
# on standard input and Parquet (through scripts/parquet_to_fasta.py; skipped
# with "SKIP parquet: no pyarrow" when python3 cannot import pyarrow). Each
# is ingested with the FASTA's options, and must give the same dataset:
# every shard byte-identical to the FASTA ingest's except bytes 48-63 of
# the header (the dataset id, random per ingest by design:
# docs/formats.md), the manifests' shard lists (file, split, records,
# tokens, crc32) and stats equal, and each shard's token area + index equal.
# Then an ingest into an existing dataset is refused and leaves it as it was.
# Usage: test_tables.sh ESMTRAIN_EXAMPLE SOURCE_DIR   (exit 77: no DB.fasta.gz)
set -euo pipefail
CLI=$(realpath "$1")
SRC=$(realpath "$2")
PY=${ESMT_PYTHON:-/usr/bin/python3}
DB=/usr/share/doc/mmseqs2/example-data/DB.fasta.gz
if [ ! -r "$DB" ]; then
  echo "SKIP: $DB missing (scripts/setup_deps.sh installs mmseqs2-examples)"
  exit 77
fi
W=$(mktemp -d /tmp/esmt-tables-XXXXXX)
trap 'rm -rf "$W"' EXIT
N=2000

# ---- the inputs ----
"$PY" - "$DB" "$W" "$N" <<'PY'
import csv, gzip, io, sys
db, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
recs, head, seq = [], None, []
with gzip.open(db, "rt") as f:
    for line in f:
        if line.startswith(">"):
            if head is not None:
                recs.append((head, "".join(seq)))
                if len(recs) == n:
                    head = None
                    break
            head, seq = line[1:].rstrip("\n"), []
        else:
            seq.append(line.strip())
if head is not None:
    recs.append((head, "".join(seq)))
assert len(recs) == n, len(recs)
with open(f"{w}/p.fa", "w") as f:  # the same records, sequences wrapped at 60
    for h, s in recs:
        f.write(f">{h}\n" + "".join(s[i:i + 60] + "\n" for i in range(0, len(s), 60)))
rows = []
for k, (h, s) in enumerate(recs):
    ident, _, rest = h.partition(" ")
    desc = f'{rest.strip()}, record {k}, "quoted", length {len(s)}'  # commas and quotes
    if k % 7 == 0:  # a sequence over several lines inside its quoted field
        s = "\n".join(s[i:i + 50] for i in range(0, len(s), 50))
    rows.append((desc, s, ident))
buf = io.StringIO(newline="")
wr = csv.writer(buf, lineterminator="\r\n")  # QUOTE_MINIMAL, CRLF: RFC 4180
wr.writerow(["description", "sequence", "id"])
wr.writerows(rows)
text = buf.getvalue()
assert '"' in text and '\n' in text.replace("\r\n", "")
open(f"{w}/p.csv", "w", newline="").write(text)
with gzip.open(f"{w}/p.csv.gz", "wt", newline="") as g:
    g.write(text)
with open(f"{w}/p.tsv", "w") as f:
    f.write("id\tsequence\tdescription\n")
    for desc, s, ident in rows:
        f.write(f"{ident}\t{s.replace(chr(10), '')}\t{desc}\n")
try:
    import pyarrow as pa, pyarrow.parquet as pq
except ImportError:
    sys.exit(0)
t = pa.table({"accession": [r[2] for r in rows], "seq": [r[1].replace("\n", "") for r in rows],
              "description": [r[0] for r in rows]})
pq.write_table(t, f"{w}/p.parquet", row_group_size=300)  # several row groups and batches
PY
echo "inputs: the first $N proteins of $DB as FASTA, CSV (quoted fields with commas, quotes and line breaks; CRLF), CSV.gz, TSV$( [ -f "$W/p.parquet" ] && echo ", Parquet")"

opts=(--valid-fraction 0.1 --quiet)
ingest() { # NAME ARGS...: ingest into $W/NAME, print the summary line
  local name=$1
  shift
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$CLI" ingest "$@" -o "$W/$name" "${opts[@]}")
  t1=$(date +%s.%N)
  printf '%-12s %s (%.2f s wall)\n' "$name:" "$(head -1 <<<"$out")" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
}
ingest fasta "$W/p.fa"
ingest csv "$W/p.csv"
ingest csv-gz "$W/p.csv.gz"
ingest tsv "$W/p.tsv"
ingest csv-stdin - --format csv < "$W/p.csv"
ingest tsv-named "$W/p.tsv" --format tsv --seq-column sequence --id-column id
sets=(csv csv-gz tsv csv-stdin tsv-named)
if "$PY" -c 'import pyarrow' 2>/dev/null; then
  t0=$(date +%s.%N)
  out=$("$PY" "$SRC/scripts/parquet_to_fasta.py" "$W/p.parquet" --seq-column seq \
          --id-column accession --batch-rows 256 | "$CLI" ingest - -o "$W/parquet" "${opts[@]}")
  t1=$(date +%s.%N)
  printf '%-12s %s (%.2f s wall)\n' "parquet:" "$(head -1 <<<"$out")" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
  sets+=(parquet)
  # every column as CSV (the bridge for finetune/predict tables), read back by the C reader
  "$PY" "$SRC/scripts/parquet_to_csv.py" "$W/p.parquet" --batch-rows 256 > "$W/p-parquet.csv"
  ingest parquet-csv "$W/p-parquet.csv" --seq-column seq --id-column accession
  sets+=(parquet-csv)
else
  echo "SKIP parquet: no pyarrow ($PY cannot import it; scripts/setup_reference_env.sh installs it)"
fi

# ---- the same dataset ----
"$PY" - "$W" "$N" "${sets[@]}" <<'PY'
import json, os, sys
w, n, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def manifest(name):
    return json.load(open(os.path.join(w, name, "manifest.json")))
ref = manifest("fasta")
assert ref["stats"]["records"] == n, ref["stats"]
splits = {e["split"] for e in ref["shards"]}
assert splits == {"train", "valid"}, splits
for name in sets:
    m = manifest(name)
    assert m["dataset_id"] != ref["dataset_id"], f"{name}: the same dataset id as the FASTA ingest"
    strip = lambda es: [{k: e[k] for k in ("file", "split", "records", "tokens", "crc32")} for e in es]
    if strip(m["shards"]) != strip(ref["shards"]):
        sys.exit(f"FAIL {name}: shard list {strip(m['shards'])} != the FASTA's {strip(ref['shards'])}")
    if m["stats"] != ref["stats"]:
        sys.exit(f"FAIL {name}: stats {m['stats']} != the FASTA's {ref['stats']}")
    for e in ref["shards"]:
        a = open(os.path.join(w, "fasta", e["file"]), "rb").read()
        b = open(os.path.join(w, name, e["file"]), "rb").read()
        if len(a) != len(b):
            sys.exit(f"FAIL {name}/{e['file']}: {len(b)} bytes, the FASTA's {len(a)}")
        tokens = int.from_bytes(a[24:32], "little")
        index_at = int.from_bytes(a[32:40], "little")
        assert index_at == 64 + (tokens + 7) // 8 * 8 and tokens == e["tokens"]
        # the token area and the index on their own, then the whole file
        if a[64:64 + tokens] != b[64:64 + tokens]:
            sys.exit(f"FAIL {name}/{e['file']}: the token area differs")
        if a[index_at:] != b[index_at:]:
            sys.exit(f"FAIL {name}/{e['file']}: the index differs")
        if a[48:64] == b[48:64]:
            sys.exit(f"FAIL {name}/{e['file']}: the same dataset id bytes 48-63 as the FASTA's")
        if a[:48] + a[64:] != b[:48] + b[64:]:
            sys.exit(f"FAIL {name}/{e['file']}: differs outside the dataset id bytes 48-63")
    print(f"same dataset: {name} = fasta: {len(ref['shards'])} shards ({', '.join(e['file'] + ' ' + str(e['records']) + ' records ' + str(e['tokens']) + ' tokens' for e in ref['shards'])}) "
          f"byte-identical with header bytes 48-63 (the dataset id, random per ingest) masked; "
          f"token areas, indexes, shard lists and stats equal")
PY

# ---- an existing dataset is refused and left as it was ----
listing() { (cd "$W/fasta" && find . -printf '%p %y %m %s %T@\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum); }
before=$(listing)
set +e
msg=$("$CLI" ingest "$W/p.csv" -o "$W/fasta" --quiet 2>&1)
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: an ingest into an existing dataset succeeded"; exit 1; }
[[ "$msg" == *"not empty"* ]] || { echo "FAIL: the refusal does not say why: $msg"; exit 1; }
[ "$(listing)" = "$before" ] || { echo "FAIL: the refused ingest changed $W/fasta"; exit 1; }
if compgen -G "$W/fasta/.esmtrain-tmp-*" >/dev/null || compgen -G "$W/fasta.esmtrain-tmp-*" >/dev/null; then
  echo "FAIL: temporaries left behind"; exit 1
fi
echo "existing dataset refused (exit $rc: ${msg##*: }) and left untouched"
echo "tables_ingest: ok"
