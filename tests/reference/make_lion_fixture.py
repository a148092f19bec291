#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Generate the float64 Lion reference fixture: two MLM training steps of a
Hugging Face EsmForMaskedLM in float64 with the Lion optimizer
(lion_pytorch.Lion, its authors' PyTorch port), written to
tests/reference/fixtures/<config>_lion.safetensors.

The model, weights and batch are make_fixtures.py's for the same config (the
same seed and generator stream), so step 1's forward and gradients equal
that fixture's. Two steps, because the second is the first that reads the
moment Lion keeps.

    bash scripts/setup_reference_env.sh
    /usr/bin/python3 tests/reference/make_lion_fixture.py   # tiny_hd16

Tensors (float64 unless said):
  <name>           weights before step 1 (the HF parameter names)
  grad1.<name>     gradients at step 1;      grad2.<name> at step 2
  c1.<name>        b1*m + (1-b1)*g, the interpolation whose sign is the
                   update, at step 1;        c2.<name> at step 2
  step1.<name>     weights after step 1;     step2.<name> after step 2
  m2.<name>        the moment after step 2 (optimizer.safetensors' "m.")
  tokens, labels   int32 [B, T]; the same batch at both steps
  loss1, loss2     [1]
Metadata: format, version, name, config (JSON), lion (JSON: lr, beta1,
beta2, weight_decay), generator.
"""
import argparse
import json
import os
import sys
from importlib.metadata import version as pkg_version

import numpy as np
import torch

import transformers
from lion_pytorch import Lion

import make_fixtures as mf

LION = dict(lr=3e-4, beta1=0.9, beta2=0.99, weight_decay=0.1)


def generate(name, c, outdir):
    gen = torch.Generator().manual_seed(c["seed"])
    torch.manual_seed(c["seed"])
    hf = mf.build_hf(c, gen)
    tokens, labels, _ = mf.make_batch(c, gen)
    attn_mask = (tokens != mf.PAD).long()
    params = dict(hf.named_parameters())
    stored = [n for n in params if not n.startswith(mf.SKIP)]

    tensors = {n: mf.f64(params[n]) for n in stored}
    opt = Lion(hf.parameters(), lr=LION["lr"], betas=(LION["beta1"], LION["beta2"]),
               weight_decay=LION["weight_decay"])
    hf.train()
    losses = []
    for k in (1, 2):
        opt.zero_grad(set_to_none=False)
        out = hf(input_ids=tokens, attention_mask=attn_mask, labels=labels)
        assert out.logits.dtype == torch.float64
        out.loss.backward()
        losses.append(out.loss.item())
        for n in stored:
            g = params[n].grad
            m = opt.state[params[n]].get("exp_avg", torch.zeros_like(g))
            tensors[f"grad{k}.{n}"] = mf.f64(g)
            tensors[f"c{k}.{n}"] = mf.f64(m * LION["beta1"] + g * (1 - LION["beta1"]))
        opt.step()
        for n in stored:
            tensors[f"step{k}.{n}"] = mf.f64(params[n])
    for n in stored:
        tensors[f"m2.{n}"] = mf.f64(opt.state[params[n]]["exp_avg"])
    tensors["tokens"] = tokens.numpy().astype(np.int32)
    tensors["labels"] = labels.numpy().astype(np.int32)
    tensors["loss1"] = np.array([losses[0]], dtype=np.float64)
    tensors["loss2"] = np.array([losses[1]], dtype=np.float64)

    cfg_meta = {k: c[k] for k in ("num_layers", "hidden_size", "num_heads",
                                   "ffn_size", "batch", "seq_len")}
    cfg_meta["vocab_size"] = mf.VOCAB
    metadata = {
        "format": "esmtrain-fixture",
        "version": "1",
        "name": f"{name}_lion",
        "config": json.dumps(cfg_meta, sort_keys=True),
        "lion": json.dumps(LION, sort_keys=True),
        "loss": "cross-entropy, mean over positions with labels != -100 (whole batch)",
        "seed": str(c["seed"]),
        "generator": (f"torch {torch.__version__}; transformers {transformers.__version__}; "
                      f"lion-pytorch {pkg_version('lion-pytorch')}; numpy {np.__version__}; "
                      "tests/reference/make_lion_fixture.py"),
    }
    path = os.path.join(outdir, f"{name}_lion.safetensors")
    size = mf.write_safetensors(path, tensors, metadata)
    print(f"{name}_lion: {path} {size} bytes, loss {losses[0]:.12f} -> {losses[1]:.12f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("configs", nargs="*", default=["tiny_hd16"],
                    help=f"subset of {sorted(mf.CONFIGS)} (default tiny_hd16)")
    ap.add_argument("--outdir", default=os.path.join(mf.HERE, "fixtures"))
    args = ap.parse_args()
    for n in args.configs:
        if n not in mf.CONFIGS:
            ap.error(f"unknown config {n}")
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    transformers.logging.set_verbosity_error()
    mf.install_f64_patches()
    os.makedirs(args.outdir, exist_ok=True)
    for n in args.configs:
        generate(n, mf.CONFIGS[n], args.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
