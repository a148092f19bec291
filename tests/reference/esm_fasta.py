# SPDX-License-Identifier: MIT
"""The ESM-2 alphabet, plain FASTA reading/writing and embed's window rule,
shared by the Python reference tests and benchmarks (test_embed.py,
bench_embed_torch.py)."""
import gzip

# libesmtrain/data/alphabet.c; fair-esm's ESM-1b alphabet
TOKENS = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I",
          "D", "P", "K", "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O",
          ".", "-", "<null_1>", "<mask>"]
TOK = {t: i for i, t in enumerate(TOKENS) if len(t) == 1}
CLS, PAD, EOS, UNK = 0, 1, 2, 3


def read_fasta(path):
    """[(header, sequence)] of a plain or gzip FASTA file."""
    recs, head, seq = [], None, []
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                if head is not None:
                    recs.append((head, "".join(seq)))
                head, seq = line[1:], []
            elif line:
                seq.append(line)
    if head is not None:
        recs.append((head, "".join(seq)))
    return recs


def write_fasta(path, recs):
    with open(path, "w") as f:
        for head, seq in recs:
            f.write(">%s\n" % head)
            for i in range(0, len(seq), 60):
                f.write(seq[i:i + 60] + "\n")


def tokens(seq):
    """Residue token ids (letters outside the alphabet: <unk>)."""
    return [TOK.get(c.upper(), UNK) for c in seq]


def window_starts(n, W, S):
    """First residues of embed's windows over n residues: 0, S, 2S, ... and
    one ending at the protein's end (docs/inference.md); [0] when n <= W."""
    if n <= W:
        return [0]
    starts, s = [], 0
    while s + W < n:
        starts.append(s)
        s += S
    starts.append(n - W)
    return sorted(set(starts))
