#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`esmtrain-example embed` against transformers' EsmModel in float64, on
real UniProt proteins (mmseqs2's example DB.fasta.gz).

(a) a random 3-layer model (hidden 64, max_position_embeddings 130, so a
    window of 126 residues; LayerNorms and biases perturbed) on
    12 proteins of 7..400 residues (one with lowercase and unknown letters):
    per_tok, mean and cls of layers 0, 1 and L, with --long truncate
    (the default) and --long windows, each as --format npy and
    safetensors; relative error <= 1e-5 per array, npy == safetensors;
    ids.txt, lengths, offsets, embed.json; the README's numpy snippet;
(b) an HF-initialised esm2_t6_8M (random, seed 0) on 6 proteins of 33..1498
    residues, two at 1022 and 1024 (--long windows): mean and per_tok of the
    last layer, default --repr-layers (files named layer6), relative error <= 1e-5;
(c) (b)'s input with --batch-tokens 1100 (one protein a batch) and 200000:
    bit-identical, else max abs difference <= 1e-6 x max(1, max |value|);
(d) resume: a 2-layer hidden-64 model on ~230,000 residues (two of embed's
    commit chunks), SIGINT once embed.json counts committed proteins, the
    same command again: arrays equal an uninterrupted run's; a third run on
    the complete OUT exits non-zero and changes nothing; an OUT holding a
    stray file is refused.
The references use the window embed.json reports; that it is
max_position_embeddings - WINDOW_MARGIN residues is one check of its own.
The reference for windows: windows of W residues ([cls] w [eos]) at 0, S,
2S, ..., the last one ending at the protein's end; a residue's row is the
average over the windows holding it, mean the average of those rows, cls
the average of the windows' cls rows.
The float64 references are cached across builds, keyed by their inputs
(cached_reference; ESMT_TEST_CACHE=0 computes them anew); esmtrain's side
runs every time.
Usage: test_embed.py ESMTRAIN_EXAMPLE_BINARY SOURCE_DIR. Exit 77 = skipped.
"""
import hashlib
import json
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
    from transformers import EsmConfig, EsmForMaskedLM
except Exception as e:  # pragma: no cover
    print("skipped: numpy, torch, transformers or safetensors not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

BIN, SRC = sys.argv[1], sys.argv[2]
DB = os.environ.get("ESMT_EMBED_TEST_FASTA", "/usr/share/doc/mmseqs2/example-data/DB.fasta.gz")
THREADS = os.environ.get("ESMT_EMBED_TEST_THREADS", "2")
TOL_REL, TOL_DET = 1e-5, 1e-6
# The window: max_position_embeddings - WINDOW_MARGIN residues. 4, as
# docs/inference.md has it (esmtrain's max_positions is 1024 for ESM-2, a
# window max_positions - 2 = 1022 residues, fair-esm extract.py's
# truncation); 2 would be 1024.
WINDOW_MARGIN = 4
# the alphabet and FASTA helpers shared with the benchmark
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from esm_fasta import (CLS, EOS, TOKENS, UNK, read_fasta, tokens, window_starts,  # noqa: E402
                       write_fasta)
import esm_fasta  # noqa: E402
from interop_checks import check  # noqa: E402
import interop_checks  # noqa: E402
import ref_cache  # noqa: E402

# The loading snippet for the README (OUT and layer substituted below).
SNIPPET = '''\
import json, numpy as np
out, layer = "OUT", LAYER                               # embed's -o directory; a layer it wrote
meta = json.load(open(f"{out}/embed.json")); assert meta["complete"]
ids = open(f"{out}/ids.txt").read().splitlines()        # one per protein, input order
lengths = np.load(f"{out}/lengths.npy")                 # [N] int64 residues
mean = np.load(f"{out}/mean.layer{layer}.npy")          # [N, d] float32, row k is ids[k]
off = np.load(f"{out}/per_tok.offsets.npy")             # [N + 1] int64
rows = np.load(f"{out}/per_tok.layer{layer}.npy", mmap_mode="r")  # [R, d], all proteins
per_residue = [rows[off[k]:off[k + 1]] for k in range(len(ids))]  # protein k: [residues, d]
# --format safetensors: safetensors.numpy.load_file(f"{out}/embeddings.safetensors")["mean.layer6"]
'''


def pick(recs, lengths, used):
    """The first unused record of each length (else the nearest)."""
    out = []
    for n in lengths:
        best = min((i for i in range(len(recs)) if i not in used),
                   key=lambda i: (abs(len(recs[i][1]) - n), i))
        used.add(best)
        out.append(recs[best])
    return out


def make_model(cfg, seed, perturb):
    torch.manual_seed(seed)
    hf = EsmForMaskedLM(cfg).eval()
    if perturb:
        with torch.no_grad():
            for name, p in hf.named_parameters():
                if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                    p.add_(torch.randn_like(p) * 0.05)
    return hf




def reference(esm64, recs, layers, W, S, policy):
    """{"mean.layerL", "cls.layerL", "per_tok.layerL", "lengths", "per_tok.offsets"} in
    float64 from transformers, one window a forward pass (no padding)."""
    out = {}
    per = {l: [] for l in layers}
    mean = {l: [] for l in layers}
    cls = {l: [] for l in layers}
    offsets = [0]
    for _, seq in recs:
        tok = tokens(seq)
        n = len(tok)
        if policy == "truncate":
            tok, n = tok[:W], min(n, W)
        starts = window_starts(n, W, S)
        acc = {l: np.zeros((n, esm64.config.hidden_size)) for l in layers}
        cacc = {l: np.zeros(esm64.config.hidden_size) for l in layers}
        cnt = np.zeros(n)
        for s in starts:
            w = tok[s:s + W]
            ids = torch.tensor([[CLS] + w + [EOS]], dtype=torch.long)
            with torch.no_grad():
                hs = esm64(input_ids=ids, attention_mask=torch.ones_like(ids),
                           output_hidden_states=True).hidden_states
            for l in layers:
                h = hs[l][0].numpy()
                acc[l][s:s + len(w)] += h[1:-1]
                cacc[l] += h[0]
            cnt[s:s + len(w)] += 1
        for l in layers:
            rows = acc[l] / cnt[:, None]
            per[l].append(rows)
            mean[l].append(rows.mean(0))
            cls[l].append(cacc[l] / len(starts))
        offsets.append(offsets[-1] + n)
    for l in layers:
        out["per_tok.layer%d" % l] = np.concatenate(per[l])
        out["mean.layer%d" % l] = np.stack(mean[l])
        out["cls.layer%d" % l] = np.stack(cls[l])
    out["lengths"] = np.array([len(s) for _, s in recs], dtype=np.int64)
    out["per_tok.offsets"] = np.array(offsets, dtype=np.int64)
    return out


def cached_reference(esm64, recs, layers, W, S, policy):
    """reference(), through tests/reference/ref_cache.py: the float64
    transformers forward passes (~35 s of (b)'s 45 on 2 cores) are computed
    once for the Release and the sanitizer runs. The key covers all that
    decides the arrays: the model's config and float64 weights, the
    proteins, layers, window, stride and policy, the source of reference()
    and of the esm_fasta helpers it calls, and the torch, transformers and
    numpy versions. esmtrain's output is never cached: every run embeds and
    compares anew."""
    import inspect
    import transformers
    key = ref_cache.Key("test_embed.reference v1")
    key.add(inspect.getsource(reference)).add(inspect.getsource(esm_fasta))
    key.add((torch.__version__, transformers.__version__, np.__version__))
    key.add(esm64.config.to_json_string(use_diff=False))
    for name, t in sorted(esm64.state_dict().items()):
        key.add(name).add(t.detach().cpu().numpy())
    key.add([(h, s) for h, s in recs]).add((list(layers), W, S, policy))
    return ref_cache.cached("embed-reference-" + key.hexdigest(),
                            lambda: reference(esm64, recs, layers, W, S, policy))


def embed(model, fasta, out, *args, check_rc=True):
    cmd = [BIN, "embed", model, fasta, "-o", out, "--threads", THREADS] + list(args)
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dt = time.time() - t0
    if check_rc and p.returncode != 0:
        print("`%s` exited %d:\n%s%s" % (" ".join(cmd[1:]), p.returncode, p.stdout, p.stderr))
    return p, dt


def load(out):
    """The arrays of an OUT directory (npy files or embeddings.safetensors), ids, meta."""
    arrays = {}
    st = os.path.join(out, "embeddings.safetensors")
    if os.path.exists(st):
        arrays.update(load_file(st))
    for f in sorted(os.listdir(out)):
        if f.endswith(".npy"):
            arrays[f[:-4]] = np.load(os.path.join(out, f))
    with open(os.path.join(out, "ids.txt")) as f:
        ids = f.read().splitlines()
    with open(os.path.join(out, "embed.json")) as f:
        meta = json.load(f)
    return arrays, ids, meta


def compare(tag, got, ref, names):
    """Relative error (and max abs) of each named array; one check each."""
    worst = 0.0
    for name in names:
        if name not in got:
            check(False, "%s: %s missing (have %s)" % (tag, name, sorted(got)))
            continue
        a, b = got[name], ref[name]
        if a.shape != b.shape:
            check(False, "%s: %s shape %s, reference %s" % (tag, name, a.shape, b.shape))
            continue
        if a.dtype.kind == "i" or b.dtype.kind == "i":
            check(a.dtype == np.int64 and np.array_equal(a, b),
                  "%s: %s = %s (%s), expected %s" % (tag, name, a[:12], a.dtype, b[:12]))
            continue
        check(a.dtype == np.float32, "%s: %s dtype %s, expected float32" % (tag, name, a.dtype))
        d = a.astype(np.float64) - b
        e = float(np.linalg.norm(d) / np.linalg.norm(b))
        m = float(np.abs(d).max()) if d.size else 0.0
        worst = max(worst, e)
        print("  %-26s %-18s rel %.2e  max abs %.2e" % (name, "x".join(map(str, a.shape)), e, m))
        check(e <= TOL_REL, "%s: %s relative error %.2e > %.0e" % (tag, name, e, TOL_REL))
    return worst


def same_arrays(tag, a, b, tol):
    """Identical bytes, else max abs difference <= tol x max(1, max |value|)
    of each array; prints which."""
    if sorted(a) != sorted(b):
        return check(False, "%s: arrays %s vs %s" % (tag, sorted(a), sorted(b)))
    differ = [k for k in a if a[k].shape != b[k].shape or a[k].dtype != b[k].dtype
              or a[k].tobytes() != b[k].tobytes()]
    if not differ:
        print("%s: all %d arrays bit-identical" % (tag, len(a)))
        return check(True, tag)
    if any(a[k].shape != b[k].shape or a[k].dtype.kind != "f" for k in differ):
        return check(False, "%s: %s differ in shape or integers" % (tag, differ))
    worst, m, scale = 0.0, 0.0, 1.0
    for k in differ:
        dk = float(np.abs(a[k].astype(np.float64) - b[k]).max())
        sk = max(1.0, float(np.abs(b[k]).max()))
        if dk / sk >= worst:
            worst, m, scale = dk / sk, dk, sk
    print("%s: %d of %d arrays differ (%s), max abs difference %.2e (%.2e of the array's "
          "largest |value|, %.2f)" % (tag, len(differ), len(a), ", ".join(differ[:6]), m,
                                      m / scale, scale))
    return check(m <= tol * scale, "%s: max abs difference %.2e > %.0e x %.2f" % (
        tag, m, tol, scale))


def request(meta):
    """embed.json's request fields (top level or under "request")."""
    r = dict(meta)
    r.update(meta.get("request", {}))
    return r


def check_meta(tag, ids, meta, recs, policy, layers, include):
    r = request(meta)
    check(meta.get("complete") is True,
          "%s: embed.json complete = %r" % (tag, meta.get("complete")))
    check(ids == [h.split()[0] for h, _ in recs], "%s: ids.txt %s..." % (tag, ids[:3]))
    check(r.get("long") == policy and sorted(r.get("layers", [])) == sorted(layers) and
          sorted(r.get("include", [])) == sorted(include),
          "%s: embed.json long %r layers %r include %r" % (
              tag, r.get("long"), r.get("layers"), r.get("include")))


def window_of(tag, meta, max_pos_emb):
    """The window embed.json reports (the references use it) and the stride;
    checks the window against the spec's."""
    r = request(meta)
    W, S = r.get("window"), r.get("stride") or (r.get("window") or 0) // 2
    want = max_pos_emb - WINDOW_MARGIN
    print("%s: embed.json window %r stride %r (expected: window %d, stride %d)" % (
        tag, W, r.get("stride"), want, want // 2))
    check(W == want, "%s: window %r residues, expected max_position_embeddings - %d = %d" % (
        tag, W, WINDOW_MARGIN, want))
    return (W, S) if isinstance(W, int) and W > 0 else (want, want // 2)


def snapshot(out):
    snap = {}
    for f in sorted(os.listdir(out)):
        p = os.path.join(out, f)
        with open(p, "rb") as fh:
            snap[f] = (os.stat(p).st_mtime_ns, hashlib.sha256(fh.read()).hexdigest())
    return snap


def small_config(layers, max_pos):
    return EsmConfig(vocab_size=33, hidden_size=64, num_hidden_layers=layers,
                     num_attention_heads=4, intermediate_size=256,
                     max_position_embeddings=max_pos, position_embedding_type="rotary",
                     token_dropout=True, pad_token_id=1, mask_token_id=32,
                     emb_layer_norm_before=False, layer_norm_eps=1e-5,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def part_a(work, recs):
    print("== (a) 3-layer hidden-64 model, max_position_embeddings 130")
    hf = make_model(small_config(3, 130), 0, True)
    mdir = os.path.join(work, "small")
    hf.save_pretrained(mdir, safe_serialization=True)
    esm64 = hf.esm.double().eval()
    used = set()
    # around both a 126- and a 128-residue window
    sel = pick(recs, [7, 40, 100, 125, 126, 127, 128, 129, 190, 250, 400], used)
    # X (a token of its own) and a record with lowercase and unknown letters.
    withx = next(r for i, r in enumerate(recs) if "X" in r[1] and 60 < len(r[1]) < 300
                 and i not in used)
    base = pick(recs, [150], used)[0][1]
    odd = ("edited|lower_unknown a made-up variant", base[:20].lower() + "J" + base[21:70] +
           "*" + base[71:140] + "Bz" + base[142:])
    sel = sel[:3] + [withx] + sel[3:8] + [odd] + sel[8:]
    fasta = os.path.join(work, "small.fasta")
    write_fasta(fasta, sel)
    print("proteins: %s residues" % [len(s) for _, s in sel])
    layers, L = [0, 1, 3], 3
    names = ["%s.layer%d" % (k, l) for k in ("per_tok", "mean", "cls") for l in layers]
    names += ["lengths", "per_tok.offsets"]
    runs, refs = {}, {}
    for policy in ("truncate", "windows"):
        for fmt in ("npy", "safetensors"):
            out = os.path.join(work, "a_%s_%s" % (policy, fmt))
            args = ["--include", "mean,per_tok,cls", "--format", fmt]
            # -1 and 3 name the same layer; truncate is the default policy.
            args += ["--repr-layers", "0,1,-1" if fmt == "npy" else "0,1,3"]
            if policy == "windows" or fmt == "safetensors":
                args += ["--long", policy]
            p, dt = embed(mdir, fasta, out, *args)
            tag = "(a) --long %s --format %s" % (policy, fmt)
            if not check(p.returncode == 0, "%s: exit %d" % (tag, p.returncode)):
                continue
            got, ids, meta = load(out)
            W, S = window_of(tag, meta, 130)
            if (policy, W, S) not in refs:
                refs[(policy, W, S)] = cached_reference(esm64, sel, layers, W, S, policy)
            print("%s (%.1f s): vs transformers float64 (window %d, stride %d)" % (tag, dt, W, S))
            compare(tag, got, refs[(policy, W, S)], names)
            check_meta(tag, ids, meta, sel, policy, layers, ["mean", "per_tok", "cls"])
            files = set(os.listdir(out)) - {"run.lock"}  # the run lock (cli_run_lock) may stay
            if fmt == "npy":
                want = {"embed.json", "ids.txt"} | {n + ".npy" for n in names}
            else:
                want = {"embed.json", "ids.txt", "embeddings.safetensors"}
            check(files == want, "%s: files %s, expected %s" % (tag, sorted(files), sorted(want)))
            runs[(policy, fmt)] = got
            if policy == "truncate" and fmt == "npy":
                snippet(out, L, got, ids)
        if (policy, "npy") in runs and (policy, "safetensors") in runs:
            same_arrays("(a) --long %s: npy vs safetensors" % policy, runs[(policy, "npy")],
                        runs[(policy, "safetensors")], 0.0)


def snippet(out, layer, got, ids):
    code = SNIPPET.replace('"OUT"', repr(out)).replace("LAYER", str(layer))
    env = {}
    try:
        exec(compile(code, "README snippet", "exec"), env)
    except Exception as e:
        return check(False, "README snippet: %s" % e)
    ok = (env["ids"] == ids and np.array_equal(env["mean"], got["mean.layer%d" % layer])
          and np.array_equal(env["lengths"], got["lengths"])
          and all(np.array_equal(env["per_residue"][k], got["per_tok.layer%d" % layer][
              got["per_tok.offsets"][k]:got["per_tok.offsets"][k + 1]])
              for k in range(len(ids)))
          and [len(r) for r in env["per_residue"]] == list(np.diff(env["off"])))
    print("(a) README numpy snippet: %s" % ("loads the same arrays" if ok else "DIFFERENT"))
    return check(ok, "README snippet")




def esm2_8m(work):
    cfg = EsmConfig(vocab_size=33, hidden_size=320, num_hidden_layers=6, num_attention_heads=20,
                    intermediate_size=1280, max_position_embeddings=1026,
                    position_embedding_type="rotary", token_dropout=True, pad_token_id=1,
                    mask_token_id=32, emb_layer_norm_before=False, layer_norm_eps=1e-5,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    hf = make_model(cfg, 0, False)
    mdir = os.path.join(work, "esm2_t6_8M")
    hf.save_pretrained(mdir, safe_serialization=True)
    return hf, mdir


def part_bc(work, recs, hf, mdir):
    print("== (b) HF-initialised esm2_t6_8M, --long windows")
    sel = pick(recs, [33, 150, 345, 1022, 1024, 1500], set())
    fasta = os.path.join(work, "b.fasta")
    write_fasta(fasta, sel)
    print("proteins: %s residues" % [len(s) for _, s in sel])
    out = os.path.join(work, "b")
    p, dt = embed(mdir, fasta, out, "--include", "mean,per_tok", "--long", "windows")
    if check(p.returncode == 0, "(b): exit %d" % p.returncode):
        got, ids, meta = load(out)
        W, S = window_of("(b)", meta, 1026)
        ref = cached_reference(hf.esm.double().eval(), sel, [6], W, S, "windows")
        print("(b) default --repr-layers (%.1f s): vs transformers float64 (window %d, stride %d)" % (
            dt, W, S))
        compare("(b)", got, ref, ["mean.layer6", "per_tok.layer6", "lengths", "per_tok.offsets"])
        check_meta("(b)", ids, meta, sel, "windows", [6], ["mean", "per_tok"])
        want = {"embed.json", "ids.txt", "lengths.npy", "per_tok.offsets.npy", "mean.layer6.npy",
                "per_tok.layer6.npy"}
        files = set(os.listdir(out)) - {"run.lock"}
        check(files == want, "(b): default layers wrote %s" % sorted(files))

    print("== (c) determinism: --batch-tokens 1100 (one protein a batch) vs 200000")
    res = {}
    for bt in ("1100", "200000"):
        o = os.path.join(work, "c%s" % bt)
        p, dt = embed(mdir, fasta, o, "--include", "mean,per_tok,cls", "--repr-layers", "0,3,-1",
                      "--long", "windows", "--batch-tokens", bt)
        print("(c) --batch-tokens %s: %.1f s" % (bt, dt))
        if check(p.returncode == 0, "(c) --batch-tokens %s: exit %d" % (bt, p.returncode)):
            res[bt] = load(o)[0]
    if len(res) == 2:
        same_arrays("(c) --batch-tokens 1100 vs 200000", res["1100"], res["200000"], TOL_DET)


def committed(out):
    try:
        with open(os.path.join(out, "embed.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return 0, None
    c = meta.get("committed", {})
    return (c.get("proteins", 0) if isinstance(c, dict) else 0), meta.get("complete")


def part_d(work, recs):
    print("== (d) resume after SIGINT")
    mdir = os.path.join(work, "tiny")
    make_model(small_config(2, 1026), 1, True).save_pretrained(mdir, safe_serialization=True)
    sel, n = [], 0
    for r in recs[::10]:
        sel.append(r)
        n += len(r[1])
        if n >= 230000:
            break
    fasta = os.path.join(work, "d.fasta")
    write_fasta(fasta, sel)
    args = ["--include", "mean,per_tok,cls", "--repr-layers", "1,-1", "--long", "windows",
            "--batch-tokens", "4096"]
    full = os.path.join(work, "d_full")
    p, t_full = embed(mdir, fasta, full, *args)
    if not check(p.returncode == 0, "(d) uninterrupted run: exit %d" % p.returncode):
        return
    print("(d) uninterrupted: %d proteins, %d residues in %.1f s" % (len(sel), n, t_full))
    ref = load(full)[0]
    out = os.path.join(work, "d_resumed")
    cmd = [BIN, "embed", mdir, fasta, "-o", out, "--threads", THREADS] + args
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    # SIGINT as soon as a first part is committed (the machine may be slower now)
    while proc.poll() is None and committed(out)[0] == 0 and time.time() - t0 < 3 * t_full + 60:
        time.sleep(0.05)
    t_sig = time.time() - t0
    proc.send_signal(signal.SIGINT)
    so, se = proc.communicate(timeout=300)
    done, complete = committed(out)
    print("(d) SIGINT after %.1f s: exit %d, %d of %d proteins committed, complete %r; "
          "stderr: %s" % (t_sig, proc.returncode, done, len(sel), complete,
                          se.strip().splitlines()[-1:]))
    check(proc.returncode != 0 and complete is not True and 0 < done < len(sel),
          "(d): the interrupted run: exit %d, %d committed, complete %r" % (
              proc.returncode, done, complete))
    p, t_res = embed(mdir, fasta, out, *args)
    print("(d) the same command again: exit %d in %.1f s (uninterrupted %.1f s); stderr: %s" % (
        p.returncode, t_res, t_full, [x for x in p.stderr.splitlines() if "resum" in x][:1]))
    if check(p.returncode == 0, "(d) resumed run: exit %d" % p.returncode):
        got, ids, meta = load(out)
        check(meta.get("complete") is True and ids == [h.split()[0] for h, _ in sel],
              "(d) resumed: complete %r, %d ids" % (meta.get("complete"), len(ids)))
        same_arrays("(d) interrupted + resumed vs uninterrupted", got, ref, TOL_DET)
    before = snapshot(out)
    time.sleep(0.05)
    p, _ = embed(mdir, fasta, out, *args, check_rc=False)
    after = snapshot(out)
    print("(d) a third run on the complete OUT: exit %d, OUT %s; stderr: %s" % (
        p.returncode, "unchanged" if before == after else "CHANGED", p.stderr.strip()[:160]))
    check(p.returncode == 0 and before == after and "complete already" in p.stderr,
          "(d) rerun on a complete OUT: says so, exit 0, nothing changed")
    stray = os.path.join(work, "d_stray")
    os.mkdir(stray)
    with open(os.path.join(stray, "notes.txt"), "w") as f:
        f.write("mine\n")
    p, _ = embed(mdir, fasta, stray, *args, check_rc=False)
    print("(d) OUT holding a stray file: exit %d, OUT now %s" % (p.returncode,
                                                                sorted(os.listdir(stray))))
    check(p.returncode != 0 and sorted(os.listdir(stray)) == ["notes.txt"], "(d) stray OUT")


def main():
    if not os.path.exists(DB):
        print("skipped: %s not found (Debian package mmseqs2)" % DB)
        return 77
    try:
        import esm
        if esm.data.Alphabet.from_architecture("ESM-1b").all_toks != TOKENS:
            print("FAILED: fair-esm's alphabet differs from the one assumed here")
            return 1
    except ImportError:
        pass
    torch.set_num_threads(int(THREADS))
    recs = read_fasta(DB)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as work:
        part_a(work, recs)
        hf, mdir = esm2_8m(work)
        part_bc(work, recs, hf, mdir)
        part_d(work, recs)
    return interop_checks.summary(time.time() - t0)


if __name__ == "__main__":
    sys.exit(main())
