"""Random Qwen3, Llama 3, Qwen3-MoE and dense Qwen3.5 targets and DFlash drafters with odd
sizes, in Hugging Face layouts.

Written with this folder's safetensors writer (not dscale make-tiny): tensors named and
ordered as transformers' Qwen3ForCausalLM / LlamaForCausalLM / Qwen3MoeForCausalLM state dicts
(model.embed_tokens, model.layers.i.*, model.norm, lm_head; Llama's layers without
q_norm/k_norm; a Qwen3-MoE sparse layer's mlp.gate and mlp.experts.e.*), and named as
z-lab's DFlashDraftModel checkpoints are (fc, hidden_norm, layers.i.*, norm).

  /usr/bin/python3 make_random_pair.py OUT_DIR    # writes every variant under OUT_DIR
"""
import json
import os
import sys

import torch

import hf_safetensors as st

# Sizes the C++ accepts (head_dim even, heads divisible by kv heads) but nothing rounds:
# odd hidden and intermediate sizes, q_dim (66) != hidden (75), 3 query heads sharing 1 kv
# head. rms_norm_eps and rope_theta differ from Qwen3's defaults so that reading them matters.
TARGET = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "vocab_size": 333, "hidden_size": 75, "intermediate_size": 101, "num_hidden_layers": 4,
    "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 22,
    "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
    "tie_word_embeddings": False, "use_cache": True, "use_sliding_window": False,
    "sliding_window": None, "bos_token_id": 1, "eos_token_id": [2, 3], "torch_dtype": "bfloat16",
}

# Llama 3 targets. GQA: 4 query heads over 2 kv heads, no head_dim (72 / 4 = 18 implied),
# llama3 rope_scaling with an original context of 32 positions: of the 9 frequencies (wavelengths
# 6.3, 17.5, 48.6, ... positions at θ 10000) the first is kept, the second on the ramp between
# 32/4 and 32/1, the rest divided by 8. MHA: 5 heads of 14 over 5 kv heads (q_dim 70 != hidden
# 75), other scaling factors and an original context of 16.
LLAMA_GQA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 333, "hidden_size": 72, "intermediate_size": 101, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2,
    "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
    "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "pretraining_tp": 1,
    "tie_word_embeddings": False, "use_cache": True,
    "bos_token_id": 1, "eos_token_id": [2, 3], "torch_dtype": "bfloat16",
}
LLAMA_MHA = dict(
    LLAMA_GQA, hidden_size=75, num_attention_heads=5, num_key_value_heads=5, head_dim=14,
    rope_theta=20000.0,
    rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 0.5,
                  "high_freq_factor": 2.0, "original_max_position_embeddings": 16})

# Qwen3-MoE targets, dense and sparse layers mixed. MOE_NORM: 7 experts of width 37 (odd, and
# not the dense layers' 101), top 3 renormalised, layer 2 dense by mlp_only_layers (0, 1 and 3
# sparse). MOE_RAW: top 2 of 5 as the softmax gives them (norm_topk_prob false), sparse every
# second layer (1 and 3) and none listed dense.
MOE_NORM = dict(
    TARGET, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=7,
    num_experts_per_tok=3, moe_intermediate_size=37, norm_topk_prob=True, decoder_sparse_step=1,
    mlp_only_layers=[2], max_window_layers=4, output_router_logits=False,
    router_aux_loss_coef=0.001)
MOE_RAW = dict(MOE_NORM, num_experts=5, num_experts_per_tok=2, norm_topk_prob=False,
               decoder_sparse_step=2, mlp_only_layers=[])

# Drafter A: 2 layers with their own head layout (4 heads over 2 kv heads of dim 14), an odd
# block of 7, and target_layer_ids out of order (features concatenate in list order).
DRAFTER_A = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
    "vocab_size": 333, "hidden_size": 75, "intermediate_size": 53, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 14, "hidden_act": "silu",
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "block_size": 7, "num_target_layers": 4,
    "dflash_config": {"mask_token_id": 330, "target_layer_ids": [2, 0]},
}

# Drafter B: 1 layer, 5 heads without grouping, block 5, no target_layer_ids (z-lab's rule
# gives the middle layer, 2), mask id at the last vocabulary row; its tensors carry a "model."
# prefix, as some exports write them.
DRAFTER_B = {
    "architectures": ["DFlashDraftModel"], "model_type": "qwen3",
    "vocab_size": 333, "hidden_size": 75, "intermediate_size": 37, "num_hidden_layers": 1,
    "num_attention_heads": 5, "num_key_value_heads": 5, "head_dim": 8, "hidden_act": "silu",
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 5000.0,
    "tie_word_embeddings": False, "torch_dtype": "float16",
    "block_size": 5, "num_target_layers": 4, "dflash_config": {"mask_token_id": 332},
}

# Drafter L, for LLAMA_GQA (hidden 72): 2 layers of 3 heads over 1 kv head of 16, block 6, and
# the target's llama3 RoPE (a drafter's RoPE is its own config's).
DRAFTER_L = dict(
    DRAFTER_A, hidden_size=72, num_attention_heads=3, num_key_value_heads=1, head_dim=16,
    block_size=6, rope_theta=LLAMA_GQA["rope_theta"], rope_scaling=LLAMA_GQA["rope_scaling"],
    dflash_config={"mask_token_id": 331, "target_layer_ids": [1, 3]})

# Dense Qwen3.5 targets (Gated DeltaNet layers among gated full-attention ones). HYBRID_MM: the
# multimodal layout (text_config; tensors under model.language_model. beside vision and mtp
# tensors the text model must not read), layer_types given, 3 query heads over 1 kv head of 24
# with a quarter rotated (6 dims), 3 key heads over 6 value heads (ratio 2) of dims 10 and 13,
# conv kernel 4. HYBRID_TEXT: Qwen3_5ForCausalLM at the top level, full_attention_interval 2
# (layers 1 and 3 attend), 5 query heads over 1 kv head of 16 with half rotated (8 dims) from
# top-level RoPE fields, 3 key heads over 3 value heads (ratio 1) of dims 12 and 9, kernel 3.
HYBRID_MM_TEXT = {
    "model_type": "qwen3_5_text",
    "vocab_size": 333, "hidden_size": 75, "intermediate_size": 101, "num_hidden_layers": 5,
    "layer_types": ["linear_attention", "full_attention", "linear_attention",
                    "linear_attention", "full_attention"],
    "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 24,
    "linear_num_key_heads": 3, "linear_num_value_heads": 6, "linear_key_head_dim": 10,
    "linear_value_head_dim": 13, "linear_conv_kernel_dim": 4,
    "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 1],
                        "mrope_interleaved": True},
    "attn_output_gate": True, "attention_bias": False, "attention_dropout": 0.0,
    "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": [2, 3],
}
HYBRID_MM = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
    "text_config": HYBRID_MM_TEXT, "vision_config": {"depth": 1, "hidden_size": 8},
    "tie_word_embeddings": False,
}
HYBRID_TEXT = {
    "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
    "vocab_size": 333, "hidden_size": 75, "intermediate_size": 101, "num_hidden_layers": 4,
    "full_attention_interval": 2,
    "num_attention_heads": 5, "num_key_value_heads": 1, "head_dim": 16,
    "linear_num_key_heads": 3, "linear_num_value_heads": 3, "linear_key_head_dim": 12,
    "linear_value_head_dim": 9, "linear_conv_kernel_dim": 3,
    "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
    "rope_theta": 5000.0, "partial_rotary_factor": 0.5,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
}
# The mixtures of experts: HYBRID_MOE_MM is HYBRID_MM's text model with 7 experts of 13, top 3,
# and a shared expert of 11 in place of the dense MLP (Qwen3_5MoeForConditionalGeneration);
# HYBRID_MOE_TEXT is HYBRID_TEXT's with 5 experts of 17, top 2, a shared expert of 9
# (Qwen3_5MoeForCausalLM).
def _moe_text(text, model_type, experts, top_k, inter, shared):
    out = {k: v for k, v in text.items() if k != "intermediate_size"}
    out.update({"model_type": model_type, "num_experts": experts, "num_experts_per_tok": top_k,
                "moe_intermediate_size": inter, "shared_expert_intermediate_size": shared})
    return out


HYBRID_MOE_MM = dict(HYBRID_MM, architectures=["Qwen3_5MoeForConditionalGeneration"],
                     model_type="qwen3_5_moe",
                     text_config=_moe_text(HYBRID_MM_TEXT, "qwen3_5_moe_text", 7, 3, 13, 11))
HYBRID_MOE_TEXT = dict(_moe_text(HYBRID_TEXT, "qwen3_5_moe_text", 5, 2, 17, 9),
                       architectures=["Qwen3_5MoeForCausalLM"])

# name: (target dtype, target shards, tied, drafter config, drafter dtype, drafter shards, prefix,
#        target config)
VARIANTS = {
    "bf16_sharded": ("BF16", 2, False, DRAFTER_A, "BF16", 1, "", TARGET),
    "f16_tied": ("F16", 1, True, DRAFTER_B, "F16", 2, "model.", TARGET),
    "f32_sharded_tied": ("F32", 2, True, DRAFTER_A, "F32", 1, "", TARGET),
    "llama_gqa_bf16": ("BF16", 2, False, DRAFTER_L, "BF16", 1, "", LLAMA_GQA),
    "llama_gqa_f32_tied": ("F32", 1, True, DRAFTER_L, "F32", 1, "", LLAMA_GQA),
    "llama_mha_bf16_tied": ("BF16", 1, True, DRAFTER_B, "BF16", 1, "", LLAMA_MHA),
    "llama_mha_f16": ("F16", 1, False, DRAFTER_B, "F16", 2, "model.", LLAMA_MHA),
    "moe_norm_bf16_sharded": ("BF16", 2, False, DRAFTER_A, "BF16", 1, "", MOE_NORM),
    "moe_raw_f32_tied": ("F32", 1, True, DRAFTER_B, "F32", 1, "model.", MOE_RAW),
}


def is_sparse_layer(cfg, layer):
    """Qwen3MoeDecoderLayer's rule (hf_reference.is_sparse_layer, restated so that this writer
    does not depend on the reference it is checked against)."""
    return (layer not in (cfg.get("mlp_only_layers") or []) and cfg.get("num_experts", 0) > 0
            and (layer + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def _mlp_tensors(gen, cfg, prefix, sparse, mat):
    h = cfg["hidden_size"]
    if not sparse:
        i = cfg["intermediate_size"]
        return [(prefix + "mlp.gate_proj.weight", mat(i, h)),
                (prefix + "mlp.up_proj.weight", mat(i, h)),
                (prefix + "mlp.down_proj.weight", mat(h, i))]
    mi = cfg["moe_intermediate_size"]
    # Router rows N(0, 1/h): logits of unit scale, so the routing weights spread.
    out = [(prefix + "mlp.gate.weight", mat(cfg["num_experts"], h))]
    for e in range(cfg["num_experts"]):
        out += [(prefix + f"mlp.experts.{e}.gate_proj.weight", mat(mi, h)),
                (prefix + f"mlp.experts.{e}.up_proj.weight", mat(mi, h)),
                (prefix + f"mlp.experts.{e}.down_proj.weight", mat(h, mi))]
    return out


def _layer_tensors(gen, cfg, prefix, in_features, sparse=False):
    """One decoder layer in transformers' module order. Scales keep activations O(1):
    projections N(0, 1/fan_in), norm weights 1 + N(0, 0.2²) (so a missing norm shows).
    Llama layers (model_type "llama") have no q_norm/k_norm; a sparse layer has the router
    and experts in place of the dense MLP."""
    h = cfg["hidden_size"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    qk_norm = cfg.get("model_type") != "llama"
    q_dim, kv_dim = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd

    def mat(rows, cols):
        return torch.randn(rows, cols, generator=gen, dtype=torch.float64) / cols ** 0.5

    def norm(n):
        return 1.0 + 0.2 * torch.randn(n, generator=gen, dtype=torch.float64)

    out = [
        (prefix + "self_attn.q_proj.weight", mat(q_dim, in_features)),
        (prefix + "self_attn.k_proj.weight", mat(kv_dim, in_features)),
        (prefix + "self_attn.v_proj.weight", mat(kv_dim, in_features)),
        (prefix + "self_attn.o_proj.weight", mat(h, q_dim)),
    ]
    if qk_norm:
        out += [(prefix + "self_attn.q_norm.weight", norm(hd)),
                (prefix + "self_attn.k_norm.weight", norm(hd))]
    return out + _mlp_tensors(gen, cfg, prefix, sparse, mat) + [
        (prefix + "input_layernorm.weight", norm(h)),
        (prefix + "post_attention_layernorm.weight", norm(h)),
    ]


def target_tensors(cfg, seed, tied):
    gen = torch.Generator().manual_seed(seed)
    h, v = cfg["hidden_size"], cfg["vocab_size"]
    # Rows N(0, 4/h): with a tied head, logits of a few units like the untied one.
    out = [("model.embed_tokens.weight", 2.0 * torch.randn(v, h, generator=gen, dtype=torch.float64) / h ** 0.5)]
    for layer in range(cfg["num_hidden_layers"]):
        out += _layer_tensors(gen, cfg, f"model.layers.{layer}.", h, is_sparse_layer(cfg, layer))
    out.append(("model.norm.weight", 1.0 + 0.2 * torch.randn(h, generator=gen, dtype=torch.float64)))
    # Logits of a few units: N(0, 4/h) rows against a final-normed hidden state of norm ~sqrt(h).
    lm_head = 2.0 * torch.randn(v, h, generator=gen, dtype=torch.float64) / h ** 0.5
    if not tied:
        out.append(("lm_head.weight", lm_head))
    return out


def _hybrid_layer_types(tc):
    """Restated from the published rule (not imported from the reference under test)."""
    if tc.get("layer_types"):
        return tc["layer_types"]
    every = tc.get("full_attention_interval", 4)
    return ["full_attention" if (i + 1) % every == 0 else "linear_attention"
            for i in range(tc["num_hidden_layers"])]


def hybrid_target_tensors(cfg, seed, tied):
    """A Qwen3.5 target's tensors (both layouts, dense or with experts: the router N(0, 1/H), the
    fused experts and the shared expert's projections N(0, 1/in)), named as transformers' state
    dict. Norms
    zero-centred 0.2·N(0, 1) (the model multiplies by 1 + w) but the Gated DeltaNet's own gated
    norm, 1 + 0.2·N(0, 1); conv taps N(0, 1/K); A_log U(−2, 0.5) and dt_bias U(−1, 1), so the
    state decays by 0.3..0.95 a step and carries over positions. The multimodal layout also gets
    a vision tensor and an mtp tensor, which the text model leaves unread."""
    gen = torch.Generator().manual_seed(seed)
    multimodal = "text_config" in cfg
    tc = cfg["text_config"] if multimodal else cfg
    p = "model.language_model." if multimodal else "model."
    h, v, inter = tc["hidden_size"], tc["vocab_size"], tc.get("intermediate_size")
    hd, nh, nkv = tc["head_dim"], tc["num_attention_heads"], tc["num_key_value_heads"]
    hk, hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    dk, dv, kernel = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]

    def mat(rows, cols):
        return torch.randn(rows, cols, generator=gen, dtype=torch.float64) / cols ** 0.5

    def centred(n):
        return 0.2 * torch.randn(n, generator=gen, dtype=torch.float64)

    def uniform(n, lo, hi):
        return lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)

    out = [(p + "embed_tokens.weight", 2.0 * torch.randn(v, h, generator=gen, dtype=torch.float64) / h ** 0.5)]
    for layer, kind in enumerate(_hybrid_layer_types(tc)):
        at = f"{p}layers.{layer}."
        if kind == "linear_attention":
            conv_dim = 2 * hk * dk + hv * dv
            la = at + "linear_attn."
            out += [(la + "in_proj_qkv.weight", mat(conv_dim, h)),
                    (la + "in_proj_z.weight", mat(hv * dv, h)),
                    (la + "in_proj_b.weight", mat(hv, h)),
                    (la + "in_proj_a.weight", mat(hv, h)),
                    (la + "conv1d.weight",
                     torch.randn(conv_dim, 1, kernel, generator=gen, dtype=torch.float64) / kernel ** 0.5),
                    (la + "A_log", uniform(hv, -2.0, 0.5)),
                    (la + "dt_bias", uniform(hv, -1.0, 1.0)),
                    (la + "norm.weight", 1.0 + centred(dv)),
                    (la + "out_proj.weight", mat(h, hv * dv))]
        else:
            sa = at + "self_attn."
            out += [(sa + "q_proj.weight", mat(2 * nh * hd, h)),
                    (sa + "k_proj.weight", mat(nkv * hd, h)),
                    (sa + "v_proj.weight", mat(nkv * hd, h)),
                    (sa + "o_proj.weight", mat(h, nh * hd)),
                    (sa + "q_norm.weight", centred(hd)),
                    (sa + "k_norm.weight", centred(hd))]
        if "num_experts" in tc:
            e, mi, si = tc["num_experts"], tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"]
            # Fused experts: parameters named without ".weight".
            out += [(at + "mlp.gate.weight", mat(e, h)),
                    (at + "mlp.experts.gate_up_proj",
                     torch.randn(e, 2 * mi, h, generator=gen, dtype=torch.float64) / h ** 0.5),
                    (at + "mlp.experts.down_proj",
                     torch.randn(e, h, mi, generator=gen, dtype=torch.float64) / mi ** 0.5),
                    (at + "mlp.shared_expert.gate_proj.weight", mat(si, h)),
                    (at + "mlp.shared_expert.up_proj.weight", mat(si, h)),
                    (at + "mlp.shared_expert.down_proj.weight", mat(h, si)),
                    (at + "mlp.shared_expert_gate.weight", mat(1, h))]
        else:
            out += [(at + "mlp.gate_proj.weight", mat(inter, h)),
                    (at + "mlp.up_proj.weight", mat(inter, h)),
                    (at + "mlp.down_proj.weight", mat(h, inter))]
        out += [(at + "input_layernorm.weight", centred(h)),
                (at + "post_attention_layernorm.weight", centred(h))]
    out.append((p + "norm.weight", centred(h)))
    lm_head = 2.0 * torch.randn(v, h, generator=gen, dtype=torch.float64) / h ** 0.5
    if not tied:
        out.append(("lm_head.weight", lm_head))
    if multimodal:
        out += [("model.visual.patch_embed.proj.weight", mat(8, 12)),
                ("mtp.fc.weight", mat(h, 2 * h))]
    return out


# name: (config, dtype, shards, tied)
HYBRID_VARIANTS = {
    "hybrid_mm_bf16": (HYBRID_MM, "BF16", 2, False),
    "hybrid_mm_f32_tied": (HYBRID_MM, "F32", 1, True),
    "hybrid_text_bf16": (HYBRID_TEXT, "BF16", 1, False),
    "hybrid_text_f16_tied": (HYBRID_TEXT, "F16", 1, True),
    "hybrid_moe_mm_bf16": (HYBRID_MOE_MM, "BF16", 2, False),
    "hybrid_moe_text_f32_tied": (HYBRID_MOE_TEXT, "F32", 1, True),
}


def write_hybrid_target(out_dir, name, seed=7):
    """Writes one HYBRID_VARIANTS target as OUT/NAME; returns (dir, {name: values as written})."""
    cfg, dtype, shards, tie = HYBRID_VARIANTS[name]
    cfg = json.loads(json.dumps(cfg))
    cfg["tie_word_embeddings"] = tie
    if "text_config" in cfg:
        cfg["text_config"]["tie_word_embeddings"] = tie
    folder = os.path.join(out_dir, name)
    t = [(n, st.round_to(x, dtype), dtype) for n, x in hybrid_target_tensors(cfg, seed, tie)]
    write_config(folder, cfg)
    st.write_checkpoint(folder, t, shards=shards)
    return folder, {n: x for n, x, _ in t}


def drafter_tensors(cfg, target_cfg, seed, prefix):
    gen = torch.Generator().manual_seed(seed)
    h = cfg["hidden_size"]
    n_feat = len(cfg["dflash_config"].get("target_layer_ids", [0]))
    fc_in = n_feat * target_cfg["hidden_size"]
    out = [(prefix + "fc.weight", torch.randn(h, fc_in, generator=gen, dtype=torch.float64) / fc_in ** 0.5),
           (prefix + "hidden_norm.weight", 1.0 + 0.2 * torch.randn(h, generator=gen, dtype=torch.float64))]
    for layer in range(cfg["num_hidden_layers"]):
        out += _layer_tensors(gen, cfg, f"{prefix}layers.{layer}.", h)
    out.append((prefix + "norm.weight", 1.0 + 0.2 * torch.randn(h, generator=gen, dtype=torch.float64)))
    return out


def write_config(folder, cfg):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def write_pair(out_dir, name, seed=7):
    """Writes one variant as OUT/NAME/target and OUT/NAME/drafter.

    Returns (target dir, drafter dir, {name: float64 values as written} for each)."""
    t_dtype, t_shards, tied, d_cfg, d_dtype, d_shards, prefix, base = VARIANTS[name]
    t_cfg = dict(base, tie_word_embeddings=tied,
                 torch_dtype={"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[t_dtype])
    t_dir, d_dir = os.path.join(out_dir, name, "target"), os.path.join(out_dir, name, "drafter")
    # The same draws for every variant (one seed), rounded to the variant's dtype.
    t = [(n, st.round_to(x, t_dtype), t_dtype) for n, x in target_tensors(t_cfg, seed, tied)]
    d = [(n, st.round_to(x, d_dtype), d_dtype) for n, x in drafter_tensors(d_cfg, t_cfg, seed + 1, prefix)]
    write_config(t_dir, t_cfg)
    st.write_checkpoint(t_dir, t, shards=t_shards)
    write_config(d_dir, d_cfg)
    st.write_checkpoint(d_dir, d, shards=d_shards)
    return t_dir, d_dir, {n: x for n, x, _ in t}, {n: x for n, x, _ in d}


def main():
    out = sys.argv[1]
    for name in VARIANTS:
        t_dir, d_dir, _, _ = write_pair(out, name)
        print(f"{name}: {t_dir} {d_dir}")
    for name in HYBRID_VARIANTS:
        print(f"{name}: {write_hybrid_target(out, name)[0]}")


if __name__ == "__main__":
    main()
