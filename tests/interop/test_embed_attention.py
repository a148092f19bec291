#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`esmtrain-example embed --include attention` against transformers'
output_attentions in float64, on real UniProt proteins (mmseqs2's example
DB.fasta.gz).

A random 2-layer model (hidden 32, 4 heads, max_position_embeddings 68: a
window of 64 residues; LayerNorms and biases perturbed, sharper attention)
on 5 proteins of 10..100 residues (the longest truncated to the window) and
an empty record:
(a) --include mean,attention --repr-layers 1,2 (npy and safetensors):
    attn.layer1/2 protein k's [heads, n, n] at attn.offsets[k]..[k+1]
    against transformers' attentions[l - 1] without <cls>/<eos>: relative
    error <= 1e-5 per protein; offsets; the estimate line printed first;
(b) refusals, each with a message and no OUT: a protein over
    --max-attention-bytes (named, with its length), --repr-layers 0,
    --long windows;
(c) a hard kill (SIGKILL) mid-run, then the same command: the arrays equal
    an uninterrupted run's and OUT holds only embed's own files.
Usage: test_embed_attention.py ESMTRAIN_EXAMPLE SOURCE_DIR. Exit 77 = skipped.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    import transformers  # noqa: F401  (interop_checks.random_esm)
except Exception as e:  # pragma: no cover
    print("skipped: numpy, torch, transformers or safetensors not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

BIN, SRC = sys.argv[1], sys.argv[2]
DB = os.environ.get("ESMT_EMBED_TEST_FASTA", "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz")
TOL_REL = 1e-5
W = 64
LENGTHS = [10, 33, 64, 80, 100]
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
from esm_fasta import CLS, EOS, read_fasta, tokens, write_fasta  # noqa: E402
from interop_checks import check, pick_near, random_esm  # noqa: E402
import interop_checks  # noqa: E402


def make_model():
    return random_esm(32, 2, 4, 128, W + 4, 7)


def embed(mdir, fasta, out, *extra):
    return subprocess.run([BIN, "embed", mdir, fasta, "-o", out, "--threads", "2",
                           "--include", "mean,attention", "--repr-layers", "1,2"] + list(extra),
                          capture_output=True, text=True)


def arrays(out, fmt):
    if fmt == "safetensors":
        t = load_file(os.path.join(out, "embeddings.safetensors"))
        return {k: t[k] for k in ("attn.offsets", "attn.layer1", "attn.layer2")}
    return {k: np.load(os.path.join(out, k + ".npy"))
            for k in ("attn.offsets", "attn.layer1", "attn.layer2")}


def part_a(work, mdir, recs, hf64):
    print("== (a) attention maps against transformers' output_attentions")
    fasta = os.path.join(work, "in.fasta")
    write_fasta(fasta, recs)
    H = hf64.config.num_attention_heads
    kept = [min(len(s), W) for _, s in recs]
    ref = []
    with torch.no_grad():
        for (_, s), n in zip(recs, kept):
            ids = torch.tensor([[CLS] + tokens(s[:n]) + [EOS]])
            att = hf64.esm(ids, attention_mask=torch.ones_like(ids), output_attentions=True)
            ref.append([a[0, :, 1:n + 1, 1:n + 1].numpy() for a in att.attentions])
    for fmt in ("npy", "safetensors"):
        out = os.path.join(work, "out-" + fmt)
        p = embed(mdir, fasta, out, "--format", fmt, "--max-attention-bytes", "0")
        if not check(p.returncode == 0, "%s: embed exited %d: %s" % (fmt, p.returncode, p.stderr)):
            continue
        first = p.stderr.strip().splitlines()[0] if p.stderr.strip() else ""
        print("  %s" % first)
        check(first.startswith("embed: attention maps: %d proteins" % len(recs)),
              "%s: no estimate line first: %r" % (fmt, first))
        a = arrays(out, fmt)
        offs = np.concatenate([[0], np.cumsum([H * n * n for n in kept])])
        check(np.array_equal(a["attn.offsets"], offs), "%s: offsets %s" % (fmt, a["attn.offsets"]))
        for li, l in enumerate((1, 2)):
            flat = a["attn.layer%d" % l]
            check(flat.size == offs[-1], "%s: layer %d holds %d values" % (fmt, l, flat.size))
            for k, n in enumerate(kept):
                if n == 0 or flat.size != offs[-1]:
                    continue
                got = flat[offs[k]:offs[k + 1]].reshape(H, n, n).astype(np.float64)
                r = ref[k][l - 1]
                e = float(np.linalg.norm(got - r) / np.linalg.norm(r))
                if fmt == "npy":
                    print("  layer %d protein %d (%3d of %3d residues)  rel %.2e"
                          % (l, k, n, len(recs[k][1]), e))
                check(e <= TOL_REL, "%s: layer %d protein %d relative error %.2e" % (fmt, l, k, e))


def refused(tag, p, out, words, status=None):
    check(p.returncode != 0 and (status is None or p.returncode == status),
          "%s: exit status %d" % (tag, p.returncode))
    check(all(w in p.stderr for w in words), "%s: message %r lacks %s" % (tag, p.stderr, words))
    check(not os.path.exists(out), "%s: %s was created" % (tag, out))
    print("  %-14s %s" % (tag, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "-"))


def part_b(work, mdir, recs):
    print("== (b) refusals")
    fasta = os.path.join(work, "in.fasta")
    pid, s = recs[4]
    # 2 layers x 4 heads x 64^2 x 4 bytes = 131072 for the truncated one; 80 residues -> 64 too
    out = os.path.join(work, "capped")
    refused("over the cap", embed(mdir, fasta, out, "--max-attention-bytes", "100000"), out,
            [recs[2][0], "64 residues", "--max-attention-bytes", "nothing was written"])
    out = os.path.join(work, "layer0")
    p = subprocess.run([BIN, "embed", mdir, fasta, "-o", out, "--include", "attention",
                        "--repr-layers", "0,1"], capture_output=True, text=True)
    refused("layer 0", p, out, ["layer 0", "no attention"])
    out = os.path.join(work, "windows")
    refused("--long windows", embed(mdir, fasta, out, "--long", "windows"), out,
            ["--long windows", "not averaged"], 2)


def part_c(work, mdir, recs):
    print("== (c) SIGKILL, then the same command")
    many = [("p%d" % i, s) for i in range(150) for _, s in recs[1:2]]
    fasta = os.path.join(work, "many.fasta")
    write_fasta(fasta, many)
    whole = os.path.join(work, "whole")
    args = ["--batch-tokens", "100"]
    check(embed(mdir, fasta, whole, *args).returncode == 0, "uninterrupted run")
    out = os.path.join(work, "killed")
    proc = subprocess.Popen([BIN, "embed", mdir, fasta, "-o", out, "--threads", "2", "--include",
                             "mean,attention", "--repr-layers", "1,2", "--quiet"] + args,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while not os.path.exists(os.path.join(out, "attn.layer1.npy")) and time.time() - t0 < 30:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = time.time() - t0
    p = embed(mdir, fasta, out, *args)
    check(p.returncode == 0, "run after SIGKILL exited %d: %s" % (p.returncode, p.stderr))
    a, b = arrays(whole, "npy"), arrays(out, "npy")
    same = all(np.array_equal(a[k], b[k]) for k in a)
    left = sorted(set(os.listdir(out)) - set(os.listdir(whole)))
    print("  killed after %.2f s; the next run's arrays equal an uninterrupted run's: %s; "
          "files not in the uninterrupted run: %s" % (killed, same, left or "none"))
    check(same, "arrays after SIGKILL and resume differ")
    check(not left, "files left behind: %s" % left)


def main():
    if not os.path.exists(DB):
        print("skipped: %s not found (Debian package mmseqs2)" % DB)
        return 77
    torch.set_num_threads(2)
    t0 = time.time()
    recs = pick_near(read_fasta(DB), LENGTHS, 2 * max(LENGTHS)) + [("blank", "")]
    hf = make_model()
    with tempfile.TemporaryDirectory() as work:
        mdir = os.path.join(work, "model")
        hf.save_pretrained(mdir, safe_serialization=True)
        part_a(work, mdir, recs, make_model().double().eval())
        part_b(work, mdir, recs)
        part_c(work, mdir, recs)
    return interop_checks.summary(time.time() - t0)


if __name__ == "__main__":
    sys.exit(main())
