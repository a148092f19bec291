#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""esmtrain <-> transformers / fair-esm, through the real library.

(a) a random transformers EsmForMaskedLM saved as safetensors is imported
    by esmtrain; its logits on tokens with pads and masks match (<= 1e-4);
(b) esmtrain trains a few steps and exports; transformers loads the export
    with no missing or unexpected keys and reproduces esmtrain's logits
    (<= 1e-4); EsmTokenizer loads it and tokenizes like esmtrain;
(c) a fair-esm ESM2 checkpoint converted by tools/convert_to_safetensors.py
    is imported and matches fair-esm's logits (<= 1e-4);
(d) a transformers model as published ones are (fp16-rounded rotary
    inv_freq, a trained contact head, a position table) goes import ->
    checkpoint -> model -> export: the logits at T=600 stay equal bit for
    bit through the checkpoint and match transformers', and every tensor of
    the export equals the original's (name, dtype, shape, bytes);
(e) esmt_model_infer's per-token, mean and cls representations of layers
    0, 1 and L match transformers' hidden_states (<= 1e-4);
(f) the same on the converted fair-esm model against fair-esm's own
    repr_layers (<= 1e-4).
Usage: test_hf_roundtrip.py INTEROP_TOOL SOURCE_DIR. Exit 77 = skipped.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from transformers import EsmConfig, EsmForMaskedLM, EsmTokenizer
    import esm
except Exception as e:  # pragma: no cover
    print("skipped: torch, transformers or fair-esm not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

TOOL, SRC = sys.argv[1], sys.argv[2]
B, T = 3, 20
rng = np.random.default_rng(5)


def batch():
    tok = np.full((B, T), 1, dtype=np.int32)
    lab = np.full((B, T), -100, dtype=np.int32)
    for b, n in enumerate([T, 14, 9]):
        tok[b, 0], tok[b, n - 1] = 0, 2
        tok[b, 1:n - 1] = rng.integers(4, 24, n - 2)
        for t in range(1, n - 1):
            if rng.random() < 0.2:
                lab[b, t] = tok[b, t]
                tok[b, t] = 32
    return tok, lab


def rel(a, b, tok):
    keep = tok.reshape(-1) != 1
    a = a.reshape(B * T, -1)[keep]
    b = b.reshape(B * T, -1)[keep]
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def perturb(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.05)


def esmt_logits(hf_dir, tok, work):
    tp, lp = os.path.join(work, "tok.i32"), os.path.join(work, "out.f32")
    tok.tofile(tp)
    subprocess.run([TOOL, "logits", hf_dir, tp, str(B), str(T), lp], check=True)
    return np.fromfile(lp, dtype=np.float32).reshape(B, T, 33)


def tensors(path):
    from safetensors.numpy import load_file
    return load_file(path)


def roundtrip(work, cfg):
    """(d): 3 checks; returns the number that failed."""
    torch.manual_seed(1)
    hf = EsmForMaskedLM(cfg).eval()
    perturb(hf)
    with torch.no_grad():
        for layer in hf.esm.encoder.layer:  # published checkpoints: fp16-rounded
            rot = layer.attention.self.rotary_embeddings
            rot.inv_freq.copy_(rot.inv_freq.half().float())
        for p in hf.esm.contact_head.parameters():
            p.copy_(torch.randn_like(p))
        hf.esm.embeddings.position_embeddings.weight.copy_(
            torch.randn_like(hf.esm.embeddings.position_embeddings.weight))
    src = os.path.join(work, "published")
    hf.save_pretrained(src, safe_serialization=True)
    Bl, Tl = 1, 600
    tok = np.full((Bl, Tl), 1, dtype=np.int32)
    tok[0, 0], tok[0, Tl - 1] = 0, 2
    tok[0, 1:Tl - 1] = rng.integers(4, 24, Tl - 2)
    tok[0, 5:Tl - 1:17] = 32
    tp = os.path.join(work, "long.i32")
    tok.tofile(tp)
    rt = os.path.join(work, "rt")
    os.mkdir(rt)
    subprocess.run([TOOL, "roundtrip", src, tp, str(Bl), str(Tl), rt], check=True)
    li = np.fromfile(os.path.join(rt, "logits_import.f32"), dtype=np.float32)
    lc = np.fromfile(os.path.join(rt, "logits_ckpt.f32"), dtype=np.float32)
    with torch.no_grad():
        ref = hf(input_ids=torch.tensor(tok, dtype=torch.long),
                 attention_mask=torch.tensor(tok != 1, dtype=torch.long)).logits.numpy()
    e = float(np.linalg.norm(lc - ref.reshape(-1)) / np.linalg.norm(ref))
    fails = 0
    same = np.array_equal(li, lc)
    print("(d) import -> checkpoint -> model, T=%d: logits %s through the checkpoint, "
          "relative error to transformers %.2e" % (Tl, "bit-identical" if same else
                                                    "CHANGED (max %.2e)" % np.abs(li - lc).max(), e))
    fails += (not same) + (e > 1e-4)
    a = tensors(os.path.join(src, "model.safetensors"))
    b = tensors(os.path.join(rt, "export", "model.safetensors"))
    diff = [k for k in a if k not in b or a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
            or a[k].tobytes() != b[k].tobytes()]
    print("(d) export vs the original: %d of %d tensors differ%s" % (
        len(diff), len(a), (": " + ", ".join(diff[:5])) if diff else " (bit-identical)"))
    fails += bool(diff)
    return fails


def infer_vs(tag, work, model_dir, tok, reps, what):
    """esmt_model_infer of layers 0, 1 and L (-1) of model_dir against the
    reference representations reps[0..L]: per token, the residue mean and
    the cls vector; returns the number of layers that failed (<= 1e-4)."""
    L = len(reps) - 1
    lens = (tok != 1).sum(1)
    fails = 0
    for layer in (0, 1, -1):
        od = os.path.join(work, "%s-infer%d" % (tag, layer))
        os.mkdir(od)
        tp = os.path.join(work, "infer.i32")
        tok.tofile(tp)
        rc = subprocess.run([TOOL, "infer", model_dir, tp, str(B), str(T), str(layer), od]).returncode
        ref = reps[layer if layer >= 0 else L]
        d = ref.shape[-1]
        pt = np.fromfile(os.path.join(od, "per_token.f32"), dtype=np.float32).reshape(B, T, d)
        mean = np.fromfile(os.path.join(od, "mean.f32"), dtype=np.float32).reshape(B, d)
        cls = np.fromfile(os.path.join(od, "cls.f32"), dtype=np.float32).reshape(B, d)
        rmean = np.stack([ref[b, 1:lens[b] - 1].mean(0) for b in range(B)])
        e_tok = rel(pt, ref, tok)
        e_mean = float(np.linalg.norm(mean - rmean) / np.linalg.norm(rmean))
        e_cls = float(np.linalg.norm(cls - ref[:, 0]) / np.linalg.norm(ref[:, 0]))
        print("(%s) esmt_model_infer layer %d: per-token %.2e, mean %.2e, cls %.2e relative to %s; "
              "logits %s esmt_model_forward's" % (tag, layer, e_tok, e_mean, e_cls, what,
                                                  "equal to" if rc == 0 else "DIFFERENT from"))
        fails += not (rc == 0 and max(e_tok, e_mean, e_cls) <= 1e-4)
    return fails


def inference(work, hf_dir, hf, tok):
    """(e): against transformers' hidden_states (the last one is after the
    final LayerNorm); 3 checks."""
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(tok, dtype=torch.long),
                 attention_mask=torch.tensor(tok != 1, dtype=torch.long),
                 output_hidden_states=True)
    return infer_vs("e", work, hf_dir, tok, [h.numpy() for h in out.hidden_states],
                    "transformers' hidden_states")


def fair_inference(work, conv, fair, tok):
    """(f): the converted fair-esm model against fair-esm's own repr_layers
    (the last taken after its final LayerNorm); 3 checks."""
    L = fair.num_layers
    with torch.no_grad():
        reps = fair(torch.tensor(tok, dtype=torch.long), repr_layers=list(range(L + 1)))
    return infer_vs("f", work, conv, tok, [reps["representations"][l].numpy() for l in range(L + 1)],
                    "fair-esm's repr_layers")


def main():
    torch.manual_seed(0)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        tok, lab = batch()
        cfg = EsmConfig(vocab_size=33, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=256, max_position_embeddings=1026,
                        position_embedding_type="rotary", token_dropout=True, pad_token_id=1,
                        mask_token_id=32, emb_layer_norm_before=False, layer_norm_eps=1e-5,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        hf = EsmForMaskedLM(cfg).eval()
        perturb(hf)
        hf_dir = os.path.join(work, "hf")
        hf.save_pretrained(hf_dir, safe_serialization=True)
        with torch.no_grad():
            ref = hf(input_ids=torch.tensor(tok, dtype=torch.long),
                     attention_mask=torch.tensor(tok != 1, dtype=torch.long)).logits.numpy()
        e = rel(esmt_logits(hf_dir, tok, work), ref, tok)
        print("(a) transformers -> esmtrain logits relative error %.2e" % e)
        failures += e > 1e-4

        out = os.path.join(work, "export")
        tp, lp = os.path.join(work, "t.i32"), os.path.join(work, "l.i32")
        tok.tofile(tp)
        lab.tofile(lp)
        subprocess.run([TOOL, "train-export", hf_dir, tp, lp, str(B), str(T), "3", out], check=True)
        ours = np.fromfile(os.path.join(out, "esmt_logits.f32"), dtype=np.float32).reshape(B, T, 33)
        back, info = EsmForMaskedLM.from_pretrained(out, output_loading_info=True)
        back.eval()
        bad = {k: v for k, v in info.items() if v}
        print("(b) transformers loading report: %s" % (bad or "no missing or unexpected keys"))
        failures += bool(info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"])
        with torch.no_grad():
            theirs = back(input_ids=torch.tensor(tok, dtype=torch.long),
                          attention_mask=torch.tensor(tok != 1, dtype=torch.long)).logits.numpy()
        e = rel(theirs, ours, tok)
        print("(b) esmtrain export -> transformers logits relative error %.2e" % e)
        failures += e > 1e-4
        tk = EsmTokenizer.from_pretrained(out)
        ids = tk("MKVLA")["input_ids"]
        print("(b) EsmTokenizer('MKVLA') = %s" % ids)
        failures += ids != [0, 20, 15, 7, 4, 5, 2]

        alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
        fair = esm.model.esm2.ESM2(num_layers=2, embed_dim=64, attention_heads=4,
                                   alphabet=alphabet, token_dropout=True).eval()
        with torch.no_grad():
            for p in fair.parameters():
                p.copy_(torch.randn_like(p) * 0.05)
        pt = os.path.join(work, "fair.pt")
        torch.save({"model": {"encoder." + k: v for k, v in fair.state_dict().items()},
                    "cfg": {"model": {"encoder_layers": 2, "encoder_embed_dim": 64,
                                      "encoder_attention_heads": 4}}}, pt)
        conv = os.path.join(work, "fair-hf")
        subprocess.run([sys.executable, os.path.join(SRC, "tools", "convert_to_safetensors.py"),
                        pt, conv], check=True)
        with torch.no_grad():
            fref = fair(torch.tensor(tok, dtype=torch.long))["logits"].numpy()
        e = rel(esmt_logits(conv, tok, work), fref, tok)
        print("(c) fair-esm -> converter -> esmtrain logits relative error %.2e" % e)
        failures += e > 1e-4
        failures += roundtrip(work, cfg)
        failures += inference(work, hf_dir, hf, tok)
        failures += fair_inference(work, conv, fair, tok)
    print("%d passed, %d failed" % (14 - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
