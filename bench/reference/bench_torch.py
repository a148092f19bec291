#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch peer benchmark: one ESM-2 MLM training step with fair-esm + AdamW.

    /usr/bin/python3 bench/reference/bench_torch.py --model esm2_t6_8M \
        --threads 2 --batch 4 --seq 512 --steps 5

fair-esm `ESM2` (alphabet ESM-1b, token dropout on), fp32, CPU, HF-style init
(normal(0, 0.02) Linear/Embedding weights, zero biases, LN 1/0, pad row 0),
`torch.optim.AdamW(lr=4e-4, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01)`.
Batches are synthetic protein-like rows: <cls> + random residues (ids 4..23)
+ <eos>, all full length (no padding); 15% of residues selected, 80/10/10
mask/random/unchanged; loss = cross-entropy mean over selected positions.
Batches are generated before timing. After --warmup steps (default 2),
--steps steps are timed; throughput counts B*T tokens per step.
The last line is machine readable:

    TORCH_RESULT model=<name> batch=<B> seq=<T> threads=<N> tokens_per_s=<f> step_ms=<f>

Use Debian's /usr/bin/python3 (scripts/setup_reference_env.sh installs
fair-esm for it).
"""
import argparse
import os
import sys
import time


def _preparse_threads():
    # The BLAS (OpenBLAS pthread under Debian's torch) and OpenMP pools read
    # their sizes at load time: make --threads govern them too, before torch
    # is imported.
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    n = max(1, p.parse_known_args()[0].threads)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


_preparse_threads()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import esm  # noqa: E402
from esm.model.esm2 import ESM2  # noqa: E402

# name: (num_layers, embed_dim, attention_heads), per the spec size table
MODELS = {
    "esm2_t6_8M": (6, 320, 20),
    "esm2_t12_35M": (12, 480, 20),
    "esm2_t30_150M": (30, 640, 20),
    "esm2_t33_650M": (33, 1280, 20),
    "esm2_t36_3B": (36, 2560, 40),
    "esm2_t48_15B": (48, 5120, 40),
}
CLS, PAD, EOS, MASK = 0, 1, 2, 32


def hf_init(model, gen):
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.Linear):
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=gen) * 0.02)
                if mod.bias is not None:
                    mod.bias.zero_()
            elif isinstance(mod, torch.nn.Embedding):
                mod.weight.copy_(torch.randn(mod.weight.shape, generator=gen) * 0.02)
                if mod.padding_idx is not None:
                    mod.weight[mod.padding_idx].zero_()
            elif isinstance(mod, torch.nn.LayerNorm):
                mod.weight.fill_(1.0)
                mod.bias.zero_()
        model.lm_head.bias.zero_()


def make_batch(B, T, gen):
    assert T >= 3
    tokens = torch.randint(4, 24, (B, T), generator=gen)
    tokens[:, 0], tokens[:, -1] = CLS, EOS
    residue = torch.zeros((B, T), dtype=torch.bool)
    residue[:, 1:-1] = True
    selected = residue & (torch.rand((B, T), generator=gen) < 0.15)
    labels = torch.where(selected, tokens, torch.full_like(tokens, -100))
    u = torch.rand((B, T), generator=gen)
    inputs = tokens.clone()
    inputs[selected & (u < 0.8)] = MASK
    rnd = selected & (u >= 0.8) & (u < 0.9)
    inputs[rnd] = torch.randint(4, 24, (int(rnd.sum()),), generator=gen)
    return inputs, labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="esm2_t6_8M", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads < 1 or args.batch < 1 or args.steps < 1 or args.seq < 3:
        ap.error("threads, batch, steps must be >= 1 and seq >= 3")

    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    L, d, H = MODELS[args.model]
    alphabet = esm.data.Alphabet.from_architecture("ESM-1b")
    model = ESM2(num_layers=L, embed_dim=d, attention_heads=H, alphabet=alphabet,
                 token_dropout=True).float()
    hf_init(model, gen)
    model.train()
    nparams = sum(p.numel() for n, p in model.named_parameters()
                  if not n.startswith("contact_head."))
    opt = torch.optim.AdamW(model.parameters(), lr=4e-4, betas=(0.9, 0.98), eps=1e-8,
                            weight_decay=0.01)
    B, T = args.batch, args.seq
    batches = [make_batch(B, T, gen) for _ in range(args.warmup + args.steps)]

    print(f"bench_torch: {args.model} (L={L} d={d} H={H}, {nparams / 1e6:.2f}M params), "
          f"batch {B} x seq {T}, threads {torch.get_num_threads()}, fp32, "
          f"torch {torch.__version__}", flush=True)

    times = []
    for i, (inputs, labels) in enumerate(batches):
        t0 = time.perf_counter()
        logits = model(inputs)["logits"]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=-100)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        warm = i < args.warmup
        print(f"  {'warmup' if warm else 'step'} {i if warm else i - args.warmup}: "
              f"loss {loss.item():.4f}  total {1e3 * (t3 - t0):.1f} ms "
              f"(fwd {1e3 * (t1 - t0):.1f}, bwd {1e3 * (t2 - t1):.1f}, "
              f"opt {1e3 * (t3 - t2):.1f})", flush=True)
        if not warm:
            times.append((t1 - t0, t2 - t1, t3 - t2))

    n = len(times)
    fwd = sum(t[0] for t in times) / n
    bwd = sum(t[1] for t in times) / n
    optt = sum(t[2] for t in times) / n
    step = fwd + bwd + optt
    tps = B * T / step
    print(f"mean step {1e3 * step:.1f} ms: forward {1e3 * fwd:.1f} ms, backward "
          f"{1e3 * bwd:.1f} ms, optimizer {1e3 * optt:.1f} ms; {tps:.1f} tokens/s")
    print(f"TORCH_RESULT model={args.model} batch={B} seq={T} threads={args.threads} "
          f"tokens_per_s={tps:.3f} step_ms={1e3 * step:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
