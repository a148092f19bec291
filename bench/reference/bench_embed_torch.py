#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch peer of `esmtrain-example embed`: transformers' EsmModel, fp32,
eval, torch.no_grad, on the CPU, the mean over residues of the last layer
(after the final LayerNorm), as fair-esm's extract.py --include mean does.

    bench_embed_torch.py make-model DIR          # HF-initialised esm2_t6_8M (seed 0)
    bench_embed_torch.py sample DB.fasta.gz N EVERY OUT.fasta
    bench_embed_torch.py synth DB.fasta.gz RESIDUES OUT.fasta
    bench_embed_torch.py measure RESULT_FILE -- COMMAND...   # wall s, peak RSS of COMMAND
    bench_embed_torch.py run --model DIR --fasta F --threads N --batch-tokens B
                             [--truncate 1022 | --long windows --window 1022 --stride 511]
                             [--save-mean M.npy] [--compare ESMT_OUT/mean.layer6.npy]

`run` batches as embed does (and much as fair-esm's extract.py): sequences
(windows) sorted longest first, a batch the next max(1, B // (longest + 2))
of them for --batch-tokens B, right-padded with <pad> and an attention
mask (embed sorts within chunks of >= 131072 residues, this all at once). Long
proteins: --truncate keeps the first T residues (default 1022 for ESM-2,
max_position_embeddings - 4: extract.py's truncation_seq_length and embed's
window; bench_embed_vs_torch.sh passes the window embed.json reports);
--long windows embeds windows of W residues at 0, S, 2S, ..., the last one
ending at the protein's end, a residue's row being the average over its
windows (embed's rule). Timed: reading and tokenizing the FASTA, the
forward passes, the means and saving them; not the imports or the model
load. The last line is machine readable:

    TORCH_RESULT proteins=<n> residues=<n> seconds=<f> proteins_per_s=<f>
                 residues_per_s=<f> peak_rss_mb=<f> rss_after_load_mb=<f>

Use Debian's /usr/bin/python3 (scripts/setup_reference_env.sh).
"""
import argparse
import os
import resource
import subprocess
import sys
import time

# esm_fasta.py: the reference tools' FASTA and token helpers (tests/reference)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "reference"))
from esm_fasta import CLS, EOS, PAD, TOK, UNK, read_fasta, window_starts, write_fasta  # noqa: E402






def cmd_make_model(a):
    if os.path.exists(os.path.join(a.dir, "config.json")):
        return 0
    import torch
    from transformers import EsmConfig, EsmForMaskedLM
    cfg = EsmConfig(vocab_size=33, hidden_size=320, num_hidden_layers=6, num_attention_heads=20,
                    intermediate_size=1280, max_position_embeddings=1026,
                    position_embedding_type="rotary", token_dropout=True, pad_token_id=1,
                    mask_token_id=32, emb_layer_norm_before=False, layer_norm_eps=1e-5,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(a.seed)
    EsmForMaskedLM(cfg).save_pretrained(a.dir, safe_serialization=True)
    return 0


def cmd_sample(a):
    recs = read_fasta(a.db)[::a.every][:a.n]
    write_fasta(a.out, recs)
    lens = sorted(len(s) for _, s in recs)
    print("SAMPLE proteins=%d residues=%d median=%d max=%d over1024=%d" % (
        len(recs), sum(lens), lens[len(lens) // 2], lens[-1], sum(n > 1024 for n in lens)))
    return 0


def cmd_synth(a):
    seq = ""
    for _, s in read_fasta(a.db):
        seq += s
        if len(seq) >= a.residues:
            break
    write_fasta(a.out, [("synthetic_%d real proteins concatenated" % a.residues,
                         seq[:a.residues])])
    print("SYNTH proteins=1 residues=%d" % a.residues)
    return 0


def cmd_measure(a):
    """Run COMMAND; write 'wall_s peak_rss_kb exit' to RESULT_FILE (the
    child's ru_maxrss: this process has no other child)."""
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    t0 = time.perf_counter()
    rc = subprocess.call(cmd)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(a.result, "w") as f:
        f.write("%.3f %d %d\n" % (wall, rss, rc))
    return rc




def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def cmd_run(a):
    # the BLAS and OpenMP pools size themselves when torch loads
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.blas_threads or a.threads)
    import numpy as np
    import torch
    from transformers import EsmModel
    from transformers.utils import logging
    logging.set_verbosity_error()
    torch.set_num_threads(a.threads)
    model = EsmModel.from_pretrained(a.model, add_pooling_layer=False).eval()
    W = model.config.max_position_embeddings - 4  # embed's window (1022 for ESM-2)
    trunc = a.truncate if a.truncate else W
    d = model.config.hidden_size
    load_rss = rss_mb()

    t0 = time.perf_counter()
    recs = read_fasta(a.fasta)
    toks = [np.array([TOK.get(c.upper(), UNK) for c in s], dtype=np.int64) for _, s in recs]
    residues = sum(len(t) for t in toks)
    # pieces: (protein, start, tokens); one per protein unless windowed
    pieces = []
    for k, t in enumerate(toks):
        if a.long == "windows":
            for s in window_starts(len(t), a.window or W, a.stride or (a.window or W) // 2):
                pieces.append((k, s, t[s:s + (a.window or W)]))
        else:
            pieces.append((k, 0, t[:trunc]))
    # longest first; a batch: the next max(1, budget // (longest + 2)) pieces
    order = sorted(range(len(pieces)), key=lambda i: (-len(pieces[i][2]), pieces[i][0],
                                                      pieces[i][1]))
    batches, at = [], 0
    while at < len(order):
        B = max(1, a.batch_tokens // (len(pieces[order[at]][2]) + 2))
        batches.append(order[at:at + B])
        at += B
    windowed = a.long == "windows"
    if windowed:  # per-residue accumulators (embed's per_tok rows)
        acc = [np.zeros((len(t), d), dtype=np.float32) for t in toks]
        cnt = [np.zeros(len(t), dtype=np.float32) for t in toks]
    mean = np.zeros((len(toks), d), dtype=np.float32)
    with torch.no_grad():
        for b in batches:
            T = max(len(pieces[i][2]) for i in b) + 2
            ids = torch.full((len(b), T), PAD, dtype=torch.long)
            for r, i in enumerate(b):
                t = pieces[i][2]
                ids[r, 0] = CLS
                ids[r, 1:len(t) + 1] = torch.from_numpy(t)
                ids[r, len(t) + 1] = EOS
            h = model(input_ids=ids, attention_mask=(ids != PAD).long()).last_hidden_state
            for r, i in enumerate(b):
                k, s, t = pieces[i]
                rows = h[r, 1:len(t) + 1]
                if windowed:
                    acc[k][s:s + len(t)] += rows.numpy()
                    cnt[k][s:s + len(t)] += 1
                else:
                    mean[k] = rows.mean(0).numpy()
    if windowed:
        for k in range(len(toks)):
            mean[k] = (acc[k] / cnt[k][:, None]).mean(0)
    if a.save_mean:
        np.save(a.save_mean, mean)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("torch: %d proteins (%d pieces, %d batches), %d residues, %.2f s, %d threads" % (
        len(toks), len(pieces), len(batches), residues, dt, a.threads))
    if a.compare:
        theirs = np.load(a.compare)
        if theirs.shape != mean.shape:
            print("COMPARE esmtrain %s vs torch %s: shapes differ" % (theirs.shape, mean.shape))
        else:
            diff = theirs.astype(np.float64) - mean
            rel = np.linalg.norm(diff, axis=1) / np.linalg.norm(mean, axis=1)
            print("COMPARE esmtrain vs torch mean: relative error overall %.2e, worst protein "
                  "%.2e (#%d), max abs %.2e" % (np.linalg.norm(diff) / np.linalg.norm(mean),
                                                rel.max(), rel.argmax(), np.abs(diff).max()))
    print("TORCH_RESULT proteins=%d residues=%d seconds=%.3f proteins_per_s=%.2f "
          "residues_per_s=%.1f peak_rss_mb=%.1f rss_after_load_mb=%.1f" % (
              len(toks), residues, dt, len(toks) / dt, residues / dt, peak, load_rss))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("make-model")
    s.add_argument("dir")
    s.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("sample")
    s.add_argument("db")
    s.add_argument("n", type=int)
    s.add_argument("every", type=int)
    s.add_argument("out")
    s = sub.add_parser("synth")
    s.add_argument("db")
    s.add_argument("residues", type=int)
    s.add_argument("out")
    s = sub.add_parser("measure")
    s.add_argument("result")
    s.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("run")
    s.add_argument("--model", required=True)
    s.add_argument("--fasta", required=True)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--blas-threads", type=int, default=0,
                   help="OPENBLAS/MKL_NUM_THREADS (default: --threads)")
    s.add_argument("--batch-tokens", type=int, default=4096)
    s.add_argument("--truncate", type=int, default=0, help="residues kept (0: max_position_embeddings - 4)")
    s.add_argument("--long", choices=("truncate", "windows"), default="truncate")
    s.add_argument("--window", type=int, default=0)
    s.add_argument("--stride", type=int, default=0)
    s.add_argument("--save-mean")
    s.add_argument("--compare")
    a = p.parse_args()
    return {"make-model": cmd_make_model, "sample": cmd_sample, "synth": cmd_synth,
            "measure": cmd_measure, "run": cmd_run}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
