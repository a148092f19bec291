#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Stream a Parquet table as CSV on standard output, for the commands that
read tables (finetune, predict, score, ingest):

    python3 scripts/parquet_to_csv.py labels.parquet > labels.csv
    esmtrain-example finetune --data labels.csv --task seq-class ...

The library reads CSV and TSV itself; Debian ships no Parquet library for C,
so Parquet goes through pyarrow here. Every column is written, in the file's
order, under its own name (RFC 4180 quoting, "\\n" line ends). Values: a
null is an empty field (a missing label, which finetune refuses by line); a
boolean is 1 or 0 (multi-label 0/1 columns); a float is written as the
shortest text that reads back to the same double; bytes are decoded as
UTF-8; a list (several labels of one protein, or per-residue classes) is
joined by --list-sep (default ";", finetune's --label-sep). Memory: one
record batch at a time. Exit status: 0 done; 2 bad usage, no pyarrow, a file
that is not Parquet, a nested value other than a list; 1 an output error
other than a closed pipe; 141 a closed pipe (the reader stopped).
"""
import argparse
import csv
import io

from parquet_input import die as _die, open_parquet, write_chunks

PROG = "parquet_to_csv"


def die(msg, code=2):
    _die(PROG, msg, code)


def text(value, sep, where):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return sep.join(text(v, sep, where) for v in value)
    if isinstance(value, dict):
        die(f"{where}: a struct or map value; only scalars and lists become CSV fields")
    return str(value)


def main():
    ap = argparse.ArgumentParser(description="Stream a Parquet table as CSV on standard output.")
    ap.add_argument("parquet", help="the Parquet file")
    ap.add_argument("--list-sep", default=";", metavar="SEP",
                    help='what joins a list\'s values in one field (default ";")')
    ap.add_argument("--batch-rows", type=int, default=8192, metavar="N",
                    help="rows per record batch read (default 8192)")
    a = ap.parse_args()
    if a.batch_rows < 1:
        die("--batch-rows must be positive")
    pf = open_parquet(PROG, a.parquet)
    names = list(pf.schema_arrow.names)

    def chunks():
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        row = 0
        for batch in pf.iter_batches(batch_size=a.batch_rows):
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            for r in range(batch.num_rows):
                row += 1
                w.writerow([text(columns[c][r], a.list_sep, f"{a.parquet}: row {row}, column "
                                 f"'{names[c]}'") for c in range(len(names))])
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
        yield buf.getvalue()

    write_chunks(PROG, a.parquet, chunks())


if __name__ == "__main__":
    main()
