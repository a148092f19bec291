# SPDX-License-Identifier: MIT
"""fair-esm's ESM2 module holding the weights of a transformers EsmForMaskedLM.

fair-esm builds ESM2 from (layers, width, heads) alone: the feed-forward is 4x
the width, attention has biases, LayerNorm eps is 1e-5 (torch's, without apex)
and there is no position limit (rotary). from_hf refuses a config outside that
shape rather than compare two different models.
"""
import torch


def _renames(num_layers):
    m = {
        "esm.embeddings.word_embeddings.weight": "embed_tokens.weight",
        "esm.encoder.emb_layer_norm_after.weight": "emb_layer_norm_after.weight",
        "esm.encoder.emb_layer_norm_after.bias": "emb_layer_norm_after.bias",
        "esm.contact_head.regression.weight": "contact_head.regression.weight",
        "esm.contact_head.regression.bias": "contact_head.regression.bias",
        "lm_head.dense.weight": "lm_head.dense.weight",
        "lm_head.dense.bias": "lm_head.dense.bias",
        "lm_head.layer_norm.weight": "lm_head.layer_norm.weight",
        "lm_head.layer_norm.bias": "lm_head.layer_norm.bias",
        "lm_head.bias": "lm_head.bias",
    }
    parts = {
        "attention.self.query": "self_attn.q_proj",
        "attention.self.key": "self_attn.k_proj",
        "attention.self.value": "self_attn.v_proj",
        "attention.output.dense": "self_attn.out_proj",
        "attention.LayerNorm": "self_attn_layer_norm",
        "intermediate.dense": "fc1",
        "output.dense": "fc2",
        "LayerNorm": "final_layer_norm",
    }
    for i in range(num_layers):
        for hf, fair in parts.items():
            for p in ("weight", "bias"):
                m["esm.encoder.layer.%d.%s.%s" % (i, hf, p)] = "layers.%d.%s.%s" % (i, fair, p)
    return m


def from_hf(hf):
    """A float64 fair-esm ESM2 (eval mode) with hf's weights, its contact head included."""
    import esm
    from esm.model.esm2 import ESM2
    c = hf.config
    if (c.intermediate_size != 4 * c.hidden_size or c.position_embedding_type != "rotary"
            or c.emb_layer_norm_before or abs(c.layer_norm_eps - 1e-5) > 1e-12
            or c.vocab_size != 33):
        raise ValueError("config outside fair-esm's ESM2 shape")
    fair = ESM2(num_layers=c.num_hidden_layers, embed_dim=c.hidden_size,
                attention_heads=c.num_attention_heads,
                alphabet=esm.data.Alphabet.from_architecture("ESM-1b"),
                token_dropout=c.token_dropout)
    src = hf.state_dict()
    names = _renames(c.num_hidden_layers)
    state = {fair_name: src[hf_name] for hf_name, fair_name in names.items()}
    state["lm_head.weight"] = src["esm.embeddings.word_embeddings.weight"]  # tied
    own = fair.state_dict()
    for k in own:  # the rotary inv_freq buffers are fair-esm's own
        if k not in state:
            if not k.endswith("rot_emb.inv_freq"):
                raise KeyError("no transformers weight for fair-esm's %s" % k)
            state[k] = own[k]
    fair.load_state_dict(state, strict=True)
    return fair.double().eval()
