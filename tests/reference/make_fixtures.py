#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Generate float64 ESM-2 reference fixtures for esmtrain's parity tests.

For every config in CONFIGS this builds a small Hugging Face `EsmForMaskedLM`
in float64, cross-checks its forward (and backward) against fair-esm's
`esm.model.esm2.ESM2` loaded with the same weights, runs one MLM training step
(forward, cross-entropy over the selected positions, backward, one AdamW
step) and writes everything to tests/reference/fixtures/<config>.safetensors.
See tests/reference/fixtures/README.md for the file layout.

Run with Debian's interpreter (the PATH python3 may lack torch):

    bash scripts/setup_reference_env.sh
    /usr/bin/python3 tests/reference/make_fixtures.py            # all configs
    /usr/bin/python3 tests/reference/make_fixtures.py tiny_hd16  # some

Deterministic: one thread, fixed seeds, explicit RNG streams, sorted output;
the same torch/transformers/fair-esm versions regenerate identical bytes.

Exact float64 arithmetic: both reference implementations carry a few fp32
steps that would otherwise put ~1e-8 noise into a float64 reference. They are
patched here, nothing else is changed:
  * RoPE inv_freq is built with .float() in both -> recomputed in float64
    as 10000 ** (-2c/hd) (the spec's formula).
  * HF token dropout computes the observed mask ratio with .float() -> the
    same expression in float64 (fair-esm already uses x.dtype).
  * fair-esm's attention softmax forces dtype=float32 -> softmax in float64
    (fair-esm only; HF already keeps the input dtype).
"""
import argparse
import json
import os
import struct
import sys
from importlib.metadata import version as pkg_version

import numpy as np
import torch
import torch.nn.functional as F

import transformers
from transformers import EsmConfig, EsmForMaskedLM
from transformers.models.esm import modeling_esm

import esm
import esm.multihead_attention
from esm.model.esm2 import ESM2

HERE = os.path.dirname(os.path.abspath(__file__))

VOCAB = 33
CLS, PAD, EOS, MASK = 0, 1, 2, 32
ADAMW = dict(lr=1e-3, beta1=0.9, beta2=0.98, eps=1e-8, weight_decay=0.01)
PERTURB = 0.05   # LN weights 1+U(-p,p), LN biases and all Linear/LM biases U(-p,p)
INIT_STD = 0.02

# residues: number of residue tokens per row (row 0 is always full length,
# i.e. seq_len - 2); empty_row: the one row with no selected position.
CONFIGS = {
    "tiny_hd16": dict(num_layers=2, hidden_size=64, num_heads=4, ffn_size=256,
                      batch=3, seq_len=24, residues=[22, 15, 8], empty_row=1,
                      seed=16),
    "small_hd64": dict(num_layers=2, hidden_size=128, num_heads=2, ffn_size=512,
                       batch=3, seq_len=40, residues=[38, 27, 12], empty_row=2,
                       seed=69),
}

# Parameters that are not stored (unused with rotary / not part of the MLM
# objective, or the tied alias of the word embedding).
SKIP = ("esm.embeddings.position_embeddings.", "esm.contact_head.",
        "lm_head.decoder.")


# --------------------------------------------------------------------------
# float64 patches (see module docstring)

def _hf_embeddings_forward_f64(self, input_ids=None, attention_mask=None,
                               position_ids=None, inputs_embeds=None,
                               past_key_values_length=0):
    # Same as transformers' EsmEmbeddings.forward for this configuration
    # (rotary, token_dropout, no emb layer norm), with the mask ratio
    # computed in the embedding dtype instead of float32.
    assert inputs_embeds is None and attention_mask is not None
    assert self.token_dropout and self.layer_norm is None
    assert self.position_embedding_type == "rotary"
    x = self.word_embeddings(input_ids)
    is_mask = input_ids == self.mask_token_id
    x = x.masked_fill(is_mask.unsqueeze(-1), 0.0)
    mask_ratio_train = 0.15 * 0.8
    src_lengths = attention_mask.sum(-1)
    mask_ratio_observed = is_mask.sum(-1).to(x.dtype) / src_lengths
    x = (x * (1 - mask_ratio_train) / (1 - mask_ratio_observed)[:, None, None]).to(x.dtype)
    x = (x * attention_mask.unsqueeze(-1)).to(x.dtype)
    return x


def _fair_softmax_keep_dtype(x, dim, onnx_trace=False):
    return F.softmax(x, dim=dim)


def install_f64_patches():
    modeling_esm.EsmEmbeddings.forward = _hf_embeddings_forward_f64
    esm.multihead_attention.utils_softmax = _fair_softmax_keep_dtype


def inv_freq_f64(head_dim):
    c = torch.arange(0, head_dim, 2, dtype=torch.float64)
    return 1.0 / (10000.0 ** (c / head_dim))


def set_rotary_f64(rot, head_dim):
    rot.inv_freq = inv_freq_f64(head_dim)
    rot._seq_len_cached = None
    rot._cos_cached = None
    rot._sin_cached = None


# --------------------------------------------------------------------------
# model construction

def hf_config(c):
    return EsmConfig(
        vocab_size=VOCAB, hidden_size=c["hidden_size"],
        num_hidden_layers=c["num_layers"], num_attention_heads=c["num_heads"],
        intermediate_size=c["ffn_size"], pad_token_id=PAD, mask_token_id=MASK,
        layer_norm_eps=1e-5, position_embedding_type="rotary",
        token_dropout=True, emb_layer_norm_before=False,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=1026, initializer_range=INIT_STD,
        tie_word_embeddings=True)


def init_weights(model, gen):
    """Spec init (normal(0, 0.02) Linear/Embedding weights, zero biases,
    LN 1/0, pad row zero), then LN weights/biases and every bias perturbed by
    U(-PERTURB, PERTURB). Parameters are visited in sorted-name order with one
    explicit generator, so the result does not depend on module order."""
    kind = {}
    for mname, mod in model.named_modules():
        for pname, _ in mod.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(mod, torch.nn.LayerNorm):
                kind[full] = "ln_" + pname
            elif isinstance(mod, torch.nn.Embedding):
                kind[full] = "embedding"
            elif isinstance(mod, torch.nn.Linear):
                kind[full] = "linear_" + pname
            elif pname == "bias":          # lm_head.bias
                kind[full] = "linear_bias"
            else:
                raise RuntimeError(f"unexpected parameter {full}")

    def uniform(shape):
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * PERTURB

    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            k = kind[name]
            if k in ("embedding", "linear_weight"):
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * INIT_STD)
                if name == "esm.embeddings.word_embeddings.weight":
                    p[PAD].zero_()
            elif k == "ln_weight":
                p.copy_(1.0 + uniform(p.shape))
            elif k in ("ln_bias", "linear_bias"):
                p.copy_(uniform(p.shape))
            else:
                raise RuntimeError(k)


def build_hf(c, gen):
    model = EsmForMaskedLM(hf_config(c)).double()
    assert model.lm_head.decoder.weight is model.esm.embeddings.word_embeddings.weight
    init_weights(model, gen)
    hd = c["hidden_size"] // c["num_heads"]
    for layer in model.esm.encoder.layer:
        set_rotary_f64(layer.attention.self.rotary_embeddings, hd)
    return model


def hf_to_fair_name(n):
    """HF EsmForMaskedLM name -> fair-esm ESM2 name (spec table)."""
    fixed = {
        "esm.embeddings.word_embeddings.weight": "embed_tokens.weight",
        "esm.encoder.emb_layer_norm_after.weight": "emb_layer_norm_after.weight",
        "esm.encoder.emb_layer_norm_after.bias": "emb_layer_norm_after.bias",
        "lm_head.bias": "lm_head.bias",
    }
    if n in fixed:
        return fixed[n]
    for pre in ("lm_head.dense.", "lm_head.layer_norm."):
        if n.startswith(pre):
            return n
    if n.startswith("esm.contact_head.regression."):
        return n[len("esm."):]
    p = n.split(".")
    assert p[:3] == ["esm", "encoder", "layer"], n
    i, rest = p[3], ".".join(p[4:])
    table = {
        "attention.LayerNorm": "self_attn_layer_norm",
        "attention.self.query": "self_attn.q_proj",
        "attention.self.key": "self_attn.k_proj",
        "attention.self.value": "self_attn.v_proj",
        "attention.output.dense": "self_attn.out_proj",
        "LayerNorm": "final_layer_norm",
        "intermediate.dense": "fc1",
        "output.dense": "fc2",
    }
    mod, leaf = rest.rsplit(".", 1)
    return f"layers.{i}.{table[mod]}.{leaf}"


def build_fair(c, hf_model):
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    assert len(alphabet) == VOCAB
    assert (alphabet.cls_idx, alphabet.padding_idx, alphabet.eos_idx,
            alphabet.mask_idx) == (CLS, PAD, EOS, MASK)
    assert "".join(alphabet.all_toks[4:24]) == "LAGVSERTIDPKQNFYMHWC"
    assert c["ffn_size"] == 4 * c["hidden_size"], "fair-esm ESM2 fixes FFN = 4d"
    fair = ESM2(num_layers=c["num_layers"], embed_dim=c["hidden_size"],
                attention_heads=c["num_heads"], alphabet=alphabet,
                token_dropout=True).double()
    fair_params = dict(fair.named_parameters())
    loaded = set()
    with torch.no_grad():
        for n, p in hf_model.named_parameters():
            if n.startswith("esm.embeddings.position_embeddings."):
                continue
            fn = hf_to_fair_name(n)
            assert fair_params[fn].shape == p.shape, (n, fn)
            fair_params[fn].copy_(p)
            loaded.add(fn)
    missing = set(fair_params) - loaded
    assert not missing, f"fair-esm parameters not loaded: {sorted(missing)}"
    assert fair.lm_head.weight is fair.embed_tokens.weight
    hd = c["hidden_size"] // c["num_heads"]
    for layer in fair.layers:
        set_rotary_f64(layer.self_attn.rot_emb, hd)
    return fair


# --------------------------------------------------------------------------
# batch

def make_batch(c, gen):
    B, T = c["batch"], c["seq_len"]
    res = c["residues"]
    assert len(res) == B and res[0] == T - 2 and all(0 < r <= T - 2 for r in res)
    assert sum(r == T - 2 for r in res) == 1 and len(set(res)) == B

    def randint(lo, hi, shape=()):   # [lo, hi)
        return torch.randint(lo, hi, shape, generator=gen)

    tokens = torch.full((B, T), PAD, dtype=torch.int64)
    for b, n in enumerate(res):
        seq = randint(4, 24, (n,))
        rare = torch.rand(n, generator=gen) < 0.08        # some X B U Z O
        seq[rare] = randint(24, 29, (int(rare.sum()),))
        tokens[b, 0], tokens[b, n + 1] = CLS, EOS
        tokens[b, 1:n + 1] = seq
    if not ((tokens >= 24) & (tokens <= 28)).any():
        tokens[0, 3] = 25
    original = tokens.clone()

    selected = torch.zeros((B, T), dtype=torch.bool)
    for b, n in enumerate(res):
        if b == c["empty_row"]:
            continue
        sel = torch.rand(n, generator=gen) < 0.15
        if not sel.any():
            sel[int(randint(0, n))] = True
        selected[b, 1:n + 1] = sel
    # row 0 needs >= 3 selections so every kind can be present
    while int(selected[0].sum()) < 3:
        selected[0, 1 + int(randint(0, res[0]))] = True

    kind = torch.full((B, T), -1, dtype=torch.int64)      # 0 mask, 1 random, 2 keep
    u = torch.rand((B, T), generator=gen)
    kind[selected & (u < 0.8)] = 0
    kind[selected & (u >= 0.8) & (u < 0.9)] = 1
    kind[selected & (u >= 0.9)] = 2
    # force each kind to occur, taking row 0 positions from the largest kind
    for k in (0, 1, 2):
        if not (kind == k).any():
            counts = [int((kind[0] == j).sum()) for j in (0, 1, 2)]
            donor = max(range(3), key=lambda j: counts[j])
            pos = int(torch.nonzero(kind[0] == donor)[0])
            kind[0, pos] = k

    for b, t in torch.nonzero(kind == 0).tolist():
        tokens[b, t] = MASK
    for b, t in torch.nonzero(kind == 1).tolist():
        r = int(randint(4, 24))
        while r == int(original[b, t]):
            r = int(randint(4, 24))
        tokens[b, t] = r

    labels = torch.full((B, T), -100, dtype=torch.int64)
    labels[selected] = original[selected]

    # invariants
    rows_without = [b for b in range(B) if not selected[b].any()]
    assert rows_without == [c["empty_row"]], rows_without
    assert not (tokens[c["empty_row"]] == MASK).any()
    assert (kind == 0).any() and (kind == 1).any() and (kind == 2).any()
    specials = (original == CLS) | (original == EOS) | (original == PAD)
    assert not (selected & specials).any()
    assert ((labels != -100) == selected).all()
    return tokens, labels, kind


# --------------------------------------------------------------------------
# safetensors writer

_DT = {np.dtype("<f8"): "F64", np.dtype("<i4"): "I32"}


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs, off = [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        dt = _DT[a.dtype]
        raw = a.tobytes(order="C")
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    hj += b" " * ((-(8 + len(hj))) % 8)      # data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for raw in blobs:
            f.write(raw)
    os.replace(tmp, path)
    return 8 + len(hj) + off


def f64(t):
    # a copy: .numpy() shares memory and the optimizer updates in place
    return np.array(t.detach().to(torch.float64).cpu().numpy(), dtype=np.float64, copy=True)


# --------------------------------------------------------------------------

def generate(name, c, outdir):
    gen = torch.Generator().manual_seed(c["seed"])
    torch.manual_seed(c["seed"])
    hf = build_hf(c, gen)
    tokens, labels, kind = make_batch(c, gen)
    attn_mask = (tokens != PAD).long()
    real = tokens != PAD
    sel = labels != -100

    stored = [n for n, _ in hf.named_parameters() if not n.startswith(SKIP)]
    weights0 = {n: f64(p) for n, p in hf.named_parameters() if n in stored}

    # fair-esm copy (before any update), forward + backward
    fair = build_fair(c, hf)
    fair.train()
    fair_logits = fair(tokens)["logits"]
    fair_loss = F.cross_entropy(fair_logits.reshape(-1, VOCAB), labels.reshape(-1),
                                ignore_index=-100)
    fair_loss.backward()
    fair_grads = dict(fair.named_parameters())

    # HF forward / loss / backward
    hf.train()
    out = hf(input_ids=tokens, attention_mask=attn_mask, labels=labels)
    logits, loss = out.logits, out.loss
    assert logits.dtype == torch.float64 and logits.shape == (c["batch"], c["seq_len"], VOCAB)

    ref_loss = F.cross_entropy(logits[sel], labels[sel])
    manual = -(torch.log_softmax(logits, -1)[sel].gather(-1, labels[sel][:, None])).mean()
    assert abs(loss.item() - ref_loss.item()) <= 1e-14 * max(1.0, abs(ref_loss.item()))
    assert abs(loss.item() - manual.item()) <= 1e-13 * max(1.0, abs(ref_loss.item()))

    logit_diff = (logits - fair_logits).abs()[real].max().item()
    assert logit_diff <= 1e-10, f"{name}: HF vs fair-esm logits differ by {logit_diff:g}"
    loss_diff = abs(loss.item() - fair_loss.item())
    assert loss_diff <= 1e-12, f"{name}: loss differs by {loss_diff:g}"

    loss.backward()
    grads = {}
    grad_diff = 0.0
    for n, p in hf.named_parameters():
        if n not in stored:
            continue
        assert p.grad is not None, f"no gradient for {n}"
        grads[n] = f64(p.grad)
        fg = fair_grads[hf_to_fair_name(n)].grad
        d = (p.grad - fg).abs().max().item() / max(1.0, p.grad.abs().max().item())
        grad_diff = max(grad_diff, d)
    assert grad_diff <= 1e-10, f"{name}: HF vs fair-esm gradients differ by {grad_diff:g}"

    opt = torch.optim.AdamW(hf.parameters(), lr=ADAMW["lr"],
                            betas=(ADAMW["beta1"], ADAMW["beta2"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    opt.step()
    step1 = {n: f64(p) for n, p in hf.named_parameters() if n in stored}

    tensors = {}
    for n in stored:
        tensors[n] = weights0[n]
        tensors["grad." + n] = grads[n]
        tensors["step1." + n] = step1[n]
    tensors["tokens"] = tokens.numpy().astype(np.int32)
    tensors["labels"] = labels.numpy().astype(np.int32)
    tensors["logits"] = f64(logits)
    tensors["loss"] = np.array([loss.item()], dtype=np.float64)

    cfg_meta = {k: c[k] for k in ("num_layers", "hidden_size", "num_heads",
                                   "ffn_size", "batch", "seq_len")}
    cfg_meta["vocab_size"] = VOCAB
    adamw_meta = dict(ADAMW, step=1)
    metadata = {
        "format": "esmtrain-fixture",
        "version": "1",
        "name": name,
        "config": json.dumps(cfg_meta, sort_keys=True),
        "adamw": json.dumps(adamw_meta, sort_keys=True),
        "loss": "cross-entropy, mean over positions with labels != -100 (whole batch)",
        "seed": str(c["seed"]),
        "generator": (f"torch {torch.__version__}; transformers {transformers.__version__}; "
                      f"fair-esm {pkg_version('fair-esm')}; numpy {np.__version__}; "
                      "tests/reference/make_fixtures.py"),
        "cross_check": json.dumps({"fair_esm_logits_max_abs_diff": float(f"{logit_diff:.3e}"),
                                   "fair_esm_grad_max_rel_diff": float(f"{grad_diff:.3e}")},
                                  sort_keys=True),
    }
    path = os.path.join(outdir, f"{name}.safetensors")
    size = write_safetensors(path, tensors, metadata)
    nsel = int(sel.sum())
    print(f"{name}: {path} {size} bytes, loss {loss.item():.12f}, selected {nsel} "
          f"(mask {int((kind == 0).sum())}, random {int((kind == 1).sum())}, "
          f"keep {int((kind == 2).sum())}), fair-esm max|dlogits| {logit_diff:.3e}, "
          f"max rel|dgrad| {grad_diff:.3e}")
    return logit_diff, grad_diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("configs", nargs="*", help=f"subset of {sorted(CONFIGS)}")
    ap.add_argument("--outdir", default=os.path.join(HERE, "fixtures"))
    args = ap.parse_args()
    names = args.configs or list(CONFIGS)
    for n in names:
        if n not in CONFIGS:
            ap.error(f"unknown config {n}")

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    transformers.logging.set_verbosity_error()
    install_f64_patches()
    os.makedirs(args.outdir, exist_ok=True)
    for n in names:
        generate(n, CONFIGS[n], args.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
