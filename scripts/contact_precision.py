#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Top-L/5 long-range contact precision of `esmtrain-example contacts` output:

    python3 scripts/contact_precision.py CONTACTS.safetensors PAIRS

For each protein of CONTACTS (its ids in the header's metadata), the L/5
pairs |i - j| >= 24 with the highest predicted probability (L its length;
ties in file order), and the fraction of them PAIRS lists as contacts
("ID I J", 1-based); the mean over proteins with at least one long-range
pair, as the library's `--train-head` report and ESM-2's paper compute it.
Also the baseline a random ranking scores: the mean fraction of long-range
pairs that are contacts. Needs numpy and safetensors.
"""
import json
import sys

import numpy as np
from safetensors.numpy import load_file

LONG = 24


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, pairs = argv[1], argv[2]
    t = load_file(path)
    with open(path, "rb") as f:
        meta = json.loads(f.read(int.from_bytes(f.read(8), "little")))["__metadata__"]
    ids = meta["ids"].split("\n")
    known = {}
    with open(pairs) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                pid, i, j = line.split()
                known.setdefault(pid, set()).add(tuple(sorted((int(i) - 1, int(j) - 1))))
    prec, base = [], []
    for k, pid in enumerate(ids):
        n = int(t["lengths"][k])
        c = t["contacts"][t["offsets"][k]:t["offsets"][k + 1]].reshape(n, n)
        iu = np.triu_indices(n, LONG)
        if n // 5 == 0 or not len(iu[0]):
            continue
        truth = np.array([(a, b) in known.get(pid, ()) for a, b in zip(*iu)])
        top = np.argsort(-c[iu], kind="stable")[:n // 5]
        prec.append(float(truth[top].mean()))
        base.append(float(truth.mean()))
    if not prec:
        print("contact_precision: no protein with long-range pairs", file=sys.stderr)
        return 1
    print("top-L/5 long-range (|i-j| >= %d) precision: %.3f over %d proteins (random ranking: "
          "%.3f)" % (LONG, np.mean(prec), len(prec), np.mean(base)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
