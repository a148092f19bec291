#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Proteins with known contacts from PDB files, for contact precision:

    python3 scripts/pdb_contacts.py OUT_PREFIX FILE.pdb[.gz] ...

writes OUT_PREFIX.fasta (each file's first chain: the residues that have N,
CA and C atoms, in file order, first model only, alternate locations
beyond the first ignored; the id is the file's name without .pdb/.gz) and
OUT_PREFIX.pairs (`contacts --train-head`'s format: "ID I J", 1-based
residues of that sequence) with every contact as ESM-2's paper and
trRosetta define it: C-beta atoms closer than 8 Angstrom (C-alpha's
virtual C-beta for glycine and where C-beta is missing, trRosetta's
formula), |i - j| >= 6. Residues outside the 20 standard amino acids are
written as X (esmtrain reads it as <unk>). Needs numpy.
"""
import gzip
import os
import sys

import numpy as np

THREE = {"ALA": "A", "ARG": "R", "ASN": "N", "ASP": "D", "CYS": "C", "GLN": "Q", "GLU": "E",
         "GLY": "G", "HIS": "H", "ILE": "I", "LEU": "L", "LYS": "K", "MET": "M", "PHE": "F",
         "PRO": "P", "SER": "S", "THR": "T", "TRP": "W", "TYR": "Y", "VAL": "V", "MSE": "M"}
CUTOFF, MIN_SEP = 8.0, 6


def residues(path):
    """[(one-letter, {atom: xyz})] of the first chain of the first model."""
    out, index, chain = [], {}, None
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for line in f:
            if line.startswith("ENDMDL"):
                break
            if not line.startswith(("ATOM", "HETATM")) or len(line) < 54:
                continue
            name, alt, res, ch = line[12:16].strip(), line[16], line[17:20], line[21]
            if res not in THREE and line.startswith("HETATM"):
                continue
            if chain is None:
                chain = ch
            if ch != chain:
                if out:
                    break
                continue
            if alt not in (" ", "A", "1"):
                continue
            key = (line[22:27], res)
            if key not in index:
                index[key] = len(out)
                out.append((THREE.get(res, "X"), {}))
            out[index[key]][1].setdefault(
                name, np.array([float(line[30:38]), float(line[38:46]), float(line[46:54])]))
    return [(a, x) for a, x in out if all(k in x for k in ("N", "CA", "C"))]


def c_beta(atoms):
    if "CB" in atoms:
        return atoms["CB"]
    b = atoms["CA"] - atoms["N"]
    c = atoms["C"] - atoms["CA"]
    a = np.cross(b, c)
    return -0.58273431 * a + 0.56802827 * b - 0.54067466 * c + atoms["CA"]


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    prefix, files = argv[1], argv[2:]
    with open(prefix + ".fasta", "x") as fa, open(prefix + ".pairs", "x") as pa:
        pa.write("# C-beta < %.0f A, |i - j| >= %d, from %d PDB files\n"
                 % (CUTOFF, MIN_SEP, len(files)))
        for path in sorted(files):
            res = residues(path)
            if len(res) < 2 * MIN_SEP:
                continue
            pid = os.path.basename(path).split(".")[0]
            cb = np.array([c_beta(x) for _, x in res])
            d = np.linalg.norm(cb[:, None, :] - cb[None, :, :], axis=-1)
            i, j = np.nonzero(np.triu(d < CUTOFF, MIN_SEP))
            fa.write(">%s\n%s\n" % (pid, "".join(a for a, _ in res)))
            pa.writelines("%s %d %d\n" % (pid, a + 1, b + 1) for a, b in zip(i, j))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
