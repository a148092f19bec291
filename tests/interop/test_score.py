#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`esmtrain-example score` against the same definitions in PyTorch float64.

A random transformers EsmForMaskedLM (2 layers, hidden 64, rotary, token
dropout, LayerNorms and biases perturbed) saved as safetensors is scored by
the CLI and recomputed here with model.double():
(a) pseudo-log-likelihood: for each residue i, [cls] residues [eos] with i
    masked; pll = sum_i log_softmax(logits[i])[true i], pppl = exp(-pll/n);
    max_position_embeddings 66 gives esmtrain max_positions 64, so rows hold
    W = 62 residues and the proteins of 63..90 residues go through the
    window rule: residues s..s+W-1 (0-based) with
    s = clamp(i - W//2, 0, n - W), still wrapped in [cls] .. [eos];
(b) the same FASTA ingested into a dataset and scored from it;
(c) masked marginals of single and double mutants (Meier et al. 2021);
(d) error paths: an existing OUT is refused and left unchanged; a wild-type
    mismatch and the other CSV problems fail naming the line; no OUT or
    temporary file is left behind; SIGINT stops the run and removes the
    temporary file.
Tolerance |ours - ref| <= 1e-4 * max(1, |ref|).
Usage: test_score.py ESMTRAIN_EXAMPLE SOURCE_DIR. Exit 77 = skipped.
"""
import csv
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import torch
    from transformers import EsmConfig, EsmForMaskedLM
except Exception as e:  # pragma: no cover
    print("skipped: torch or transformers not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

CLI = sys.argv[1]
# ESM-2's alphabet (fair-esm Alphabet "ESM-1b", transformers' vocab.txt), ids 0..32
VOCAB = ("<cls> <pad> <eos> <unk> L A G V S E R T I D P K Q N F Y M H W C X B U Z O . - "
         "<null_1> <mask>").split()
TOK = {t: i for i, t in enumerate(VOCAB)}
CLS, EOS, MASK = 0, 2, 32
AA = "ACDEFGHIKLMNPQRSTVWY"
W = 62  # max_position_embeddings 66 - 2 (esmtrain max_positions) - 2 (cls, eos)
TOL = 1e-4
failures = []
worst = {"pll": 0.0, "score": 0.0}


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def make_model(work):
    torch.manual_seed(0)
    cfg = EsmConfig(vocab_size=33, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, max_position_embeddings=66,
                    position_embedding_type="rotary", token_dropout=True, pad_token_id=1,
                    mask_token_id=32, emb_layer_norm_before=False, layer_norm_eps=1e-5,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = EsmForMaskedLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                p.add_(torch.randn_like(p) * (0.2 if name.endswith("weight") else 0.1))
            elif name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.05)
            else:  # sharper predictions than the 0.02 initialisation
                p.mul_(3.0)
    path = os.path.join(work, "hf")
    model.save_pretrained(path, safe_serialization=True)
    return model.double()


def window(n, i):
    if n <= W:
        return 0, n
    s = min(max(i - W // 2, 0), n - W)
    return s, s + W


def masked_logp(model, ids, positions):
    """log_softmax at each masked position (0-based residue), one row each."""
    rows, at = [], []
    for i in positions:
        s, e = window(len(ids), i)
        row = [CLS] + ids[s:e] + [EOS]
        row[1 + i - s] = MASK
        rows.append(row)
        at.append(1 + i - s)
    out = []
    for start in range(0, len(rows), 64):  # rows of one protein share a length
        chunk = rows[start:start + 64]
        t = torch.tensor(chunk, dtype=torch.long)
        with torch.no_grad():
            lg = model(input_ids=t, attention_mask=torch.ones_like(t)).logits
        lp = torch.log_softmax(lg, dim=-1)
        out += [lp[k, at[start + k]] for k in range(len(chunk))]
    return out


def run(args, **kw):
    r = subprocess.run([CLI, "score"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, **kw)
    return r.returncode, r.stdout, r.stderr


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def rel_err(ours, ref):
    return abs(ours - ref) / max(1.0, abs(ref))


def leftovers(d, name):
    return [f for f in os.listdir(d) if f.startswith(name)]


def pll_checks(model, work, hf, fasta, proteins):
    out = os.path.join(work, "pll.csv")
    rc, so, se = run([hf, fasta, "-o", out, "--batch-tokens", "500", "--quiet"])
    check(rc == 0, "(a) score exits 0 (%s)" % se.strip().splitlines()[-1:])
    if rc:
        return None
    rows = read_csv(out)
    check([r["id"] for r in rows] == [p[0] for p in proteins if p[1]],
          "(a) one line per non-empty protein, in input order")
    check("empty" in se, "(a) the empty record is reported as skipped")
    for r, (pid, seq) in zip(rows, [p for p in proteins if p[1]]):
        ids = [TOK[c] for c in seq]
        lps = masked_logp(model, ids, range(len(ids)))
        ref = float(sum(lp[t] for lp, t in zip(lps, ids)))
        e = rel_err(float(r["pll"]), ref)
        e2 = rel_err(float(r["pppl"]), math.exp(-ref / len(ids)))
        worst["pll"] = max(worst["pll"], e, e2)
        ok = int(r["length"]) == len(ids) and e <= TOL and e2 <= TOL
        if not ok:
            check(False, "(a) %s (n=%d): pll %s vs %.9g, pppl %s" % (pid, len(ids), r["pll"], ref,
                                                                   r["pppl"]))
    check(worst["pll"] <= TOL, "(a) pll/pppl of %d proteins (n up to %d, window W=%d): worst "
          "relative error %.2e" % (len(rows), max(len(p[1]) for p in proteins), W, worst["pll"]))
    return rows


def dataset_check(work, hf, fasta, rows):
    ds = os.path.join(work, "ds")
    r = subprocess.run([CLI, "ingest", fasta, "-o", ds, "--valid-fraction", "0", "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode:
        check(False, "(b) ingest failed: %s" % r.stderr.strip())
        return
    out = os.path.join(work, "ds.csv")
    rc, so, se = run([hf, ds, "--split", "train", "-o", out, "--quiet"])
    check(rc == 0, "(b) score of a dataset directory exits 0 (%s)" % se.strip()[-200:])
    if rc:
        return
    got = read_csv(out)
    same = len(got) == len(rows) and all(
        g["length"] == r["length"] and rel_err(float(g["pll"]), float(r["pll"])) <= 1e-6
        for g, r in zip(got, rows))
    check(same, "(b) the dataset's train split scores as the FASTA (ids %s..)" %
          [g["id"] for g in got[:2]])


VARIANTS = [  # (id, mutation); columns written in another order, with extras
    ("p3", "M1A"), ("p4", "K2R"), ("p4", "K2R:V10W"), ("p5", "A33G"),
    ("p7", "L70P"), ("p7", "L70P:A5C"), ("p7", "E90D"), ("p6", "G63Y"),
    ("p5", "A33A"), ("p7", "A5C:E90D:L70P")]


def variant_checks(model, work, hf, fasta, proteins):
    seqs = dict(proteins)
    vcsv = os.path.join(work, "variants.csv")
    with open(vcsv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["note", "mutation", "id", "dms"])
        for k, (pid, mut) in enumerate(VARIANTS):
            w.writerow(["row %d, quoted" % k, mut, pid, "0.%d" % k])
    out = os.path.join(work, "var.csv")
    rc, so, se = run([hf, fasta, "--variants", vcsv, "-o", out, "--batch-tokens", "200",
                      "--quiet"])
    check(rc == 0, "(c) score --variants exits 0 (%s)" % se.strip()[-300:])
    if rc:
        return
    rows = read_csv(out)
    check([(r["id"], r["mutation"]) for r in rows] == VARIANTS,
          "(c) one line per variant, in the order of the CSV")
    for r, (pid, mut) in zip(rows, VARIANTS):
        ids = [TOK[c] for c in seqs[pid]]
        ref = 0.0
        for m in mut.split(":"):
            i = int(m[1:-1]) - 1
            assert seqs[pid][i] == m[0], (pid, m)
            lp = masked_logp(model, ids, [i])[0]
            ref += float(lp[TOK[m[-1]]] - lp[TOK[m[0]]])
        e = rel_err(float(r["score"]), ref)
        worst["score"] = max(worst["score"], e)
        if e > TOL:
            check(False, "(c) %s %s: score %s vs %.9g" % (pid, mut, r["score"], ref))
    check(worst["score"] <= TOL, "(c) %d variant scores: worst relative error %.2e" %
          (len(rows), worst["score"]))
    check(list(rows[0].keys()) == ["note", "mutation", "id", "dms", "score"] and
          all(r["note"] == "row %d, quoted" % k and r["dms"] == "0.%d" % k
              for k, r in enumerate(rows)),
          "(c) the table's columns and values kept, score appended: %s" % list(rows[0].keys()))
    column_option_checks(work, hf, fasta, proteins, rows)


def same_scores(got, want):
    return len(got) == len(want) and all(
        rel_err(float(g["score"]), float(w)) <= TOL for g, w in zip(got, want))


def column_option_checks(work, hf, fasta, proteins, rows):
    # --seq-col/--mutation-col over a TSV: the same scores as the CSV's
    tsv = os.path.join(work, "variants.tsv")
    with open(tsv, "w") as f:
        f.write("wt_name\tmutant_text\n")
        f.writelines("%s\t%s\n" % v for v in VARIANTS)
    out = os.path.join(work, "var-cols.csv")
    rc, so, se = run([hf, fasta, "--variants", tsv, "--seq-col", "wt_name", "--mutation-col",
                      "mutant_text", "-o", out, "--quiet"])
    got = read_csv(out) if rc == 0 else []
    check(rc == 0 and same_scores(got, [r["score"] for r in rows]) and
          list(got[0].keys()) == ["wt_name", "mutant_text", "score"],
          "(c) --seq-col/--mutation-col over a TSV score as the CSV (rc %d %s)" %
          (rc, se.strip()[-200:]))
    # fair-esm's layout: one wild type, a 'mutant' column and no id column
    one = os.path.join(work, "p7.fa")
    with open(one, "w") as f:
        f.write(">p7\n%s\n" % dict(proteins)["p7"])
    fe = os.path.join(work, "fair.csv")
    p7 = [m for pid, m in VARIANTS if pid == "p7"]
    with open(fe, "w") as f:
        f.write("mutant\n" + "".join(m + "\n" for m in p7))
    out = os.path.join(work, "var-fair.csv")
    rc, so, se = run([hf, one, "--variants", fe, "-o", out, "--quiet"])
    got = read_csv(out) if rc == 0 else []
    want = [r["score"] for r in rows if r["id"] == "p7"]
    check(rc == 0 and same_scores(got, want) and
          list(got[0].keys()) == ["mutant", "score"],
          "(c) one wild type and a 'mutant' column (fair-esm's layout) (rc %d %s)" %
          (rc, se.strip()[-200:]))


def error_checks(work, hf, fasta, proteins):
    precious = os.path.join(work, "exists.csv")
    with open(precious, "w") as f:
        f.write("precious\n")
    rc, so, se = run([hf, fasta, "-o", precious])
    with open(precious) as f:
        kept = f.read() == "precious\n"
    check(rc != 0 and kept and "exists" in se,
          "(d) an existing OUT is refused (rc %d) and unchanged: %s" % (rc, se.strip()))
    seqs = dict(proteins)
    wrong = "W" if seqs["p4"][4] != "W" else "A"
    cases = [  # (csv text, what the message must hold)
        ("id,mutation\np3,M1A\np4,%s5G\n" % wrong, "line 3"),
        ("id,mutation\np9,M1A\n", "line 2"),
        ("id,mutation\np3,M1A\np3,M2A\n", "line 3"),          # past the end of p3 (1 residue)
        ("id,mutation\np4,K2R\np4,KK2R\n", "line 3"),         # malformed
        ("id,mutation\np4,K2R:K2A\n", "line 2"),              # same position twice
        ("id,mut\np4,K2R\n", "mutation"),                     # missing column
        ("id,mutation\np4\n", "line 2"),                      # short line
        ("id,mutation,score\np4,K2R,1\n", "column 'score'"),   # the output's column
        ("wt,mutation\np4,K2R\n", "'id'"),                     # several wild types, no id
    ]
    for k, (text, want) in enumerate(cases):
        vcsv = os.path.join(work, "bad%d.csv" % k)
        with open(vcsv, "w") as f:
            f.write(text)
        out = os.path.join(work, "bad%d.out.csv" % k)
        rc, so, se = run([hf, fasta, "--variants", vcsv, "-o", out])
        check(rc == 1 and want in se and not leftovers(work, "bad%d.out" % k),
              "(d) bad CSV %d fails (rc %d) naming '%s', no output left: %s" %
              (k, rc, want, se.strip().splitlines()[:1]))


def interrupt_check(work, hf):
    big = os.path.join(work, "big.fa")
    g = torch.Generator().manual_seed(3)
    with open(big, "w") as f:
        for k in range(3000):
            f.write(">b%d\n%s\n" % (k, "".join(AA[int(x)] for x in
                                               torch.randint(0, 20, (60,), generator=g))))
    out = os.path.join(work, "big.csv")
    p = subprocess.Popen([CLI, "score", hf, big, "-o", out], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None and not leftovers(work, "big.csv.tmp"):
        time.sleep(0.05)
    time.sleep(0.3)
    if p.poll() is not None:
        print("note: the interrupt check was not run (the scoring ended before the signal)")
        p.communicate()
        return
    p.send_signal(signal.SIGINT)
    so, se = p.communicate(timeout=120)
    check(p.returncode == 128 + signal.SIGINT and not leftovers(work, "big.csv"),
          "(d) SIGINT: exit %d, no OUT or temporary file left: %s" %
          (p.returncode, se.strip().splitlines()[-1:]))


def main():
    g = torch.Generator().manual_seed(7)
    lengths = [("p1", 7), ("p2", 20), ("p3", 1), ("p4", 33), ("p5", 62), ("p6", 63), ("p7", 90)]
    fixes = {"p3": {1: "M"}, "p4": {2: "K", 10: "V", 21: "X"}, "p5": {33: "A"},
             "p6": {63: "G"}, "p7": {5: "A", 70: "L", 90: "E"}}  # letters the variants name
    proteins = []
    for pid, n in lengths:
        seq = [AA[int(x)] for x in torch.randint(0, 20, (n,), generator=g)]
        for pos, aa in fixes.get(pid, {}).items():
            seq[pos - 1] = aa
        proteins.append((pid, "".join(seq)))
    with tempfile.TemporaryDirectory() as work:
        model = make_model(work)
        hf = os.path.join(work, "hf")
        fasta = os.path.join(work, "in.fasta")
        with open(fasta, "w") as f:
            for k, (pid, seq) in enumerate(proteins):
                f.write(">%s some description\n" % pid)
                for s in range(0, len(seq), 60):
                    f.write(seq[s:s + 60] + "\n")
                if pid == "p3":
                    f.write(">empty\n")
        proteins.insert(3, ("empty", ""))
        rows = pll_checks(model, work, hf, fasta, proteins)
        if rows:
            dataset_check(work, hf, fasta, rows)
        variant_checks(model, work, hf, fasta, proteins)
        error_checks(work, hf, fasta, proteins)
        interrupt_check(work, hf)
    print("worst relative errors: pll/pppl %.2e, masked-marginal scores %.2e" %
          (worst["pll"], worst["score"]))
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
