# SPDX-License-Identifier: MIT
"""What scripts/parquet_to_fasta.py and scripts/parquet_to_csv.py share:
opening a Parquet file through pyarrow with a clear message when pyarrow or
the file is missing, and writing to standard output so that a reader that
stops (a closed pipe) ends the script quietly with status 141, as a shell
pipeline's writer killed by SIGPIPE."""
import os
import sys


def die(prog, msg, code=2):
    print(f"{prog}: {msg}", file=sys.stderr)
    sys.exit(code)


def open_parquet(prog, path):
    """pyarrow.parquet.ParquetFile(path), or exit 2 naming what is wrong."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        die(prog, f"needs pyarrow, which this python3 ({sys.executable}) cannot import ({e}): "
            "pip install pyarrow (or scripts/setup_reference_env.sh)")
    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as e:  # missing file, not Parquet (pyarrow.ArrowInvalid)
        die(prog, f"{path}: cannot read as Parquet: {e}")


def write_chunks(prog, path, chunks):
    """Write each str of the iterable `chunks` to standard output (UTF-8)."""
    out = sys.stdout.buffer
    try:
        for chunk in chunks:
            out.write(chunk.encode("utf-8", "replace"))
        out.flush()
    except BrokenPipeError:
        # the reader stopped (it failed or was interrupted): its message says why
        try:
            sys.stdout = None
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        finally:
            sys.exit(141)
    except OSError as e:
        die(prog, f"{path}: {e}", 1)
