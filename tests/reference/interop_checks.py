# SPDX-License-Identifier: MIT
"""What the interop tests against transformers share (test_contacts.py,
test_embed_attention.py, test_embed.py): a tally of checks, the random
ESM-2 model they export and compare against, and real proteins picked by
length."""
import esm_fasta

passed = failures = 0


def check(ok, what):
    """Counts ok as a pass, else prints what failed; returns ok."""
    global failures, passed
    if ok:
        passed += 1
    else:
        failures += 1
        print("FAILED: %s" % what)
    return ok


def summary(seconds):
    """The final tally line; the exit status (1 when a check failed)."""
    print("%d passed, %d failed (%.0f s)" % (passed, failures, seconds))
    return 1 if failures else 0


def random_esm(hidden, layers, heads, ffn, max_positions, seed):
    """A random EsmForMaskedLM (rotary, token dropout, no dropout) from
    torch seed `seed`, LayerNorms and biases perturbed and query/key
    weights scaled by 4: sharper attention than the initialiser's
    near-uniform maps."""
    import torch
    from transformers import EsmConfig, EsmForMaskedLM
    cfg = EsmConfig(vocab_size=33, hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=heads, intermediate_size=ffn,
                    max_position_embeddings=max_positions, position_embedding_type="rotary",
                    token_dropout=True, pad_token_id=1, mask_token_id=32,
                    emb_layer_norm_before=False, layer_norm_eps=1e-5, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    hf = EsmForMaskedLM(cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.05)
            if name.endswith("attention.self.query.weight") or name.endswith(
                    "attention.self.key.weight"):
                p.mul_(4.0)
    return hf


def usable(seq):
    """Every letter of seq (either case) is in the ESM-2 alphabet."""
    return all(c.upper() in esm_fasta.TOK for c in set(seq))


def pick_near(recs, lengths, longest=None):
    """(first word of the id, sequence) of a different usable record for
    each length: the nearest in length, the first of equals; none longer
    than `longest`. The alphabet is checked once a record (a database of
    20,000 proteins took seconds a length otherwise)."""
    ok = [i for i, (_, s) in enumerate(recs)
          if (longest is None or len(s) <= longest) and usable(s)]
    out, used = [], set()
    for n in lengths:
        best = min((i for i in ok if i not in used), key=lambda i: (abs(len(recs[i][1]) - n), i))
        used.add(best)
        out.append((recs[best][0].split()[0], recs[best][1]))
    return out
