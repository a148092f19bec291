#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Attention maps and `esmtrain-example contacts` against transformers'
EsmForMaskedLM in float64 and fair-esm's ESM2 module holding the same
weights (tests/reference/fair_esm_model.py; float64 but for its softmax,
which fair-esm computes in float32), on real UniProt proteins (mmseqs2's
example DB.fasta.gz).

A random 3-layer model (hidden 64, 4 heads, max_position_embeddings 1026:
a window of 1022 residues; LayerNorms and biases perturbed) with a random
contact head, saved as a Hugging Face directory and imported by esmtrain,
on 5 proteins of 30..1000 residues:
(a) esmt_model_infer's attention probabilities (ESMT_INFER_ATTENTION, via
    interop_tool) of right-padded rows (the three shortest proteins) and of
    packed rows (the four shortest) against
    transformers' output_attentions and fair-esm's need_head_weights (one
    protein a forward pass, no padding): relative error <= 1e-5 per
    protein;
(b) `contacts` (one safetensors file) against transformers'
    predict_contacts, fair-esm's predict_contacts one protein at a time
    and fair-esm's of the three shortest in one padded batch (its
    handling of <cls>, <eos> and padding): relative error <= 1e-5 per
    protein; offsets, lengths and ids;
(c) bad inputs, each a clear message and no OUT: an existing OUT (left
    unchanged), a model without a contact head, one whose head is all
    zeros, an empty record, a protein longer than the window;
(d) `contacts --train-head` on synthetic contacts (no PDB-derived contact
    set ships in a Debian or PyPI package the tests may use): the top 15%
    of transformers' predicted pairs (>= 6 apart) of 4 proteins under the
    random head are the contacts; the model without a head is fitted and
    exported, loaded by transformers, and its predict_contacts ranks >= 90%
    of those contacts in its top |contacts| pairs, its weights within a
    cosine of 0.9 of the random head's; a pairs file naming an unknown
    protein is refused with no OUT.
(e) `contacts --long windows` on a UniProt protein of about 1,500
    residues: embed's windows (1022 residues, stride 511), transformers'
    predict_contacts of each window averaged where windows overlap, 0 where
    no window holds both residues: relative error <= 1e-5;
(f) a SIGKILL of `contacts` mid-run leaves its temporaries, named
    OUT.PID.NAME.tmp, and no OUT; the next run into the same OUT removes
    them (saying so), leaves alone a same-named file of a running process's
    and a symbolic link, and writes OUT.
(h) `contacts --format npy`: a new directory of ID.npy per protein and
    index.tsv whose maps equal (b)'s safetensors maps bit for bit, with
    ids made safe for file names and unique; an existing OUT (an empty
    directory too) refused and kept; a SIGKILL mid-run leaves no OUT, only
    OUT.PID.tmp, which the next run into the same OUT removes (saying so);
    a same-named directory holding another file is left alone.
(i) `contacts --png DIR` beside each format: one ID.png per protein in the
    new DIR (and index.tsv), each a valid PNG (chunk CRCs, IHDR 900 x 800,
    IDAT inflating to its rows); an existing DIR, DIR equal to OUT and DIR
    in a missing folder are refused with neither DIR nor OUT written.
(g) scripts/pdb_contacts.py on a handmade PDB file (a second chain, a
    water, a residue without CA, an alternate location: ignored) gives the
    sequence and the C-beta < 8 A pairs >= 6 apart computed here;
    scripts/contact_precision.py on (b)'s output scores 1 against pairs
    that are each protein's top long-range predictions and 0 against none.
The float64 references are cached (tests/reference/ref_cache.py).
Usage: test_contacts.py ESMTRAIN_EXAMPLE INTEROP_TOOL SOURCE_DIR. Exit 77 = skipped.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import esm  # noqa: F401  (fair-esm)
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from safetensors.torch import load_file as load_torch, save_file as save_torch
    from transformers import EsmForMaskedLM
except Exception as e:  # pragma: no cover
    print("skipped: numpy, torch, transformers, fair-esm or safetensors not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

BIN, TOOL, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
DB = os.environ.get("ESMT_CONTACTS_TEST_FASTA", "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz")
TOL_REL = 1e-5
LENGTHS = [30, 97, 250, 512, 1000]
ATTENTION_PROTEINS = 4  # (a) compares the maps of the four shortest: the references hold these
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
from esm_fasta import CLS, EOS, PAD, read_fasta, tokens, write_fasta  # noqa: E402
import esm_fasta  # noqa: E402
import fair_esm_model  # noqa: E402
from interop_checks import check, pick_near, random_esm  # noqa: E402
import interop_checks  # noqa: E402
import ref_cache  # noqa: E402


def rel(a, b):
    d = a.astype(np.float64) - b
    return float(np.linalg.norm(d) / np.linalg.norm(b)), float(np.abs(d).max())


def make_model():
    hf = random_esm(64, 3, 4, 256, 1026, 42)
    with torch.no_grad():
        hf.esm.contact_head.regression.weight.copy_(
            torch.randn_like(hf.esm.contact_head.regression.weight) * 0.5)
        hf.esm.contact_head.regression.bias.fill_(-1.5)
    return hf


def reference(hf64, seqs):
    """Per protein: attention [L, H, n+2, n+2] (the first ATTENTION_PROTEINS)
    and contacts [n, n], float64."""
    out = {}
    with torch.no_grad():
        for k, s in enumerate(seqs):
            ids = torch.tensor([[CLS] + tokens(s) + [EOS]])
            mask = torch.ones_like(ids)
            if k < ATTENTION_PROTEINS:
                att = hf64.esm(ids, attention_mask=mask, output_attentions=True).attentions
                out["att%d" % k] = torch.stack([a[0] for a in att]).numpy()
            out["con%d" % k] = hf64.predict_contacts(ids, mask)[0].numpy()
    return out


def cached_reference(hf64, seqs):
    import inspect
    import transformers
    key = ref_cache.Key("test_contacts.reference v1")
    key.add(inspect.getsource(reference)).add(inspect.getsource(esm_fasta))
    key.add((torch.__version__, transformers.__version__, np.__version__))
    key.add(hf64.config.to_json_string(use_diff=False))
    for name, t in sorted(hf64.state_dict().items()):
        key.add(name).add(t.detach().cpu().numpy())
    key.add(list(seqs))
    return ref_cache.cached("contacts-reference-" + key.hexdigest(),
                            lambda: reference(hf64, seqs))


def fair_reference(fair, seqs):
    """fair-esm's attention [L, H, n+2, n+2] (the first ATTENTION_PROTEINS)
    and contacts [n, n] per protein, and "bat%d": contacts of the three
    shortest from one padded batch."""
    out = {}
    with torch.no_grad():
        for k, s in enumerate(seqs):
            ids = torch.tensor([[CLS] + tokens(s) + [EOS]])
            r = fair(ids, need_head_weights=True, return_contacts=True)
            if k < ATTENTION_PROTEINS:
                out["att%d" % k] = r["attentions"][0].numpy()
            out["con%d" % k] = r["contacts"][0].numpy()
        T = max(len(seqs[k]) for k in range(3)) + 2
        ids = torch.full((3, T), PAD, dtype=torch.long)
        for k in range(3):
            ids[k, :len(seqs[k]) + 2] = torch.tensor([CLS] + tokens(seqs[k]) + [EOS])
        c = fair.predict_contacts(ids)
        for k in range(3):
            n = len(seqs[k])
            out["bat%d" % k] = c[k, :n, :n].numpy()
    return out


def cached_fair_reference(hf, seqs):
    import esm
    import inspect
    key = ref_cache.Key("test_contacts.fair_reference v1")
    key.add(inspect.getsource(fair_reference)).add(inspect.getsource(fair_esm_model))
    key.add(inspect.getsource(esm_fasta))
    key.add((torch.__version__, esm.__version__, np.__version__))
    key.add(hf.config.to_json_string(use_diff=False))
    for name, t in sorted(hf.state_dict().items()):
        key.add(name).add(t.detach().cpu().numpy())
    key.add(list(seqs))
    return ref_cache.cached("contacts-fair-esm-" + key.hexdigest(),
                            lambda: fair_reference(fair_esm_model.from_hf(hf), seqs))


def windowed_reference(hf64, seq, W, S):
    """Contacts [n, n] of a protein over the window, as embed's windows
    averaged (float64)."""
    n = len(seq)
    acc, cnt = np.zeros((n, n)), np.zeros((n, n))
    with torch.no_grad():
        for s in esm_fasta.window_starts(n, W, S):
            ids = torch.tensor([[CLS] + tokens(seq[s:s + W]) + [EOS]])
            acc[s:s + W, s:s + W] += hf64.predict_contacts(ids, torch.ones_like(ids))[0].numpy()
            cnt[s:s + W, s:s + W] += 1
    return {"con": np.divide(acc, cnt, out=np.zeros_like(acc), where=cnt > 0)}


def part_e(work, mdir, rec):
    print("== (e) --long windows")
    fasta = os.path.join(work, "long.fasta")
    write_fasta(fasta, [rec])
    out = os.path.join(work, "long.safetensors")
    p = subprocess.run([BIN, "contacts", mdir, fasta, "-o", out, "--long", "windows",
                        "--threads", "2", "--quiet"], capture_output=True, text=True)
    if not check(p.returncode == 0, "--long windows exited %d: %s" % (p.returncode, p.stderr)):
        return
    import inspect
    import transformers
    hf64 = make_model().double().eval()
    key = ref_cache.Key("test_contacts.windowed_reference v1")
    key.add(inspect.getsource(windowed_reference)).add(inspect.getsource(esm_fasta))
    key.add((torch.__version__, transformers.__version__, np.__version__))
    for name, t in sorted(hf64.state_dict().items()):
        key.add(name).add(t.detach().cpu().numpy())
    key.add(rec[1])
    ref = ref_cache.cached("contacts-windowed-" + key.hexdigest(),
                           lambda: windowed_reference(hf64, rec[1], 1022, 511))["con"]
    n = len(rec[1])
    c = load_file(out)["contacts"].reshape(n, n)
    e, m = rel(c, ref)
    print("  %d residues, windows at %s: rel %.2e  max abs %.2e; %d pairs in no window (0)"
          % (n, esm_fasta.window_starts(n, 1022, 511), e, m, int((ref == 0).sum())))
    check(e <= TOL_REL, "--long windows: relative error %.2e" % e)
    check(bool(np.all(c[ref == 0] == 0)), "--long windows: a pair in no window is not 0")


def part_f(work, mdir, recs):
    print("== (f) SIGKILL, then the next run")
    import signal
    fasta = os.path.join(work, "kill.fasta")
    write_fasta(fasta, [("k%d" % i, s) for i in range(40) for _, s in recs[2:3]])
    out = os.path.join(work, "killed.safetensors")
    # a file of a running process's (pid 1) and a link, named as temporaries
    live = "%s.1.contacts.tmp" % out
    link = "%s.999999999.offsets.tmp" % out
    with open(live, "w") as f:
        f.write("not contacts'\n")
    os.symlink(live, link)
    proc = subprocess.Popen([BIN, "contacts", mdir, fasta, "-o", out, "--threads", "2",
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine = "%s.%d.contacts.tmp" % (out, proc.pid)
    t0 = time.time()
    while not os.path.exists(mine) and time.time() - t0 < 30:
        time.sleep(0.005)
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = sorted(n for n in os.listdir(work) if n.startswith("killed.safetensors.%d." % proc.pid))
    print("  killed: left %s" % left)
    check(len(left) == 3 and not os.path.exists(out), "after SIGKILL: %s" % left)
    p = contacts(mdir, fasta, out)
    p2 = subprocess.run([BIN, "contacts", mdir, fasta, "-o", out + "2", "--quiet"],
                        capture_output=True, text=True)  # another OUT: not its temporaries
    now = sorted(n for n in os.listdir(work) if n.startswith("killed.safetensors"))
    print("  next run: exit %d, %d removal lines; files now %s"
          % (p.returncode, p.stderr.count("removed"), now))
    check(p.returncode == 0 and p.stderr.count("left by a run that was killed") == 3,
          "next run: %d %r" % (p.returncode, p.stderr))
    check(p2.returncode == 0, "run into another OUT: %r" % p2.stderr)
    check(now == sorted(["killed.safetensors", "killed.safetensors2", os.path.basename(live),
                         os.path.basename(link)]), "files after the next run: %s" % now)
    check(open(live).read() == "not contacts'\n", "the live process's file changed")


def npy_load(path):
    return np.load(path, allow_pickle=False)


def part_h(work, mdir, recs):
    print("== (h) --format npy")
    ids = ["a/b|c", "a_b_c", ".hidden"] + [i for i, _ in recs[:2]]
    named = [(i, s) for i, (_, s) in zip(ids, [recs[0], recs[1], recs[0], recs[0], recs[1]])]
    fasta = os.path.join(work, "npy.fasta")
    write_fasta(fasta, named)
    ref = os.path.join(work, "npy_ref.safetensors")
    check(contacts(mdir, fasta, ref).returncode == 0, "safetensors run for --format npy")
    got = load_file(ref)
    out = os.path.join(work, "maps")
    p = subprocess.run([BIN, "contacts", mdir, fasta, "-o", out, "--format", "npy", "--quiet"],
                       capture_output=True, text=True)
    if not check(p.returncode == 0, "--format npy exited %d: %r" % (p.returncode, p.stderr)):
        return
    rows = [ln.split("\t") for ln in open(os.path.join(out, "index.tsv")).read().splitlines()]
    want_files = ["a_b_c.npy", "a_b_c~2.npy", "_hidden.npy"] + [
        i.replace("|", "_") + ".npy" for i in ids[3:]]
    check(rows[0] == ["id", "length", "file"], "index.tsv header %r" % rows[0])
    check([r[0] for r in rows[1:]] == ids and [r[2] for r in rows[1:]] == want_files
          and [int(r[1]) for r in rows[1:]] == [len(s) for _, s in named],
          "index.tsv rows %r" % rows[1:])
    check(sorted(os.listdir(out)) == sorted(want_files + ["index.tsv"]),
          "files %s" % sorted(os.listdir(out)))
    same = 0
    for k, (_, s) in enumerate(named):
        n = len(s)
        m = npy_load(os.path.join(out, want_files[k]))
        c = got["contacts"][got["offsets"][k]:got["offsets"][k + 1]].reshape(n, n)
        same += m.dtype == np.float32 and m.shape == (n, n) and m.tobytes() == c.tobytes()
    print("  %d/%d maps equal to the safetensors maps bit for bit; files %s"
          % (same, len(named), want_files))
    check(same == len(named), "--format npy maps differ from the safetensors maps")
    # an existing OUT, a file or an empty directory: refused, kept
    for tag, make in (("file", lambda q: open(q, "w").write("mine\n")), ("empty dir", os.mkdir)):
        q = os.path.join(work, "taken_" + tag.replace(" ", "_"))
        make(q)
        p = subprocess.run([BIN, "contacts", mdir, fasta, "-o", q, "--format", "npy"],
                           capture_output=True, text=True)
        kept = open(q).read() == "mine\n" if tag == "file" else os.listdir(q) == []
        print("  existing OUT (%s): exit %d, %s" % (tag, p.returncode, p.stderr.strip()))
        check(p.returncode != 0 and "exists" in p.stderr and kept, "existing %s OUT" % tag)
    # a kill mid-run: no OUT; the next run removes the temporary directory
    import signal
    many = os.path.join(work, "npy_kill.fasta")
    write_fasta(many, [("k%d" % i, s) for i in range(40) for _, s in recs[2:3]])
    out = os.path.join(work, "killed_maps")
    other = "%s.999999999.tmp" % out  # not this writer's: holds another file
    os.mkdir(other)
    open(os.path.join(other, "notes.txt"), "w").write("mine\n")
    proc = subprocess.Popen([BIN, "contacts", mdir, many, "-o", out, "--format", "npy",
                             "--threads", "2", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp = "%s.%d.tmp" % (out, proc.pid)
    t0 = time.time()
    while not (os.path.isdir(tmp) and len(os.listdir(tmp)) >= 2) and time.time() - t0 < 30:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    print("  killed with %d maps written: OUT %s" % (len(os.listdir(tmp)) if os.path.isdir(tmp)
                                                     else -1, os.path.exists(out)))
    check(os.path.isdir(tmp) and not os.path.exists(out), "after SIGKILL: no temporary or an OUT")
    p = subprocess.run([BIN, "contacts", mdir, fasta, "-o", out, "--format", "npy", "--quiet"],
                       capture_output=True, text=True)
    check(p.returncode == 0 and p.stderr.count("left by a run that was killed") == 1
          and not os.path.exists(tmp) and os.path.exists(os.path.join(out, "index.tsv")),
          "next run: %d %r" % (p.returncode, p.stderr))
    check(open(os.path.join(other, "notes.txt")).read() == "mine\n", "another directory changed")


def png_ok(path, width, height):
    """A PNG whose chunks' CRCs hold, of width x height, IDAT inflating to
    its rows (8-bit RGB or RGBA, a filter byte a row)."""
    import struct
    import zlib
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "not a PNG"
    at, idat, ihdr = 8, b"", None
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0]:
            return "bad CRC in %s" % kind
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    if not ihdr or ihdr[:2] != (width, height) or ihdr[2] != 8 or ihdr[3] not in (2, 6):
        return "IHDR %s" % (ihdr,)
    raw = zlib.decompress(idat)
    bpp = 3 if ihdr[3] == 2 else 4
    return "" if len(raw) == height * (1 + width * bpp) else "IDAT: %d bytes" % len(raw)


def part_i(work, mdir, recs):
    print("== (i) --png")
    fasta = os.path.join(work, "png.fasta")
    named = [("p|1", recs[0][1]), ("p|1", recs[1][1]), ("q", recs[2][1])]
    write_fasta(fasta, named)
    for fmt, out in (("safetensors", "png_out.safetensors"), ("npy", "png_out_dir")):
        out, figs = os.path.join(work, out), os.path.join(work, "figs_" + fmt)
        t0 = time.time()
        p = subprocess.run([BIN, "contacts", mdir, fasta, "-o", out, "--format", fmt, "--png",
                            figs, "--quiet"], capture_output=True, text=True)
        if not check(p.returncode == 0 and os.path.exists(out),
                     "--png with %s: %d %r" % (fmt, p.returncode, p.stderr)):
            continue
        rows = open(os.path.join(figs, "index.tsv")).read().splitlines()[1:]
        files = [r.split("\t")[2] for r in rows]
        bad = [(f, png_ok(os.path.join(figs, f), 900, 800)) for f in files]
        bad = [b for b in bad if b[1]]
        print("  %s: %s in %.1f s, %d bad" % (fmt, files, time.time() - t0, len(bad)))
        check(files == ["p_1.png", "p_1~2.png", "q.png"] and not bad,
              "--png %s: files %s, bad %s" % (fmt, files, bad))
        check(sorted(os.listdir(figs)) == sorted(files + ["index.tsv"]), "--png extra files")
    out = os.path.join(work, "png_refused.safetensors")
    taken = os.path.join(work, "figs_taken")
    os.mkdir(taken)
    for tag, figs, words in (("existing DIR", taken, ["figs_taken", "exists"]),
                             ("DIR is OUT", out, ["OUT too"]),
                             ("missing folder", os.path.join(work, "no", "figs"),
                              ["cannot create", "No such file"])):
        p = subprocess.run([BIN, "contacts", mdir, fasta, "-o", out, "--png", figs, "--quiet"],
                           capture_output=True, text=True)
        refused("--png " + tag, p, out, words)
        check(tag == "existing DIR" or not os.path.exists(figs), "%s: DIR written" % tag)
    check(os.listdir(taken) == [], "existing --png DIR changed")


def part_g(work, recs):
    print("== (g) scripts/pdb_contacts.py and scripts/contact_precision.py")
    rng = np.random.default_rng(3)
    n = 40
    ca = np.cumsum(rng.normal(size=(n, 3)) * 2.2, axis=0)
    cb = ca + rng.normal(size=(n, 3))
    lines, k = [], 1
    for i in range(n):
        for name, x in (("N", ca[i] - 1.2), ("CA", ca[i]), ("C", ca[i] + 1.2), ("CB", cb[i])):
            if i == 7 and name == "CA":
                continue  # no CA: not a residue of the sequence
            lines.append("ATOM  %5d  %-3s ALA A%4d    %8.3f%8.3f%8.3f  1.00  0.00           C"
                         % (k, name, i + 1, x[0], x[1], x[2]))
            k += 1
        if i == 3:  # an alternate location B: ignored
            lines.append("ATOM  %5d  CB BALA A%4d    %8.3f%8.3f%8.3f  0.50  0.00           C"
                         % (k, i + 1, 0.0, 0.0, 0.0))
    lines.append("HETATM%5d  O   HOH A 100       0.000   0.000   0.000  1.00  0.00           O" % k)
    lines.append("ATOM  %5d  CA  GLY B   1       0.000   0.000   0.000  1.00  0.00           C" % k)
    pdb = os.path.join(work, "toy.pdb")
    with open(pdb, "w") as f:
        f.write("\n".join(lines) + "\nEND\n")
    prefix = os.path.join(work, "toy")
    subprocess.run([sys.executable, os.path.join(SRC, "scripts", "pdb_contacts.py"), prefix, pdb],
                   check=True)
    keep = [i for i in range(n) if i != 7]
    c = cb[keep]
    d = np.linalg.norm(c[:, None] - c[None], axis=-1)
    want = sorted((i + 1, j + 1) for i, j in zip(*np.nonzero(np.triu(d < 8.0, 6))))
    got = sorted(tuple(int(v) for v in line.split()[1:]) for line in open(prefix + ".pairs")
                 if not line.startswith("#"))
    seq = open(prefix + ".fasta").read().split("\n")[1]
    print("  %d residues, %d contacts (%d expected)" % (len(seq), len(got), len(want)))
    check(seq == "A" * (n - 1), "pdb_contacts sequence %r" % seq)
    check(got == want and len(want) > 0, "pdb_contacts pairs differ")
    out = os.path.join(work, "contacts.safetensors")  # from part_b
    t = load_file(out)
    top = []
    for k, (pid, s_) in enumerate(recs):
        L = len(s_)
        m = t["contacts"][t["offsets"][k]:t["offsets"][k + 1]].reshape(L, L)
        iu = np.triu_indices(L, 24)
        for r in np.argsort(-m[iu], kind="stable")[:L // 5]:
            top.append("%s %d %d" % (pid, iu[0][r] + 1, iu[1][r] + 1))
    for tag, body, want_p in (("top pairs", top, "1.000"), ("no pairs", [], "0.000")):
        pf = os.path.join(work, "prec-%s.pairs" % tag.replace(" ", ""))
        with open(pf, "w") as f:
            f.write("\n".join(body) + "\n")
        p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "contact_precision.py"),
                            out, pf], capture_output=True, text=True)
        print("  %-9s %s" % (tag, p.stdout.strip()))
        check(p.returncode == 0 and ("precision: %s" % want_p) in p.stdout,
              "contact_precision.py with %s: %r" % (tag, p.stdout + p.stderr))


def part_a(work, mdir, seqs, refs):
    print("== (a) attention probabilities, padded and packed rows")
    H, L = 4, 3
    # padded: the three shortest proteins in one batch
    sel = [0, 1, 2]
    T = max(len(seqs[k]) for k in sel) + 2
    tok = np.full((len(sel), T), PAD, np.int32)
    for r, k in enumerate(sel):
        row = [CLS] + tokens(seqs[k]) + [EOS]
        tok[r, :len(row)] = row
    tok.tofile(os.path.join(work, "pad.i32"))
    out = os.path.join(work, "pad.f32")
    subprocess.run([TOOL, "attention", mdir, os.path.join(work, "pad.i32"), str(len(sel)),
                    str(T), "0", out], check=True)
    check_maps("padded", np.fromfile(out, np.float32), sel, seqs, refs, L, H)
    # packed: the same three plus the 512 one, two rows of 1024 positions
    starts, lens, order = [], [], [1, 3, 0, 2]
    T = 1024
    flat = np.full(2 * T, PAD, np.int32)
    cur = [0, 0]
    for k in order:
        row = [CLS] + tokens(seqs[k]) + [EOS]
        r = 1 if k == 2 else 0
        s = r * T + cur[r]
        flat[s:s + len(row)] = row
        cur[r] += len(row) + 3  # a gap of padding between sequences
        starts.append(s)
        lens.append(len(row))
    flat.tofile(os.path.join(work, "packed.i32"))
    np.array(starts + lens, np.int32).tofile(os.path.join(work, "segs.i32"))
    out = os.path.join(work, "packed.f32")
    subprocess.run([TOOL, "attention", mdir, os.path.join(work, "packed.i32"), "2", str(T),
                    str(len(order)), out, os.path.join(work, "segs.i32")], check=True)
    check_maps("packed", np.fromfile(out, np.float32), order, seqs, refs, L, H)


def check_maps(tag, got, sel, seqs, refs, L, H):
    ns = [len(seqs[k]) + 2 for k in sel]
    per_layer = H * sum(n * n for n in ns)
    check(got.size == L * per_layer, "%s: %d values, expected %d" % (tag, got.size, L * per_layer))
    if got.size != L * per_layer:
        return
    got = got.reshape(L, per_layer)
    off = 0
    for k, n in zip(sel, ns):
        a = got[:, off:off + H * n * n].reshape(L, H, n, n)
        off += H * n * n
        for src, r in refs:
            e, m = rel(a, r["att%d" % k])
            print("  %-7s protein %d (%4d residues) vs %-12s rel %.2e  max abs %.2e"
                  % (tag, k, n - 2, src, e, m))
            check(e <= TOL_REL, "%s: protein %d attention relative error %.2e against %s"
                  % (tag, k, e, src))


def contacts(model, fasta, out, expect_ok=True):
    p = subprocess.run([BIN, "contacts", model, fasta, "-o", out, "--threads", "2", "--quiet"],
                       capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        print(p.stdout, p.stderr)
    return p


def part_b(work, mdir, recs, refs):
    print("== (b) contacts vs predict_contacts")
    fasta = os.path.join(work, "in.fasta")
    write_fasta(fasta, recs)
    out = os.path.join(work, "contacts.safetensors")
    t0 = time.time()
    p = contacts(mdir, fasta, out)
    dt = time.time() - t0
    if not check(p.returncode == 0, "contacts exited %d" % p.returncode):
        return
    got = load_file(out)
    lens = np.array([len(s) for _, s in recs], np.int64)
    check(np.array_equal(got["lengths"], lens), "lengths %s" % got["lengths"])
    offs = np.concatenate([[0], np.cumsum(lens * lens)])
    check(np.array_equal(got["offsets"], offs), "offsets %s" % got["offsets"])
    with open(out, "rb") as f:
        meta = json.loads(f.read(int.from_bytes(f.read(8), "little")))["__metadata__"]
    check(meta.get("ids", "").split("\n") == [i for i, _ in recs], "ids %r" % meta.get("ids"))
    print("  %d proteins in %.1f s" % (len(recs), dt))
    for k, (_, s) in enumerate(recs):
        n = len(s)
        c = got["contacts"][offs[k]:offs[k + 1]].reshape(n, n)
        for src, r in refs:
            for key, how in (("con%d" % k, ""), ("bat%d" % k, " batched")):
                if key not in r:
                    continue
                e, m = rel(c, r[key])
                print("  contacts protein %d (%4d residues) vs %-12s rel %.2e  max abs %.2e"
                      % (k, n, src + how, e, m))
                check(e <= TOL_REL, "contacts: protein %d relative error %.2e against %s"
                      % (k, e, src + how))


def refused(tag, p, out, words):
    msg = p.stderr
    check(p.returncode != 0, "%s: exit status 0" % tag)
    check(all(w in msg for w in words), "%s: message %r lacks %s" % (tag, msg.strip(), words))
    check(not os.path.exists(out), "%s: %s was written" % (tag, out))
    print("  %-22s %s" % (tag, msg.strip().splitlines()[-1] if msg.strip() else "(no message)"))


def part_c(work, hf, mdir, recs):
    print("== (c) bad inputs")
    fasta = os.path.join(work, "one.fasta")
    write_fasta(fasta, recs[:1])
    out = os.path.join(work, "exists.safetensors")
    with open(out, "w") as f:
        f.write("mine\n")
    p = contacts(mdir, fasta, out, False)
    check(p.returncode != 0 and "exists" in p.stderr, "existing OUT: %r" % p.stderr)
    check(open(out).read() == "mine\n", "existing OUT was changed")
    print("  %-22s %s" % ("existing OUT", p.stderr.strip()))
    # no contact head: the keys removed from the weights
    nohead = os.path.join(work, "nohead")
    hf.save_pretrained(nohead, safe_serialization=True)
    w = os.path.join(nohead, "model.safetensors")
    t = {k: v for k, v in load_torch(w).items() if not k.startswith("esm.contact_head.")}
    save_torch(t, w, metadata={"format": "pt"})
    out = os.path.join(work, "o1.safetensors")
    refused("no contact head", contacts(nohead, fasta, out, False), out, ["no contact head"])
    zero = os.path.join(work, "zerohead")
    with torch.no_grad():
        saved = [p.clone() for p in hf.esm.contact_head.parameters()]
        for p_ in hf.esm.contact_head.parameters():
            p_.zero_()
        hf.save_pretrained(zero, safe_serialization=True)
        for p_, s in zip(hf.esm.contact_head.parameters(), saved):
            p_.copy_(s)
    refused("all-zero contact head", contacts(zero, fasta, out, False), out, ["all zeros"])
    empty = os.path.join(work, "empty.fasta")
    write_fasta(empty, [recs[0], ("blank", "")])
    refused("empty protein", contacts(mdir, empty, out, False), out, ["blank", "empty"])
    long_ = os.path.join(work, "long.fasta")
    write_fasta(long_, [recs[0], ("long1023", "A" * 1023)])
    refused("too long", contacts(mdir, long_, out, False), out,
            ["long1023", "1023", "1022", "--long windows"])


def part_d(work, hf, recs, ref):
    print("== (d) --train-head on synthetic contacts")
    sel = recs[:4]
    fasta = os.path.join(work, "train.fasta")
    write_fasta(fasta, sel)
    pairs, labels = [], []
    for k, (pid, s) in enumerate(sel):
        c = ref["con%d" % k]
        n = len(s)
        iu = np.triu_indices(n, 6)
        cut = np.sort(c[iu])[::-1][int(len(iu[0]) * 0.15)]
        lab = np.zeros((n, n), bool)
        lab[iu] = c[iu] > cut
        labels.append(lab)
        for i, j in zip(*np.nonzero(lab)):
            pairs.append("%s %d %d" % (pid, j + 1, i + 1))  # either order
    pfile = os.path.join(work, "pairs.txt")
    with open(pfile, "w") as f:
        f.write("# synthetic contacts\n" + "\n".join(pairs) + "\n")
    nohead = os.path.join(work, "nohead")  # made by part_c
    out = os.path.join(work, "trained")
    t0 = time.time()
    p = subprocess.run([BIN, "contacts", nohead, fasta, "--train-head", pfile, "-o", out,
                        "--threads", "2"], capture_output=True, text=True)
    print("  " + (p.stdout.strip() or p.stderr.strip()) + " (%.1f s)" % (time.time() - t0))
    if not check(p.returncode == 0, "--train-head exited %d: %s" % (p.returncode, p.stderr)):
        return
    tr = EsmForMaskedLM.from_pretrained(out).double().eval()
    w = tr.esm.contact_head.regression.weight.detach().numpy().ravel()
    w0 = hf.esm.contact_head.regression.weight.detach().double().numpy().ravel()
    cos = float(w @ w0 / np.linalg.norm(w) / np.linalg.norm(w0))
    hit = total = 0
    with torch.no_grad():
        for k, (_, s) in enumerate(sel):
            ids = torch.tensor([[CLS] + tokens(s) + [EOS]])
            c = tr.predict_contacts(ids, torch.ones_like(ids))[0].numpy()
            iu = np.triu_indices(len(s), 6)
            lab = labels[k][iu]
            top = np.argsort(-c[iu], kind="stable")[:lab.sum()]
            hit += int(lab[top].sum())
            total += int(lab.sum())
    print("  exported head: cosine to the random head %.3f; %d/%d contacts in the top "
          "|contacts| pairs" % (cos, hit, total))
    check(cos > 0.9, "trained head cosine %.3f" % cos)
    check(hit >= 0.9 * total, "trained head recovers %d/%d contacts" % (hit, total))
    bad = os.path.join(work, "badpairs.txt")
    with open(bad, "w") as f:
        f.write("nosuchprotein 1 9\n")
    out2 = os.path.join(work, "trained2")
    p = subprocess.run([BIN, "contacts", nohead, fasta, "--train-head", bad, "-o", out2],
                       capture_output=True, text=True)
    refused("unknown protein", p, out2, ["badpairs.txt", "line 1", "nosuchprotein"])


def main():
    if not os.path.exists(DB):
        print("skipped: %s not found (Debian package mmseqs2)" % DB)
        return 77
    torch.set_num_threads(2)
    t0 = time.time()
    db = read_fasta(DB)
    recs = pick_near(db, LENGTHS)
    seqs = [s for _, s in recs]
    hf = make_model()
    with tempfile.TemporaryDirectory() as work:
        mdir = os.path.join(work, "model")
        hf.save_pretrained(mdir, safe_serialization=True)
        ref = cached_reference(make_model().double().eval(), seqs)
        refs = [("transformers", ref), ("fair-esm", cached_fair_reference(hf, seqs))]
        part_a(work, mdir, seqs, refs)
        part_b(work, mdir, recs, refs)
        part_e(work, mdir, pick_near(db, [1500])[0])
        part_f(work, mdir, recs)
        part_g(work, recs)
        part_h(work, mdir, recs)
        part_i(work, mdir, recs)
        part_c(work, hf, mdir, recs)
        part_d(work, hf, recs, ref)
    return interop_checks.summary(time.time() - t0)


if __name__ == "__main__":
    sys.exit(main())
