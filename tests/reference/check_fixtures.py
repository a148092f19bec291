#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Validate esmtrain float64 reference fixtures (numpy only, no torch).

    /usr/bin/python3 tests/reference/check_fixtures.py [FILE.safetensors ...]

With no arguments every tests/reference/fixtures/*.safetensors is checked.
Checks the safetensors container (header length, JSON, dtypes, offsets,
alignment, name order), the esmtrain metadata, the exact set of tensors and
their shapes for the stored config, the batch invariants (token layout,
selection rules, the one row without selections), and recomputes from the
stored tensors, in numpy: the loss from logits/labels and the AdamW step-1
weights from the initial weights and gradients (a Lion fixture: both Lion
steps from its weights, gradients and moments). Prints one summary per file;
exits 1 on any problem.
"""
import glob
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"F64": np.dtype("<f8"), "I32": np.dtype("<i4")}
CLS, PAD, EOS, MASK = 0, 1, 2, 32


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def read_safetensors(path):
    data = open(path, "rb").read()
    need(len(data) >= 8, "file shorter than 8 bytes")
    (hlen,) = struct.unpack("<Q", data[:8])
    need(8 + hlen <= len(data), f"header length {hlen} past end of file")
    need((8 + hlen) % 8 == 0, "tensor data not 8-byte aligned")
    raw = data[8:8 + hlen]
    need(raw[:1] == b"{", "header does not start with '{'")
    text = raw.decode("utf-8")
    need(text.rstrip(" ") == text.rstrip(), "header padding is not spaces")
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    need(len(keys) == len(set(keys)), "duplicate keys in header")
    header = dict(pairs)
    meta = header.pop("__metadata__", None)
    need(isinstance(meta, list), "no __metadata__")
    meta = dict(meta)
    need(all(isinstance(v, str) for v in meta.values()), "__metadata__ values must be strings")
    names = [k for k in keys if k != "__metadata__"]
    need(names == sorted(names), "tensors are not sorted by name")
    buf = data[8 + hlen:]
    tensors, off = {}, 0
    for name in names:
        info = dict(header[name])
        need(set(info) == {"dtype", "shape", "data_offsets"}, f"{name}: bad entry keys")
        need(info["dtype"] in DTYPES, f"{name}: unsupported dtype {info['dtype']}")
        dt = DTYPES[info["dtype"]]
        shape = tuple(info["shape"])
        need(all(isinstance(s, int) and s >= 0 for s in shape), f"{name}: bad shape")
        b, e = info["data_offsets"]
        need(b == off, f"{name}: data_offsets not contiguous in name order")
        need(e - b == dt.itemsize * int(np.prod(shape, dtype=np.int64)),
             f"{name}: byte size does not match shape")
        tensors[name] = np.frombuffer(buf, dtype=dt, count=(e - b) // dt.itemsize,
                                      offset=b).reshape(shape)
        off = e
    need(off == len(buf), f"{len(buf) - off} trailing bytes after the last tensor")
    return meta, tensors


def param_shapes(cfg):
    L, d, f, V = cfg["num_layers"], cfg["hidden_size"], cfg["ffn_size"], cfg["vocab_size"]
    s = {"esm.embeddings.word_embeddings.weight": (V, d),
         "esm.encoder.emb_layer_norm_after.weight": (d,),
         "esm.encoder.emb_layer_norm_after.bias": (d,),
         "lm_head.dense.weight": (d, d), "lm_head.dense.bias": (d,),
         "lm_head.layer_norm.weight": (d,), "lm_head.layer_norm.bias": (d,),
         "lm_head.bias": (V,)}
    for i in range(L):
        p = f"esm.encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            s[p + m + ".weight"], s[p + m + ".bias"] = (d, d), (d,)
        for m in ("attention.LayerNorm", "LayerNorm"):
            s[p + m + ".weight"], s[p + m + ".bias"] = (d,), (d,)
        s[p + "intermediate.dense.weight"], s[p + "intermediate.dense.bias"] = (f, d), (f,)
        s[p + "output.dense.weight"], s[p + "output.dense.bias"] = (d, f), (d,)
    return s


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def check_lion(path, meta, t):
    """make_lion_fixture.py's layout: two Lion steps recomputed in numpy
    from the stored weights, gradients and the update rule."""
    cfg = json.loads(meta["config"])
    opt = json.loads(meta["lion"])
    need(set(opt) == {"lr", "beta1", "beta2", "weight_decay"}, "lion keys")
    shapes = param_shapes(cfg)
    want = set(shapes) | {"tokens", "labels", "loss1", "loss2"}
    for k in ("grad1.", "grad2.", "c1.", "c2.", "step1.", "step2.", "m2."):
        want |= {k + n for n in shapes}
    need(set(t) == want, f"tensor set differs: {sorted(set(t) ^ want)[:4]}")
    lr, b1, b2, wd = opt["lr"], opt["beta1"], opt["beta2"], opt["weight_decay"]
    worst = 0.0
    for n, shape in shapes.items():
        need(t[n].shape == shape, f"{n}: shape {t[n].shape} != {shape}")
        p, m = t[n].copy(), np.zeros(shape)
        for k in (1, 2):
            g = t[f"grad{k}.{n}"]
            c = b1 * m + (1 - b1) * g
            worst = max(worst, float(np.abs(c - t[f"c{k}.{n}"]).max()))
            p = p * (1 - lr * wd) - lr * np.sign(c)
            m = b2 * m + (1 - b2) * g
            worst = max(worst, float(np.abs(p - t[f"step{k}.{n}"]).max()))
        worst = max(worst, float(np.abs(m - t[f"m2.{n}"]).max()))
    need(worst <= 1e-15, f"Lion recomputation differs by {worst:g}")
    need(float(t["loss2"][0]) < float(t["loss1"][0]), "loss did not fall over the two steps")
    print(f"OK {os.path.basename(path)}: {len(t)} tensors, Lion {opt}, loss "
          f"{float(t['loss1'][0]):.12f} -> {float(t['loss2'][0]):.12f}, recomputed max diff "
          f"{worst:.1e}; generator: {meta['generator']}")


def check(path):
    meta, t = read_safetensors(path)
    need(meta.get("format") == "esmtrain-fixture", "metadata format")
    need(meta.get("version") == "1", "metadata version")
    if "lion" in meta:
        return check_lion(path, meta, t)
    need("generator" in meta, "metadata generator")
    cfg = json.loads(meta["config"])
    need(set(cfg) >= {"num_layers", "hidden_size", "num_heads", "ffn_size", "vocab_size",
                      "batch", "seq_len"}, "config keys")
    need(cfg["vocab_size"] == 33, "vocab_size must be 33")
    need(cfg["hidden_size"] % cfg["num_heads"] == 0, "hidden_size % num_heads")
    need((cfg["hidden_size"] // cfg["num_heads"]) % 2 == 0, "odd head dim")
    opt = json.loads(meta["adamw"])
    need(set(opt) >= {"lr", "beta1", "beta2", "eps", "weight_decay", "step"}, "adamw keys")
    need(opt["step"] == 1, "adamw step must be 1")
    B, T, V = cfg["batch"], cfg["seq_len"], cfg["vocab_size"]

    shapes = param_shapes(cfg)
    expect = {"tokens": ((B, T), "I32"), "labels": ((B, T), "I32"),
              "logits": ((B, T, V), "F64"), "loss": ((1,), "F64")}
    for n, s in shapes.items():
        for pre in ("", "grad.", "step1."):
            expect[pre + n] = (s, "F64")
    missing = sorted(set(expect) - set(t))
    extra = sorted(set(t) - set(expect))
    need(not missing, f"missing tensors: {missing[:5]}{'...' if len(missing) > 5 else ''}")
    need(not extra, f"unexpected tensors: {extra[:5]}")
    for n, (s, dt) in expect.items():
        need(t[n].shape == s, f"{n}: shape {t[n].shape}, want {s}")
        need(t[n].dtype == DTYPES[dt], f"{n}: dtype {t[n].dtype}, want {dt}")
        if dt == "F64":
            need(np.isfinite(t[n]).all(), f"{n}: non-finite values")

    # batch layout
    tok, lab = t["tokens"].astype(np.int64), t["labels"].astype(np.int64)
    need(((tok >= 0) & (tok < V)).all(), "token id out of range")
    lengths = []
    for b in range(B):
        row = tok[b]
        n = int((row != PAD).sum())
        need(row[0] == CLS, f"row {b}: first token is not <cls>")
        need(row[n - 1] == EOS, f"row {b}: last real token is not <eos>")
        need((row[n:] == PAD).all(), f"row {b}: not right-padded")
        body = row[1:n - 1]
        need(((body >= 4) & (body <= 28) | (body == MASK)).all(), f"row {b}: bad residue id")
        lengths.append(n)
    need(max(lengths) == T, "no full-length row")
    need(len(set(lengths)) > 1, "all rows have the same length")
    sel = lab != -100
    need(((lab[sel] >= 4) & (lab[sel] <= 28)).all(), "label outside residue ids")
    need(not (sel & ((tok == PAD) | (tok == CLS) | (tok == EOS))).any(),
         "selected special/pad position")
    need(not ((tok == MASK) & ~sel).any(), "<mask> at an unselected position")
    empty_rows = [b for b in range(B) if not sel[b].any()]
    need(len(empty_rows) == 1, f"rows without selections: {empty_rows}, want exactly one")
    n_mask = int((sel & (tok == MASK)).sum())
    n_keep = int((sel & (tok == lab)).sum())
    n_rand = int((sel & (tok != MASK) & (tok != lab)).sum())
    need(n_rand == 0 or ((tok[sel & (tok != MASK) & (tok != lab)] >= 4)
                         & (tok[sel & (tok != MASK) & (tok != lab)] <= 23)).all(),
         "random replacement outside 4..23")
    need(n_mask > 0 and n_keep > 0 and n_rand > 0, "mask/random/unchanged not all present")

    # loss from logits
    lp = log_softmax(t["logits"])
    loss = -lp[sel, lab[sel]].mean()
    dl = abs(loss - t["loss"][0])
    need(dl <= 1e-12 * max(1.0, abs(loss)), f"loss mismatch {dl:g}")

    # pad row of the initial embedding
    need((t["esm.embeddings.word_embeddings.weight"][PAD] == 0).all(), "pad embedding row not zero")

    # AdamW step 1
    lr, b1, b2, eps, wd = (opt[k] for k in ("lr", "beta1", "beta2", "eps", "weight_decay"))
    worst = 0.0
    for n in shapes:
        p, g = t[n], t["grad." + n]
        m = (1 - b1) * g
        v = (1 - b2) * g * g
        want = p * (1 - lr * wd) - (lr / (1 - b1)) * m / (np.sqrt(v) / np.sqrt(1 - b2) + eps)
        worst = max(worst, float(np.abs(want - t["step1." + n]).max()))
    need(worst <= 1e-14, f"AdamW step-1 mismatch {worst:g}")

    nparam = sum(int(np.prod(s)) for s in shapes.values())
    print(f"OK {os.path.basename(path)}: {os.path.getsize(path)} bytes, {len(t)} tensors, "
          f"L={cfg['num_layers']} d={cfg['hidden_size']} H={cfg['num_heads']} "
          f"ffn={cfg['ffn_size']} B={B} T={T} params={nparam}, lengths={lengths}, "
          f"selected={int(sel.sum())} (mask {n_mask}, random {n_rand}, keep {n_keep}), "
          f"empty row {empty_rows[0]}, loss={t['loss'][0]:.12f} "
          f"(recomputed diff {dl:.1e}), AdamW max diff {worst:.1e}; "
          f"generator: {meta['generator']}")


def main(argv):
    paths = argv[1:] or sorted(glob.glob(os.path.join(HERE, "fixtures", "*.safetensors")))
    if not paths:
        print("check_fixtures: no fixtures found", file=sys.stderr)
        return 1
    failed = 0
    for p in paths:
        try:
            check(p)
        except (Bad, OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            print(f"FAIL {p}: {e}", file=sys.stderr)
            failed += 1
    print(f"{len(paths) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
