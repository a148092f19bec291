#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stream a Parquet table of proteins as FASTA on standard output, for ingest:

    python3 scripts/parquet_to_fasta.py x.parquet | esmtrain-example ingest - -o DIR

Columns are chosen by name as `ingest` chooses them in CSV/TSV tables
(docs/formats.md): --seq-column (default "sequence") and --id-column (default
"id"). Without an id column (when the default is used), or where the id is
null or empty, a record's id is "row<N>", N its 1-based row in the file, as
the C table reader numbers data rows. An id is its value up to the first
whitespace (a FASTA header's first word, which is what ingest keeps); a
sequence loses its whitespace (line breaks would split the record). A null
sequence is an empty record (ingest counts it).

Memory: one record batch at a time (pyarrow.parquet.ParquetFile.iter_batches,
only the two columns read). Exit status: 0 done; 2 bad usage, a missing
column, no pyarrow ("pip install pyarrow"), a file that is not Parquet; 1 an
output error other than a closed pipe; a closed pipe (ingest stopped) ends
quietly with 141 like a shell pipeline's writer killed by SIGPIPE.
"""
import argparse
import difflib
import sys

from parquet_input import die as _die, open_parquet, write_chunks

PROG = "parquet_to_fasta"


def die(msg, code=2):
    _die(PROG, msg, code)


def main():
    ap = argparse.ArgumentParser(
        description="Stream a Parquet file's proteins as FASTA (for esmtrain-example ingest -).")
    ap.add_argument("parquet", help="the Parquet file")
    ap.add_argument("--seq-column", default=None, metavar="NAME",
                    help='the sequence column (default "sequence")')
    ap.add_argument("--id-column", default=None, metavar="NAME",
                    help='the id column (default "id"; without one the ids are row1, row2, ...)')
    ap.add_argument("--batch-rows", type=int, default=8192, metavar="N",
                    help="rows per record batch read (default 8192)")
    a = ap.parse_args()
    if a.batch_rows < 1:
        die("--batch-rows must be positive")
    pf = open_parquet(PROG, a.parquet)
    names = list(pf.schema_arrow.names)

    def column(want, default, what, option, required):
        name = want if want is not None else default
        if name in names:
            return name
        folded = [n for n in names if n.lower() == name.lower()]
        if len(folded) == 1:  # as the C reader: the only one equal ignoring case
            return folded[0]
        if not required:
            return None
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.0)
        cols = ", ".join(f"'{n}'" for n in names)
        die(f"{a.parquet}: no {what} column '{name}'; its columns are {cols}"
            + (f"; did you mean '{near[0]}'?" if near else "") + f" ({option} NAME chooses another)")

    seq_col = column(a.seq_column, "sequence", "sequence", "--seq-column", True)
    id_col = column(a.id_column, "id", "id", "--id-column", a.id_column is not None)
    cols = [seq_col] + ([id_col] if id_col and id_col != seq_col else [])
    def chunks():
        row = 0
        for batch in pf.iter_batches(batch_size=a.batch_rows, columns=cols):
            seqs = batch.column(0).to_pylist()
            ids = batch.column(batch.schema.get_field_index(id_col)).to_pylist() if id_col else None
            chunk = []
            for i, s in enumerate(seqs):
                row += 1
                ident = ids[i] if ids is not None else None
                if isinstance(ident, bytes):
                    ident = ident.decode("utf-8", "replace")
                words = str(ident).split() if ident is not None else []
                ident = words[0] if words else f"row{row}"
                if s is None:
                    s = ""
                elif isinstance(s, bytes):
                    s = s.decode("ascii", "replace")
                elif not isinstance(s, str):
                    die(f"{a.parquet}: row {row}: the sequence column '{seq_col}' holds "
                        f"{type(s).__name__} values, not strings")
                chunk.append(f">{ident}\n{''.join(s.split())}\n")
            yield "".join(chunk)

    write_chunks(PROG, a.parquet, chunks())

if __name__ == "__main__":
    main()
