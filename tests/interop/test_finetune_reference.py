#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The task heads and frozen layers (esmt_model_config.head, frozen_layers)
against transformers' EsmForSequenceClassification / EsmForTokenClassification
in float64, on a random 2-layer hidden-64 model (LayerNorms and biases
perturbed), 4 right-padded rows of 5..12 tokens.

For each case: the loss (relative error <= 1e-4), the head's outputs
(relative L2 error <= 1e-4 over non-pad rows) and every trainable tensor's
gradient of one step (relative L2 error <= 1e-3 per tensor), the bounds of
tests/test_model_reference.c (on a GPU backend, TF32's: see GPU below); every frozen tensor has a zero gradient and
is bit-identical after 3 AdamW updates, every trainable weight changed; a
model saved then (esmt_model_save) and loaded into a new one with its
optimizer state takes a fourth update bit-identically.
Cases: single-label classification (<cls> pooling with class weights and an
ignored row; mean pooling), multi-label (BCE), regression (1 and 2
targets, mean pooling, the first layer frozen), per-residue classification
(-100 residues ignored; full, and with the encoder frozen); LoRA against
peft on four target sets (query+value; key+attention output+FFN down; all
six; FFN up alone; all six with dropout 0.25), its B nonzero. With dropout
both sides drop the same elements: peft's lora_dropout modules are replaced
by the mask esmtrain's first training forward draws (Philox4x32-10 as
include/esmtrain/philox.h defines it, recomputed here in numpy), times
1 / (1 - p), on the adapter input only; the merge and resume checks, which
need a forward without dropout or a second draw, are left to the other cases.
The float64 references are cached across builds (tests/reference/ref_cache.py,
keyed by their inputs and this file's reference code); esmtrain runs every
time. Usage: test_finetune_reference.py FINETUNE_TOOL SOURCE_DIR. Exit 77 =
skipped (no torch/transformers).
"""
import inspect
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import EsmConfig, EsmForSequenceClassification, EsmForTokenClassification
except Exception as e:  # pragma: no cover
    print("skipped: numpy, torch or transformers not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)
try:
    import peft
    from peft import LoraConfig, get_peft_model
except Exception as e:  # pragma: no cover: the heads are still checked
    peft = None
    print("LoRA cases skipped: peft not importable (%s); run scripts/setup_reference_env.sh" % e)

TOOL, SRC = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
import ref_cache  # noqa: E402

SEQ_CLASS, MULTILABEL, REGRESSION, RESIDUE = 1, 2, 3, 4
POOL_CLS, POOL_MEAN = 0, 1
FREEZE_ENCODER = -1
LAYERS, HIDDEN, HEADS, FFN, MAX_POS = 2, 64, 4, 128, 64
B, T, STEPS = 4, 12, 3
LENGTHS = [12, 9, 5, 7]  # cls + residues + eos
TOL_LOSS, TOL_OUT, TOL_GRAD = 1e-4, 1e-4, 1e-3
# On a GPU backend ($ESMT_FINETUNE_BACKEND, the emulated suite's ampere_bf16)
# fp32 GEMMs run as TF32 (10-bit mantissa, cuda_gemm.cu): measured worst
# loss 4.6e-4, outputs 1.5e-3, gradients 2.3e-3 relative.
GPU = os.environ.get("ESMT_FINETUNE_BACKEND", "cpu") not in ("", "cpu")
if GPU:
    TOL_LOSS, TOL_OUT, TOL_GRAD = 2e-3, 5e-3, 1e-2

# esmtrain's ESMT_LORA_* bits and the modules they name (a layer's direct
# child path, so that FFN down's output.dense is not attention.output.dense)
LORA_QUERY, LORA_KEY, LORA_VALUE, LORA_ATTN_OUT, LORA_FFN_DOWN, LORA_FFN_UP = 1, 2, 4, 8, 16, 32
LORA_NAMES = ["attention.self.query", "attention.self.key", "attention.self.value",
              "attention.output.dense", "output.dense", "intermediate.dense"]
LORA_MODULES = [n.replace(".", "\\.") for n in LORA_NAMES]
CASES = [
    dict(name="seq-class, cls pooling, class weights, an ignored row", head=SEQ_CLASS, C=3,
         pooling=POOL_CLS, frozen=0, weights=True),
    dict(name="seq-class, mean pooling", head=SEQ_CLASS, C=3, pooling=POOL_MEAN, frozen=0),
    dict(name="multi-label, cls pooling", head=MULTILABEL, C=4, pooling=POOL_CLS, frozen=0),
    dict(name="regression, 1 target", head=REGRESSION, C=1, pooling=POOL_CLS, frozen=0),
    dict(name="regression, 2 targets, mean pooling, first layer frozen", head=REGRESSION, C=2,
         pooling=POOL_MEAN, frozen=1),
    dict(name="per-residue classification", head=RESIDUE, C=3, pooling=POOL_CLS, frozen=0),
    dict(name="per-residue classification, encoder frozen", head=RESIDUE, C=3,
         pooling=POOL_CLS, frozen=FREEZE_ENCODER),
    dict(name="LoRA r4 on query+value, seq-class", head=SEQ_CLASS, C=3, pooling=POOL_CLS,
         frozen=0, lora=(4, 8.0, LORA_QUERY | LORA_VALUE)),
    dict(name="LoRA r2 on key+attn out+FFN down, regression, mean", head=REGRESSION, C=2,
         pooling=POOL_MEAN, frozen=0, lora=(2, 3.0, LORA_KEY | LORA_ATTN_OUT | LORA_FFN_DOWN)),
    dict(name="LoRA r3 on all six, per-residue", head=RESIDUE, C=3, pooling=POOL_CLS,
         frozen=0, lora=(3, 6.0, 63)),
    dict(name="LoRA r2 on FFN up, multi-label", head=MULTILABEL, C=4, pooling=POOL_CLS,
         frozen=0, lora=(2, 2.0, LORA_FFN_UP)),
    dict(name="LoRA r3 on all six, dropout 0.25, seq-class, mean", head=SEQ_CLASS, C=3,
         pooling=POOL_MEAN, frozen=0, lora=(3, 6.0, 63), dropout=0.25),
]
MODEL_SEED, FIRST_DRAW = 1, 1  # finetune_tool's esmt_model_create seed; its first forward
PROBLEM = {SEQ_CLASS: "single_label_classification", MULTILABEL: "multi_label_classification",
           REGRESSION: "regression"}


def hf_config(case):
    cfg = EsmConfig(vocab_size=33, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                    num_attention_heads=HEADS, intermediate_size=FFN,
                    max_position_embeddings=MAX_POS, position_embedding_type="rotary",
                    token_dropout=True, pad_token_id=1, mask_token_id=32,
                    emb_layer_norm_before=False, layer_norm_eps=1e-5, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, num_labels=case["C"])
    if case["head"] != RESIDUE:
        cfg.problem_type = PROBLEM[case["head"]]
    return cfg


def make_inputs(case, seed):
    rng = np.random.default_rng(seed)
    tokens = np.full((B, T), 1, np.int32)
    for r, n in enumerate(LENGTHS):
        tokens[r, 0], tokens[r, n - 1] = 0, 2
        tokens[r, 1:n - 1] = rng.integers(4, 24, n - 2)
    labels = np.full((B, T), -100, np.int32)
    C = case["C"]
    if case["head"] == RESIDUE:
        for r, n in enumerate(LENGTHS):
            labels[r, 1:n - 1] = rng.integers(0, C, n - 2)
            labels[r, 2] = -100  # an unlabelled residue
        targets = None
    elif case["head"] == SEQ_CLASS:
        targets = rng.integers(0, C, B).astype(np.float32)
        if case.get("weights"):
            targets[1] = -100  # a row that is not scored
    elif case["head"] == MULTILABEL:
        targets = rng.integers(0, 2, (B, C)).astype(np.float32)
    else:
        targets = rng.normal(0.0, 1.0, (B, C)).astype(np.float32)
    weights = np.array([0.5, 2.0, 1.25][:C], np.float32) if case.get("weights") else None
    return tokens, labels, targets, weights


def make_weights(case, seed):
    """The model's float32 weights (HF init scaled up, LayerNorms and biases
    perturbed), by HF name; the contact head and the unused position table
    left out."""
    torch.manual_seed(seed)
    cls = EsmForTokenClassification if case["head"] == RESIDUE else EsmForSequenceClassification
    model = cls(hf_config(case))
    out = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "contact_head" in name or "position_embeddings" in name:
                continue  # unused with rotary positions, or not trained by esmtrain
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.05)
            else:
                p.mul_(4.0)
            out[name] = p.detach().float().numpy().copy()
    if case.get("lora"):  # the adapters, B nonzero so that every gradient path is exercised
        rank, _, bits = case["lora"]
        g = torch.Generator().manual_seed(seed + 1)
        for l in range(LAYERS):
            for t, mod in enumerate(LORA_NAMES):
                if not bits >> t & 1:
                    continue
                fan_in = FFN if mod == "output.dense" else HIDDEN
                fan_out = FFN if mod == "intermediate.dense" else HIDDEN
                base = "base_model.model.esm.encoder.layer.%d.%s." % (l, mod)
                out[base + "lora_A.weight"] = (torch.rand(rank, fan_in, generator=g) * 2 - 1).mul(
                    fan_in ** -0.5).numpy()
                out[base + "lora_B.weight"] = (torch.randn(fan_out, rank, generator=g) *
                                               0.2).numpy()
    return out


def philox_words(seed, stream, groups):
    """Philox4x32-10 of counters {g, g >> 32, stream, stream >> 32} for g in
    [0, groups), key {seed, seed >> 32}: [groups, 4] uint32 words."""
    m32 = np.uint64(0xFFFFFFFF)
    g = np.arange(groups, dtype=np.uint64)
    c0, c1 = g & m32, g >> np.uint64(32)
    c2 = np.full_like(g, stream & 0xFFFFFFFF)
    c3 = np.full_like(g, stream >> 32)
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & m32,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & m32)
    return np.stack([c0, c1, c2, c3], axis=1)


def dropout_mask(p, layer, target, n):
    """The kept elements (1 / (1 - p)) or dropped ones (0) of the [B*T, in]
    input of adapter (layer, target) in esmtrain's first training forward:
    element i is word i mod 4 of counter i / 4, stream = draw << 16 |
    (layer * 6 + target), dropped below floor(p 2^32) (p as the float32
    esmt_model_config holds)."""
    p = float(np.float32(p))
    words = philox_words(MODEL_SEED, FIRST_DRAW << 16 | (layer * 6 + target), (n + 3) // 4)
    keep = words.reshape(-1)[:n] >= np.uint64(int(p * 4294967296.0))
    return keep.astype(np.float64) / (1.0 - p)


class MaskedDropout(torch.nn.Module):
    """peft's lora_dropout with a given mask: x * mask (mask holds 1 / (1 - p)
    where kept)."""
    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def forward(self, x):
        return x * self.mask.reshape(x.shape)


def use_masks(top, p):
    """Every adapter's dropout in `top` (a peft model) set to esmtrain's mask."""
    n = 0
    for name, mod in top.named_modules():
        if not hasattr(mod, "lora_dropout") or "default" not in mod.lora_dropout:
            continue
        layer = int(name.split(".layer.")[1].split(".")[0])
        target = next(t for t, m in enumerate(LORA_NAMES) if name.endswith(".%d.%s" % (layer, m)))
        fan_in = FFN if LORA_NAMES[target] == "output.dense" else HIDDEN
        mask = dropout_mask(p, layer, target, B * T * fan_in)
        mod.lora_dropout["default"] = MaskedDropout(torch.from_numpy(mask))
        n += 1
    assert n > 0


def lora_config(case):
    rank, alpha, bits = case["lora"]
    mods = "|".join(m for t, m in enumerate(LORA_MODULES) if bits >> t & 1)
    return LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0,
                      target_modules=r".*\.layer\.\d+\.(%s)" % mods,
                      modules_to_save=["classifier"])


def esmt_name(peft_name):
    """A peft model's parameter name as esmtrain (and a peft adapter file)
    names it: the adapter's ".default" dropped, the classifier's trained copy
    under its own name, a wrapped base weight under its transformers name."""
    n = peft_name.replace(".default", "")
    if ".classifier.modules_to_save." in n:
        return "classifier." + n.split(".classifier.modules_to_save.")[1]
    if ".lora_" in n:
        return n
    return n.replace("base_model.model.", "", 1).replace(".base_layer", "")


def reference(case, weights, tokens, labels, targets, class_weights):
    """Loss, outputs and every parameter's gradient in float64 (with LoRA:
    peft's model, and the trained parameters' gradients)."""
    cls = EsmForTokenClassification if case["head"] == RESIDUE else EsmForSequenceClassification
    torch.manual_seed(0)
    model = cls(hf_config(case)).double().eval()
    state = {k: torch.from_numpy(v.astype(np.float64)) for k, v in weights.items()
             if ".lora_" not in k}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and all("contact_head" in k or "inv_freq" in k or "position_embeddings" in k
                                  for k in missing), missing
    top = model
    if case.get("lora"):
        top = get_peft_model(model, lora_config(case)).double().eval()
        model = top.base_model.model
        if case.get("dropout"):
            use_masks(top, case["dropout"])
        with torch.no_grad():
            for name, p in top.named_parameters():
                if ".lora_" in name:
                    p.copy_(torch.from_numpy(weights[esmt_name(name)].astype(np.float64)))
        n_lora = sum(".lora_" in n for n, _ in top.named_parameters())
        assert n_lora == sum(".lora_" in k for k in weights), (n_lora, len(weights))
    ids = torch.from_numpy(tokens.astype(np.int64))
    mask = (ids != 1).long()
    head = case["head"]
    if head == RESIDUE:
        out = top(input_ids=ids, attention_mask=mask, labels=torch.from_numpy(labels).long())
        loss, logits = out.loss, out.logits
    else:
        hidden = model.esm(input_ids=ids, attention_mask=mask)[0]
        if case["pooling"] == POOL_MEAN:
            res = ((ids != 0) & (ids != 1) & (ids != 2)).double().unsqueeze(-1)
            pooled = (hidden * res).sum(1) / res.sum(1)
        else:
            pooled = hidden[:, 0, :]
        logits = model.classifier(pooled.unsqueeze(1))  # EsmClassificationHead reads row 0
        y = torch.from_numpy(targets.astype(np.float64))
        if head == SEQ_CLASS:
            w = torch.from_numpy(class_weights.astype(np.float64)) if class_weights is not None \
                else None
            loss = F.cross_entropy(logits, y.long(), weight=w, ignore_index=-100)
        elif head == MULTILABEL:
            loss = F.binary_cross_entropy_with_logits(logits, y)
        elif case["C"] == 1:
            loss = F.mse_loss(logits.squeeze(), y.squeeze())
        else:
            loss = F.mse_loss(logits, y)
        if case["pooling"] == POOL_CLS and class_weights is None:  # transformers' own path
            ref = top(input_ids=ids, attention_mask=mask, labels=y.long() if
                        head == SEQ_CLASS else y)
            assert abs(ref.loss.item() - loss.item()) <= 1e-12 * max(1.0, abs(loss.item()))
    loss.backward()
    out = {"loss": np.array(loss.item()), "outputs": logits.detach().numpy()}
    for name, p in top.named_parameters():
        if p.grad is not None and "contact_head" not in name:
            out["grad." + (esmt_name(name) if case.get("lora") else name)] = p.grad.numpy()
    if case.get("lora"):  # peft's merged encoder weights
        for name, p in top.merge_and_unload().named_parameters():
            if name.startswith("esm.encoder.layer."):
                out["merged." + name] = p.detach().numpy().copy()
    return out


def cached_reference(case, weights, tokens, labels, targets, class_weights):
    key = ref_cache.Key("test_finetune_reference v2")
    key.add(inspect.getsource(reference)).add(inspect.getsource(hf_config))
    key.add((torch.__version__, transformers.__version__, peft and peft.__version__,
             np.__version__))
    key.add(inspect.getsource(lora_config)).add(inspect.getsource(esmt_name))
    for f in (philox_words, dropout_mask, MaskedDropout, use_masks):
        key.add(inspect.getsource(f))
    key.add(sorted((k, v) for k, v in case.items() if k != "frozen"))
    for k in sorted(weights):
        key.add(k).add(weights[k])
    for a in (tokens, labels, targets, class_weights):
        key.add(a if a is not None else "none")
    return ref_cache.cached("finetune-reference-" + key.hexdigest(),
                            lambda: reference(case, weights, tokens, labels, targets,
                                              class_weights))


def rel_l2(a, b):
    den = float(np.sqrt(np.sum(b.astype(np.float64) ** 2)))
    num = float(np.sqrt(np.sum((a.astype(np.float64) - b) ** 2)))
    return num / den if den > 0 else num


def trains(case, name):
    """Whether esmtrain trains the tensor `name` in this case."""
    if name.startswith("classifier.") or ".lora_" in name:
        return True
    if name.startswith("lm_head.") or case.get("lora"):
        return False
    f = case["frozen"]
    if f == FREEZE_ENCODER:
        return False
    if name.startswith("esm.embeddings."):
        return f == 0
    if name.startswith("esm.encoder.layer."):
        return int(name.split(".")[3]) >= f
    return True  # the final LayerNorm


def run_case(case, seed, work):
    tokens, labels, targets, class_weights = make_inputs(case, seed)
    weights = make_weights(case, seed)
    ref = cached_reference(case, weights, tokens, labels, targets, class_weights)
    d_in, d_out = os.path.join(work, "in%d" % seed), os.path.join(work, "out%d" % seed)
    os.makedirs(d_in)
    os.makedirs(d_out)
    with open(os.path.join(d_in, "case.txt"), "w") as f:
        rank, alpha, bits = case.get("lora", (0, 0.0, 0))
        f.write("%d %d %d %d %d %d %d %d %d %d %d %d %d %.9g %d %.9g\n" % (
            LAYERS, HIDDEN, HEADS, FFN, MAX_POS, case["head"], case["C"], case["pooling"],
            case["frozen"], B, T, STEPS, rank, alpha, bits, case.get("dropout", 0.0)))
    tokens.tofile(os.path.join(d_in, "tokens.i32"))
    labels.tofile(os.path.join(d_in, "labels.i32"))
    if targets is not None:
        targets.tofile(os.path.join(d_in, "targets.f32"))
    if class_weights is not None:
        class_weights.tofile(os.path.join(d_in, "class_weights.f32"))
    with open(os.path.join(d_in, "tensors.txt"), "w") as f, \
            open(os.path.join(d_in, "tensors.f32"), "wb") as v:
        for name, a in weights.items():
            f.write("%s %d\n" % (name, a.size))
            v.write(a.astype(np.float32).tobytes())
    subprocess.run([TOOL, d_in, d_out], check=True)

    fails = []
    loss = float(open(os.path.join(d_out, "loss.txt")).read())
    ref_loss = float(ref["loss"])
    lerr = abs(loss - ref_loss) / abs(ref_loss)
    if not lerr <= TOL_LOSS:
        fails.append("loss %.8g vs %.8g (rel %.2e)" % (loss, ref_loss, lerr))
    outs = np.fromfile(os.path.join(d_out, "outputs.f32"), np.float32)
    ref_out = ref["outputs"]
    if case["head"] == RESIDUE:
        real = (tokens != 1).reshape(-1)
        outs = outs.reshape(B * T, -1)[real]
        ref_out = ref_out.reshape(B * T, -1)[real]
    oerr = rel_l2(outs.reshape(ref_out.shape), ref_out)
    if not oerr <= TOL_OUT:
        fails.append("outputs rel err %.2e" % oerr)

    names = [l.split() for l in open(os.path.join(d_out, "names.txt"))]
    grads = np.fromfile(os.path.join(d_out, "grads.f32"), np.float32)
    before = np.fromfile(os.path.join(d_out, "before.f32"), np.float32)
    after = np.fromfile(os.path.join(d_out, "after.f32"), np.float32)
    off, worst, n_frozen, n_train = 0, 0.0, 0, 0
    for name, numel in names:
        n = int(numel)
        g, w0, w1 = grads[off:off + n], before[off:off + n], after[off:off + n]
        off += n
        if not trains(case, name):
            n_frozen += 1
            if np.any(g != 0):
                fails.append("frozen %s has a gradient" % name)
            if w0.tobytes() != w1.tobytes():
                fails.append("frozen %s changed" % name)
            continue
        n_train += 1
        if "grad." + name not in ref:
            fails.append("no reference gradient for %s" % name)
            continue
        err = rel_l2(g, ref["grad." + name].reshape(-1))
        worst = max(worst, err)
        if not err <= TOL_GRAD:
            fails.append("gradient of %s: rel err %.2e" % (name, err))
        if name.endswith(".weight") and np.array_equal(w0, w1):
            fails.append("trainable %s did not change" % name)
    if case.get("lora") and not case.get("dropout"):  # esmt_model_lora_merge vs merge_and_unload
        merged = np.fromfile(os.path.join(d_out, "merged.f32"), np.float32)
        mout = np.fromfile(os.path.join(d_out, "merged_outputs.f32"), np.float32)
        if case["head"] == RESIDUE:
            mout = mout.reshape(B * T, -1)[(tokens != 1).reshape(-1)]
        merr = rel_l2(mout.reshape(ref_out.shape), ref_out)
        if not merr <= TOL_OUT:
            fails.append("merged model's outputs rel err %.2e" % merr)
        off, wworst = 0, 0.0
        for name, numel in names:
            n = int(numel)
            v = merged[off:off + n]
            off += n
            if ".lora_B." in name and np.any(v != 0):
                fails.append("%s is not zero after the merge" % name)
            if "merged." + name in ref:
                wworst = max(wworst, rel_l2(v, ref["merged." + name].reshape(-1)))
        if not wworst <= TOL_OUT:
            fails.append("merged weights rel err %.2e" % wworst)
        print("    merged: outputs rel err %.1e, weights worst %.1e" % (merr, wworst))
    ra = open(os.path.join(d_out, "resumed_a.f32"), "rb").read()
    if not case.get("dropout") and ra != open(os.path.join(d_out, "resumed_b.f32"), "rb").read():
        fails.append("a model loaded from esmt_model_save's checkpoint steps differently")
    print("%-60s loss %.6f (rel %.1e) outputs %.1e grads worst %.1e; %d trained, %d frozen "
          "bit-identical" % (case["name"], loss, lerr, oerr, worst, n_train, n_frozen))
    return fails


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for i, case in enumerate(CASES):
            if case.get("lora") and peft is None:
                continue
            for f in run_case(case, 100 + i, work):
                print("FAIL %s: %s" % (case["name"], f))
                failures += 1
    if failures:
        print("%d failure(s)" % failures)
        return 1
    print("all %d cases within bounds" % sum(1 for c in CASES if peft or not c.get("lora")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
