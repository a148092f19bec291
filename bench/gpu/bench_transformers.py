#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The peer for the GPU benchmarks (issues #7 and #8): transformers'
EsmForMaskedLM training steps on this GPU with torch.autocast (bf16 or fp16,
with a GradScaler for fp16), AdamW, the fastest attention transformers
offers for ESM (sdpa when available), on the same shapes as
`esmtrain-example bench` (synthetic protein-like batches, 15% masking) or on
real batches from an ingested dataset's FASTA. Prints one line
PEER_RESULT model=... tokens_per_s=... real_tokens_per_s=... peak_mem_gib=...

Usage: bench_transformers.py --model esm2_t33_650M --batch 8 --seq 512
                             --dtype bf16 --steps 10 [--fasta DB.fasta.gz]"""
import argparse
import gzip
import os
import random
import sys
import time

# bench/record.py: one results line per figure
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from record import record  # noqa: E402

import torch
from transformers import EsmConfig, EsmForMaskedLM

SIZES = {  # layers, width, heads (ESM-2 as published)
    "esm2_t6_8M": (6, 320, 20), "esm2_t12_35M": (12, 480, 20), "esm2_t30_150M": (30, 640, 20),
    "esm2_t33_650M": (33, 1280, 20), "esm2_t36_3B": (36, 2560, 40)}
AA = "LAGVSERTIDPKQNFYMHWC"  # ids 4.. in the ESM alphabet order


def read_fasta(path, limit):
    op = gzip.open if path.endswith(".gz") else open
    seqs, cur = [], []
    with op(path, "rt") as f:
        for line in f:
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                    if len(seqs) >= limit:
                        break
                cur = []
            else:
                cur.append(line.strip())
    if cur and len(seqs) < limit:
        seqs.append("".join(cur))
    return seqs


def batch_from(seqs, B, T, rng):
    tok = torch.full((B, T), 1, dtype=torch.long)  # <pad>
    for b in range(B):
        s = seqs[rng.randrange(len(seqs))] if seqs else "".join(rng.choice(AA) for _ in range(rng.randrange(T // 2, T)))
        s = s[: T - 2]
        ids = [0] + [4 + AA.index(c) if c in AA else 3 for c in s] + [2]
        tok[b, : len(ids)] = torch.tensor(ids)
    labels = torch.full_like(tok, -100)
    real = (tok > 3)
    sel = real & (torch.rand(tok.shape) < 0.15)
    labels[sel] = tok[sel]
    inp = tok.clone()
    inp[sel & (torch.rand(tok.shape) < 0.8)] = 32  # <mask>
    return inp, labels, int((tok != 1).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="esm2_t33_650M")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--fasta", default=None)
    a = ap.parse_args()
    L, d, H = SIZES[a.model]
    cfg = EsmConfig(vocab_size=33, hidden_size=d, num_hidden_layers=L, num_attention_heads=H,
                    intermediate_size=4 * d, max_position_embeddings=max(1026, a.seq + 2),
                    position_embedding_type="rotary", token_dropout=True, mask_token_id=32,
                    pad_token_id=1, emb_layer_norm_before=False)
    attn = "default"
    try:
        model = EsmForMaskedLM._from_config(cfg, attn_implementation="sdpa")
        attn = "sdpa"
    except Exception:  # older transformers: eager only for ESM
        model = EsmForMaskedLM(cfg)
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=4e-4, betas=(0.9, 0.98), weight_decay=0.01,
                            fused=True)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    scaler = torch.cuda.amp.GradScaler(enabled=a.dtype == "fp16")
    rng = random.Random(1)
    seqs = read_fasta(a.fasta, 20000) if a.fasta else []
    batches = [batch_from(seqs, a.batch, a.seq, rng) for _ in range(a.warmup + a.steps)]
    torch.cuda.reset_peak_memory_stats()
    tokens = 0
    for i, (inp, lab, real) in enumerate(batches):
        if i == a.warmup:
            torch.cuda.synchronize()
            t0 = time.time()
            tokens = 0
        inp, lab = inp.cuda(non_blocking=True), lab.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=dt):
            loss = model(input_ids=inp, attention_mask=(inp != 1), labels=lab).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        tokens += real
    torch.cuda.synchronize()
    secs = time.time() - t0
    print(f"PEER_RESULT model={a.model} batch={a.batch} seq={a.seq} dtype={a.dtype} attn={attn} "
          f"data={'fasta' if seqs else 'synthetic'} tokens_per_s={tokens / secs:.1f} "
          f"step_ms={1e3 * secs / a.steps:.1f} loss={loss.item():.4f} "
          f"peak_mem_gib={torch.cuda.max_memory_allocated() / 2**30:.2f} "
          f"gpu={torch.cuda.get_device_name(0).replace(' ', '_')}")
    record("gpu_peer_transformers_step", f"{a.model} {a.dtype} {a.batch}x{a.seq}, attn {attn}, "
           f"{'fasta' if seqs else 'synthetic'} data", "python3 " + " ".join(sys.argv),
           {"tokens_per_s": (tokens / secs, "tok/s"), "step_ms": (1e3 * secs / a.steps, "ms"),
            "peak_mem": (torch.cuda.max_memory_allocated() / 2**30, "GiB")})


if __name__ == "__main__":
    main()
