#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Convert a pickle ESM-2 checkpoint into a directory esmtrain imports.

esmtrain never unpickles in C. This tool (needs torch) reads either

  * a Hugging Face `pytorch_model.bin` (or a directory holding it with its
    config.json), or
  * a fair-esm `.pt` checkpoint (a dict with "model" = the state dict and
    "cfg" or "args" describing the size; keys like `encoder.sentence_encoder.
    layers.0.self_attn.q_proj.weight` or `layers.0...`),

and writes OUT_DIR/config.json + OUT_DIR/model.safetensors under the Hugging
Face EsmForMaskedLM names, which `esmtrain-example import-hf OUT_DIR` (or
esmt_model_import_hf) reads.

Usage: convert_to_safetensors.py INPUT OUT_DIR [--num-heads H]
"""
import argparse
import json
import os
import re
import struct
import sys


def save_safetensors(tensors, path):
    """Write float32 tensors (name -> torch tensor) in the safetensors format."""
    import numpy as np
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name].detach().cpu().float().numpy())
        data = arr.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt", "producer": "esmtrain convert_to_safetensors.py"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


FAIR_TO_HF = [
    (r"^embed_tokens\.weight$", "esm.embeddings.word_embeddings.weight"),
    (r"^layers\.(\d+)\.self_attn\.(q|k|v)_proj\.(weight|bias)$",
     lambda m: "esm.encoder.layer.%s.attention.self.%s.%s"
     % (m.group(1), {"q": "query", "k": "key", "v": "value"}[m.group(2)], m.group(3))),
    (r"^layers\.(\d+)\.self_attn\.out_proj\.(weight|bias)$",
     r"esm.encoder.layer.\1.attention.output.dense.\2"),
    (r"^layers\.(\d+)\.self_attn\.rot_emb\.inv_freq$",
     r"esm.encoder.layer.\1.attention.self.rotary_embeddings.inv_freq"),
    (r"^layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)$",
     r"esm.encoder.layer.\1.attention.LayerNorm.\2"),
    (r"^layers\.(\d+)\.fc1\.(weight|bias)$", r"esm.encoder.layer.\1.intermediate.dense.\2"),
    (r"^layers\.(\d+)\.fc2\.(weight|bias)$", r"esm.encoder.layer.\1.output.dense.\2"),
    (r"^layers\.(\d+)\.final_layer_norm\.(weight|bias)$", r"esm.encoder.layer.\1.LayerNorm.\2"),
    (r"^emb_layer_norm_after\.(weight|bias)$", r"esm.encoder.emb_layer_norm_after.\1"),
    (r"^lm_head\.dense\.(weight|bias)$", r"lm_head.dense.\1"),
    (r"^lm_head\.layer_norm\.(weight|bias)$", r"lm_head.layer_norm.\1"),
    (r"^lm_head\.weight$", "lm_head.decoder.weight"),
    (r"^lm_head\.bias$", "lm_head.bias"),
    (r"^contact_head\.regression\.(weight|bias)$", r"esm.contact_head.regression.\1"),
]


def fair_name(name):
    for prefix in ("encoder.sentence_encoder.", "encoder."):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    for pattern, repl in FAIR_TO_HF:
        m = re.match(pattern, name)
        if m:
            return repl(m) if callable(repl) else m.expand(repl)
    return None


def convert_fair(obj, heads):
    sd = obj["model"]
    cfg = obj.get("cfg") or {}
    model_cfg = cfg.get("model", cfg) if isinstance(cfg, dict) else {}
    args = obj.get("args")
    if heads is None:
        heads = (model_cfg.get("encoder_attention_heads") if isinstance(model_cfg, dict) else None) \
            or (getattr(args, "encoder_attention_heads", None) if args is not None else None)
    out, skipped = {}, []
    for k, v in sd.items():
        hf = fair_name(k)
        if hf is None:
            skipped.append(k)
            continue
        out[hf] = v
    if skipped:
        raise SystemExit("unknown fair-esm keys: %s" % ", ".join(skipped[:8]))
    if heads is None:
        raise SystemExit("the checkpoint does not say its number of heads: pass --num-heads")
    emb = out["esm.embeddings.word_embeddings.weight"]
    layers = 1 + max(int(re.match(r"esm\.encoder\.layer\.(\d+)\.", k).group(1))
                     for k in out if k.startswith("esm.encoder.layer."))
    ffn = out["esm.encoder.layer.0.intermediate.dense.weight"].shape[0]
    config = {"architectures": ["EsmForMaskedLM"], "model_type": "esm",
              "vocab_size": emb.shape[0], "hidden_size": emb.shape[1],
              "num_hidden_layers": layers, "num_attention_heads": int(heads),
              "intermediate_size": ffn, "max_position_embeddings": 1026,
              "position_embedding_type": "rotary", "token_dropout": True,
              "emb_layer_norm_before": False, "layer_norm_eps": 1e-5, "pad_token_id": 1,
              "mask_token_id": 32, "hidden_act": "gelu"}
    return out, config


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("out_dir")
    ap.add_argument("--num-heads", type=int, default=None)
    a = ap.parse_args()
    import torch
    src = a.input
    config = None
    if os.path.isdir(src):
        with open(os.path.join(src, "config.json")) as f:
            config = json.load(f)
        src = os.path.join(src, "pytorch_model.bin")
    obj = torch.load(src, map_location="cpu")
    if isinstance(obj, dict) and "model" in obj and isinstance(obj["model"], dict):
        tensors, config = convert_fair(obj, a.num_heads)
    else:  # a Hugging Face state dict
        tensors = obj
        if config is None:
            cj = os.path.join(os.path.dirname(os.path.abspath(src)), "config.json")
            if not os.path.exists(cj):
                raise SystemExit("a Hugging Face .bin needs its config.json beside it")
            with open(cj) as f:
                config = json.load(f)
    os.makedirs(a.out_dir, exist_ok=False)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_safetensors({k: v for k, v in tensors.items() if hasattr(v, "dtype")},
                     os.path.join(a.out_dir, "model.safetensors"))
    print("wrote %s (%d tensors)" % (a.out_dir, len(tensors)))


if __name__ == "__main__":
    sys.exit(main())
