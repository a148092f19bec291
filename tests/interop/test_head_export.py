#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fine-tuned models out to transformers + peft and back, through the CLI.

For a 2-layer hidden-64 model with each task head (LoRA's B nonzero):
(a) `export` writes EsmForSequenceClassification / EsmForTokenClassification
    (LoRA merged) that transformers loads in float64 with no missing or
    unexpected keys and whose logits equal esmtrain's (relative L2 <= 1e-4,
    tests/test_model_reference.c's bound);
(b) `export --adapter-out` writes the unmerged base and a PEFT adapter that
    peft.PeftModel.from_pretrained(base, adapter) loads, logits as in (a);
(c) `import-hf` (with `--adapter`) reads them back into a checkpoint whose
    tensors equal the original's bit for bit and whose outputs are the
    original's bit for bit;
(e) an adapter peft itself wrote (get_peft_model_state_dict and its config's
    save_pretrained, list target_modules, dropout 0.1) on a base transformers saved is imported, and
    esmtrain's outputs equal PeftModel's (relative L2 <= 1e-4);
(d) refused with the file and the problem named, nothing written: mean
    pooling on export, an adapter on another base, a head that does not
    match the base, an unknown target module, an adapter on a module
    esmtrain does not adapt.
Usage: test_head_export.py HEAD_EXPORT_TOOL ESMTRAIN_EXAMPLE. Exit 77 = skipped.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors.numpy import load_file, save_file
    from transformers import EsmForSequenceClassification, EsmForTokenClassification
    import peft
except Exception as e:  # pragma: no cover
    print("skipped: numpy, torch, transformers, safetensors or peft not importable (%s); "
          "run scripts/setup_reference_env.sh" % e)
    sys.exit(77)

TOOL, CLI = sys.argv[1], sys.argv[2]
SEQ_CLASS, MULTILABEL, REGRESSION, RESIDUE = 1, 2, 3, 4
ROWS, T = 3, 10
TOL = 1e-4
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args, expect=0):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if (p.returncode == 0) != (expect == 0):
        print(p.stdout, p.stderr)
        raise SystemExit("%s: exit %d" % (" ".join(map(str, args)), p.returncode))
    return p.stdout + p.stderr


def outputs(d, head, C):
    tok = np.fromfile(os.path.join(d, "tokens.i32"), np.int32).reshape(ROWS, T)
    n = ROWS * T if head == RESIDUE else ROWS
    return tok, np.fromfile(os.path.join(d, "outputs.f32"), np.float32).reshape(n, C)


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def torch_logits(model, tok, head, C):
    model = model.double().eval()
    with torch.no_grad():
        y = model(input_ids=torch.tensor(tok, dtype=torch.long),
                  attention_mask=torch.tensor(tok != 1, dtype=torch.long)).logits.numpy()
    if head != RESIDUE:
        return y.reshape(ROWS, C), np.ones(ROWS, bool)
    return y.reshape(ROWS * T, C), tok.reshape(-1) != 1


def ckpt_weights(run_dir):
    """The one checkpoint's weights file of a run import-hf wrote."""
    ck = os.path.join(run_dir, "checkpoints")
    steps = sorted(n for n in os.listdir(ck) if n.startswith("step-"))
    return os.path.join(ck, steps[-1], "model.safetensors")


def tensors_equal(a_path, b_path, names):
    a, b = load_file(a_path), load_file(b_path)
    bad = [n for n in names if n not in a or n not in b or a[n].tobytes() != b[n].tobytes()]
    return bad


def case(tmp, name, head, C, lora_rank=0, targets=0):
    print("--", name)
    d = os.path.join(tmp, name)
    os.makedirs(d)
    run(TOOL, "make", d, head, C, 0, lora_rank, targets)
    tok, ours = outputs(d, head, C)
    cls = EsmForTokenClassification if head == RESIDUE else EsmForSequenceClassification
    hf = os.path.join(d, "hf")
    run(CLI, "export", os.path.join(d, "ck"), "-o", hf)
    model, info = cls.from_pretrained(hf, output_loading_info=True)
    check(not info["missing_keys"] and not info["unexpected_keys"],
          "%s: %s loads with no missing or unexpected keys %s" % (name, cls.__name__, info))
    y, keep = torch_logits(model, tok, head, C)
    e = rel(ours[keep], y[keep])
    check(e <= TOL, "%s: merged export's logits equal esmtrain's (rel L2 %.2e)" % (name, e))
    # back: the checkpoint's tensors and outputs bit for bit
    back = os.path.join(d, "back")
    run(CLI, "import-hf", hf, "-o", back)
    names = [n for n in load_file(os.path.join(hf, "model.safetensors"))
             if n.startswith(("esm.embeddings.word", "esm.encoder.layer", "classifier",
                              "esm.encoder.emb_layer_norm_after")) and "inv_freq" not in n]
    if not lora_rank:
        bad = tensors_equal(os.path.join(d, "ck", "model.safetensors"),
                            ckpt_weights(back), names)
        check(not bad, "%s: import-hf gives the checkpoint's tensors bit for bit %s" % (name, bad[:3]))
        o = os.path.join(d, "back_out")
        os.makedirs(o)
        run(TOOL, "infer", back, o)
        check(open(os.path.join(o, "outputs.f32"), "rb").read() ==
              open(os.path.join(d, "outputs.f32"), "rb").read(),
              "%s: the imported model's outputs are the original's bit for bit" % name)
        return d
    base, adapter = os.path.join(d, "base"), os.path.join(d, "adapter")
    run(CLI, "export", os.path.join(d, "ck"), "-o", base, "--adapter-out", adapter)
    pm = peft.PeftModel.from_pretrained(cls.from_pretrained(base), adapter)
    y, keep = torch_logits(pm, tok, head, C)
    e = rel(ours[keep], y[keep])
    check(e <= TOL, "%s: PeftModel.from_pretrained(base, adapter) logits equal esmtrain's "
          "(rel L2 %.2e)" % (name, e))
    back = os.path.join(d, "back_peft")
    run(CLI, "import-hf", base, "--adapter", adapter, "-o", back)
    ck_names = list(load_file(os.path.join(d, "ck", "model.safetensors")))
    ck_names = [n for n in ck_names if not n.startswith("lm_head")]
    bad = tensors_equal(os.path.join(d, "ck", "model.safetensors"),
                        ckpt_weights(back), ck_names)
    check(not bad, "%s: import-hf --adapter gives the checkpoint's tensors and adapters bit for "
          "bit %s" % (name, bad[:3]))
    o = os.path.join(d, "back_out")
    os.makedirs(o)
    run(TOOL, "infer", back, o)
    check(open(os.path.join(o, "outputs.f32"), "rb").read() ==
          open(os.path.join(d, "outputs.f32"), "rb").read(),
          "%s: the imported model's outputs are the original's bit for bit" % name)
    return d


def peft_native(tmp):
    """(e): a base and adapter written by transformers and peft, not esmtrain."""
    print("-- peft's own adapter")
    from transformers import EsmConfig
    torch.manual_seed(3)
    cfg = EsmConfig(vocab_size=33, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, max_position_embeddings=66,
                    position_embedding_type="rotary", token_dropout=True,
                    emb_layer_norm_before=False, pad_token_id=1, mask_token_id=32,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=3)
    base_dir, adapter_dir = os.path.join(tmp, "hf_base"), os.path.join(tmp, "hf_adapter")
    EsmForSequenceClassification(cfg).save_pretrained(base_dir)
    pm = peft.get_peft_model(EsmForSequenceClassification.from_pretrained(base_dir),
                             peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.1,
                                             target_modules=["query", "value"],
                                             task_type="SEQ_CLS"))
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_B" in n or "modules_to_save" in n:
                p.normal_(0.0, 0.1)
    # what PeftModel.save_pretrained writes, without its model card (which
    # needs Jinja2): peft's own state dict and config
    from safetensors.torch import save_file as save_torch
    os.makedirs(adapter_dir)
    save_torch({k: v.contiguous() for k, v in peft.get_peft_model_state_dict(pm).items()},
               os.path.join(adapter_dir, "adapter_model.safetensors"), metadata={"format": "pt"})
    pm.peft_config["default"].save_pretrained(adapter_dir)
    run_dir, o = os.path.join(tmp, "peft_run"), os.path.join(tmp, "peft_out")
    os.makedirs(o)
    run(CLI, "import-hf", base_dir, "--adapter", adapter_dir, "-o", run_dir)
    run(TOOL, "infer", run_dir, o)
    tok, ours = outputs(o, SEQ_CLASS, 3)
    y, keep = torch_logits(pm, tok, SEQ_CLASS, 3)
    e = rel(ours[keep], y[keep])
    check(e <= TOL, "peft's own adapter: imported, esmtrain's outputs equal PeftModel's (rel L2 "
          "%.2e)" % e)


def refused(tmp, what, args, needle):
    out_dir = os.path.join(tmp, "refused")
    msg = run(CLI, *args, "-o", out_dir, expect=1)
    check(needle in msg and not os.path.exists(out_dir),
          "%s: refused naming %r, nothing written (%s)" % (what, needle, msg.strip()[-160:]))


def rewrite(src, dst, change):
    shutil.copytree(src, dst)
    p = os.path.join(dst, "adapter_model.safetensors" if os.path.exists(
        os.path.join(dst, "adapter_model.safetensors")) else "model.safetensors")
    t = load_file(p)
    change(t)
    save_file(t, p, metadata={"format": "pt"} if "adapter" not in p else None)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        case(tmp, "seq-class", SEQ_CLASS, 3)
        case(tmp, "residue", RESIDUE, 3)
        d = case(tmp, "multilabel-lora-qv", MULTILABEL, 4, 4, 1 | 4)
        case(tmp, "regression-lora-out-ffn", REGRESSION, 1, 2, 8 | 16 | 32)
        case(tmp, "residue-lora-all", RESIDUE, 2, 3, 63)
        peft_native(tmp)
        # (d) bad inputs
        m = os.path.join(tmp, "mean")
        os.makedirs(m)
        run(TOOL, "make", m, SEQ_CLASS, 3, 1, 0, 0)
        msg = run(CLI, "export", os.path.join(m, "ck"), "-o", os.path.join(m, "hf"), expect=1)
        check("mean" in msg and "<cls>" in msg and not os.path.exists(os.path.join(m, "hf")),
              "mean pooling: export refused, nothing written (%s)" % msg.strip()[-120:])
        base, adapter = os.path.join(d, "base"), os.path.join(d, "adapter")
        other = os.path.join(tmp, "other_base")
        shutil.copytree(base, other)
        p = os.path.join(other, "model.safetensors")
        t = load_file(p)
        t["esm.encoder.layer.0.attention.self.query.weight"][0, 0] += 0.5
        save_file(t, p, metadata={"format": "pt"})
        refused(tmp, "adapter on another base", ["import-hf", other, "--adapter", adapter],
                "trained on another base")
        wrong_head = os.path.join(tmp, "wrong_head")

        def bigger_head(t):
            t["base_model.model.classifier.out_proj.weight"] = np.zeros((5, 64), np.float32)
        rewrite(adapter, wrong_head, bigger_head)
        refused(tmp, "a head that does not match", ["import-hf", base, "--adapter", wrong_head],
                "classifier.out_proj.weight")
        unknown = os.path.join(tmp, "unknown_target")
        shutil.copytree(adapter, unknown)
        cp = os.path.join(unknown, "adapter_config.json")
        c = json.load(open(cp))
        c["target_modules"] = ["query", "classifier.dense"]
        json.dump(c, open(cp, "w"))
        refused(tmp, "unknown target module", ["import-hf", base, "--adapter", unknown],
                "unknown target module 'classifier.dense'")
        foreign = os.path.join(tmp, "foreign_tensor")

        def lm_head_adapter(t):
            t["base_model.model.lm_head.dense.lora_A.weight"] = np.zeros((4, 64), np.float32)
        rewrite(adapter, foreign, lm_head_adapter)
        refused(tmp, "an adapter on a module esmtrain does not adapt",
                ["import-hf", base, "--adapter", foreign], "lm_head.dense.lora_A.weight")
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
