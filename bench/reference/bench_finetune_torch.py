#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The PyTorch peer of bench/bench_finetune.c: transformers'
EsmForSequenceClassification with a peft LoRA adapter (query and value,
alpha 2 x rank, task SEQ_CLS), fp32, AdamW lr 1e-4, gradients clipped to
1, on the CPU, over the same data directory (shape.txt, tokens.i32,
targets.f32) and the same batches:

    bench_finetune_torch.py make-data DB.fasta.gz OUT_DIR BATCHES B T
    bench_finetune_torch.py run DATA_DIR THREADS LAYERS HIDDEN HEADS RANK DROPOUT WARMUP STEPS

make-data: B x BATCHES real proteins of DB.fasta.gz (every 7th record), each
<cls> + its first T - 2 residues + <eos>, right-padded with <pad>; target 1
when the protein is longer than the sample's median, else 0. Timed in run:
the steps after WARMUP (forward, backward, clip, step), not the model build.
The last line is machine readable:

    TORCH_FINETUNE_RESULT steps=S tokens=N seconds=F tokens_per_s=F first_loss=F last_loss=F

Use Debian's /usr/bin/python3 (scripts/setup_reference_env.sh).
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "reference"))
from esm_fasta import CLS, EOS, PAD, read_fasta, tokens  # noqa: E402


def make_data(fasta, out, batches, B, T):
    recs = [r for i, r in enumerate(read_fasta(fasta)) if i % 7 == 0][:batches * B]
    if len(recs) < batches * B:
        raise SystemExit("%s: %d proteins, %d needed" % (fasta, len(recs), batches * B))
    seqs = [r[1] for r in recs]
    median = float(np.median([len(s) for s in seqs]))
    tok = np.full((batches * B, T), PAD, dtype=np.int32)
    for i, s in enumerate(seqs):
        t = tokens(s[:T - 2])
        tok[i, 0] = CLS
        tok[i, 1:1 + len(t)] = t
        tok[i, 1 + len(t)] = EOS
    y = np.array([1.0 if len(s) > median else 0.0 for s in seqs], dtype=np.float32)
    os.makedirs(out, exist_ok=True)
    tok.tofile(os.path.join(out, "tokens.i32"))
    y.tofile(os.path.join(out, "targets.f32"))
    with open(os.path.join(out, "shape.txt"), "w") as f:
        f.write("%d %d %d\n" % (batches, B, T))


def run(data, threads, layers, hidden, heads, rank, dropout, warmup, steps):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import EsmConfig, EsmForSequenceClassification
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    batches, B, T = map(int, open(os.path.join(data, "shape.txt")).read().split())
    tok = torch.from_numpy(np.fromfile(os.path.join(data, "tokens.i32"), np.int32)
                           .reshape(batches, B, T).astype(np.int64))
    y = torch.from_numpy(np.fromfile(os.path.join(data, "targets.f32"), np.float32)
                         .reshape(batches, B).astype(np.int64))
    cfg = EsmConfig(vocab_size=33, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=heads, intermediate_size=4 * hidden,
                    max_position_embeddings=max(T, 1024) + 2, position_embedding_type="rotary",
                    token_dropout=True, emb_layer_norm_before=False, pad_token_id=PAD,
                    mask_token_id=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    num_labels=2, problem_type="single_label_classification")
    model = get_peft_model(EsmForSequenceClassification(cfg),
                           LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=dropout,
                                      target_modules=["query", "value"], task_type="SEQ_CLS"))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    first = last = 0.0
    counted, t0 = 0, 0.0
    for s in range(warmup + steps):
        if s == warmup:
            t0 = time.perf_counter()
        k = s % batches
        ids = tok[k]
        out = model(input_ids=ids, attention_mask=(ids != PAD).long(), labels=y[k])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if s == 0:
            first = float(out.loss)
        last = float(out.loss)
        if s >= warmup:
            counted += B * T
    secs = time.perf_counter() - t0
    print("TORCH_FINETUNE_RESULT steps=%d tokens=%d seconds=%.4f tokens_per_s=%.1f "
          "first_loss=%.5f last_loss=%.5f" % (steps, counted, secs, counted / secs, first, last))


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "make-data":
        make_data(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7]))
    elif len(sys.argv) == 11 and sys.argv[1] == "run":
        a = sys.argv[2:]
        run(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]), int(a[5]), float(a[6]), int(a[7]),
            int(a[8]))
    else:
        raise SystemExit(__doc__)
