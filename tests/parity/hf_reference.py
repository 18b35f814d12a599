"""Float64 reference of a Qwen3, Llama 3 or Qwen3-MoE target and a DFlash drafter, written from
the Hugging Face definitions, for checking dscale's numerics.

Qwen3 (transformers' modeling_qwen3.py): Qwen3RMSNorm with the config's rms_norm_eps;
q_proj/k_proj/v_proj without bias, per-head q_norm/k_norm (RMSNorm over head_dim) before RoPE;
RoPE by rotate_half with inv_freq = 1/rope_theta^(2i/head_dim) and cos/sin of
cat(freqs, freqs); grouped-query attention by repeat_kv (query head h reads kv head
h // (heads/kv_heads)); scaling head_dim^-0.5; causal mask; o_proj; SiLU-gated MLP; pre-norm
residual blocks; final norm; lm_head, or embed_tokens when tie_word_embeddings.

Llama (transformers' modeling_llama.py, LlamaForCausalLM): the same blocks without q_norm/k_norm;
head_dim = hidden_size // num_attention_heads when the config has none; RoPE frequencies
rescaled by rope_scaling {"rope_type": "llama3"} (_compute_llama3_parameters): with
wavelength 2*pi/inv_freq and L = original_max_position_embeddings, wavelengths above
L/low_freq_factor are divided by `factor`, those below L/high_freq_factor kept, and between them
smooth = (L/wavelength - low_freq_factor)/(high_freq_factor - low_freq_factor) mixes
(1 - smooth)*inv_freq/factor + smooth*inv_freq.

Qwen3-MoE (transformers' modeling_qwen3_moe.py, Qwen3MoeForCausalLM): Qwen3's attention; layer i's
MLP is the sparse block (Qwen3MoeSparseMoeBlock) when i is not in mlp_only_layers, num_experts > 0
and (i + 1) % decoder_sparse_step == 0, else the dense SiLU-gated MLP of intermediate_size. The
sparse block: router logits = mlp.gate(x); routing weights = softmax over the experts in float;
the num_experts_per_tok largest (here an exact tie goes to the lower expert index, the rule dscale
states; transformers' topk leaves it unspecified), divided by their sum when norm_topk_prob; the
output is the sum over the chosen experts of weight * down_proj(silu(gate_proj(x)) * up_proj(x)).

DFlash drafter (z-lab's DFlashDraftModel, see the project's DFlash notes): c = hidden_norm(fc(
concat of the target's residual streams after target_layer_ids, in list order)); the block
[anchor, mask x (block_size-1)] at positions n .. n+block_size-1 is embedded with the target's
embed_tokens; per draft layer, queries from input_layernorm(h) of the block only, keys/values
from k_proj/v_proj of both c (no input_layernorm) and the normed block, k_norm on both, RoPE at
absolute positions (the drafter's own rope_theta and rope_scaling), no mask; the drafter's own
norm, then the target's lm_head on rows 1...

DSpark drafter (DeepSpec's Qwen3DSparkModel, deepspec/modeling/dspark/qwen3/modeling.py and
deepspec/eval/dspark: _forward_backbone, forward_dspark_draft_block, build_dspark_proposal): the
same backbone with its fields at the config's top level; the block is [anchor, mask x
(block_size-1)], block_size = B the proposals drafted, and every one of its B rows (after the
norm) goes through the LM head, row j proposing the token after its position; the embedding and
LM head are the drafter's own `embed_tokens` and `lm_head` (DeepSpec's frozen copies of the
target's). Its Markov and confidence heads: dspark_reference.py.

The residual stream "after layer i" is the un-normed output of decoder layer i (what SGLang and
training/qwen3_torch.py capture). transformers' output_hidden_states[i + 1] is the same tensor
for every layer but the last, where that tuple holds the final-normed state instead.

Everything runs in float64 on the checkpoint's own (BF16/F16/F32) values, so the reference's
own rounding error (float64, u = 1.1e-16) is negligible against float32's (u = 6e-8).
"""
import math

import torch

F64 = torch.float64


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def head_dim_of(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def inv_freq_of(cfg, head_dim):
    inv_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim))
    scaling = cfg.get("rope_scaling")
    if scaling is None:
        return inv_freq
    kind = scaling.get("rope_type", scaling.get("type"))
    assert kind == "llama3", f"rope_scaling {kind} is not modelled here"
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    smooth = (context / wavelen - low) / (high - low)
    scaled = torch.where(wavelen > context / low, inv_freq / factor, inv_freq)
    medium = (wavelen >= context / high) & (wavelen <= context / low)
    return torch.where(medium, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)


def rope_cos_sin(positions, head_dim, cfg):
    inv_freq = inv_freq_of(cfg, head_dim)
    freqs = positions.to(F64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)  # [T, head_dim]
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    # x: [heads, T, head_dim]; cos/sin: [T, head_dim]
    return x * cos[None] + rotate_half(x) * sin[None]


def repeat_kv(x, n_rep):
    # [kv_heads, T, d] -> [kv_heads * n_rep, T, d], kv head j serving query heads j*n_rep ..
    if n_rep == 1:
        return x
    kv, t, d = x.shape
    return x[:, None].expand(kv, n_rep, t, d).reshape(kv * n_rep, t, d)


def is_sparse_layer(cfg, layer):
    """Qwen3MoeDecoderLayer's rule for a sparse MLP (False for every dense family)."""
    experts = cfg.get("num_experts", 0) or 0
    return (layer not in (cfg.get("mlp_only_layers") or []) and experts > 0
            and (layer + 1) % cfg.get("decoder_sparse_step", 1) == 0)


class LayerWeights:
    def __init__(self, tensors, prefix, qk_norm=True, sparse=False, num_experts=0):
        def w(name):
            return tensors[f"{prefix}{name}.weight"]
        self.input_layernorm = w("input_layernorm")
        self.q_proj, self.k_proj, self.v_proj = w("self_attn.q_proj"), w("self_attn.k_proj"), w("self_attn.v_proj")
        self.o_proj = w("self_attn.o_proj")
        if qk_norm:
            self.q_norm, self.k_norm = w("self_attn.q_norm"), w("self_attn.k_norm")
        else:
            assert f"{prefix}self_attn.q_norm.weight" not in tensors
            self.q_norm = self.k_norm = None
        self.post_attention_layernorm = w("post_attention_layernorm")
        self.sparse = sparse
        if sparse:
            assert f"{prefix}mlp.gate_proj.weight" not in tensors
            self.router = w("mlp.gate")
            self.experts = [(w(f"mlp.experts.{e}.gate_proj"), w(f"mlp.experts.{e}.up_proj"),
                             w(f"mlp.experts.{e}.down_proj")) for e in range(num_experts)]
        else:
            self.gate_proj, self.up_proj, self.down_proj = w("mlp.gate_proj"), w("mlp.up_proj"), w("mlp.down_proj")


def attention(cfg, lw, x_q, x_kv, pos_q, pos_kv, causal):
    """Self-attention block output (after o_proj) for query rows x_q over key rows x_kv.

    x_q is the normed block; x_kv the rows keys/values come from (the same rows for the
    target; [c ; normed block] for the drafter). Returns (output, the score gain S of the
    error budget below).
    """
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim_of(cfg)
    eps = cfg["rms_norm_eps"]
    tq, tk = x_q.shape[0], x_kv.shape[0]
    q = (x_q @ lw.q_proj.T).view(tq, nh, hd)
    k = (x_kv @ lw.k_proj.T).view(tk, nkv, hd)
    if lw.q_norm is not None:
        q, k = rms_norm(q, lw.q_norm, eps), rms_norm(k, lw.k_norm, eps)
    q, k = q.transpose(0, 1), k.transpose(0, 1)
    v = (x_kv @ lw.v_proj.T).view(tk, nkv, hd).transpose(0, 1)
    cq, sq = rope_cos_sin(pos_q, hd, cfg)
    ck, sk = rope_cos_sin(pos_kv, hd, cfg)
    q, k = apply_rope(q, cq, sq), apply_rope(k, ck, sk)
    k, v = repeat_kv(k, nh // nkv), repeat_kv(v, nh // nkv)
    scale = hd ** -0.5
    scores = (q @ k.transpose(1, 2)) * scale  # [nh, tq, tk]
    # S: sqrt(Σ_i (q_i k_i)²)·scale per head, query and key (the error budget's score gain).
    terms = ((q * q) @ (k * k).transpose(1, 2)).sqrt() * scale
    if causal:
        # Query row r (at position pos_q[r]) sees keys at positions <= its own.
        mask = pos_kv[None, :] > pos_q[:, None]
        scores = scores.masked_fill(mask[None], float("-inf"))
        terms = terms.masked_fill(mask[None], 0.0)
    p = torch.softmax(scores, dim=-1)
    o = (p @ v).transpose(0, 1).reshape(tq, nh * hd)
    return o @ lw.o_proj.T, float(terms.max())


def mlp(lw, x):
    return (torch.nn.functional.silu(x @ lw.gate_proj.T) * (x @ lw.up_proj.T)) @ lw.down_proj.T


def route(cfg, lw, x):
    """The router of Qwen3MoeSparseMoeBlock on the normed rows x [T, H]: (logits [T, E], experts
    in descending probability [T, E]; equal probabilities keep ascending expert order, so the
    lower index wins a tie, the rule dscale states; transformers' topk leaves it unspecified)."""
    logits = x @ lw.router.T
    p = torch.softmax(logits, dim=-1)
    return logits, torch.sort(p, dim=-1, descending=True, stable=True).indices


def sparse_mlp(cfg, lw, x):
    """Qwen3MoeSparseMoeBlock on the normed rows x [T, H] -> [T, H]."""
    k = cfg["num_experts_per_tok"]
    logits, order = route(cfg, lw, x)
    chosen = order[:, :k]
    weights = torch.gather(torch.softmax(logits, dim=-1), 1, chosen)
    if cfg.get("norm_topk_prob", False):
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(k):
            gate, up, down = lw.experts[int(chosen[t, j])]
            out[t] += weights[t, j] * ((torch.nn.functional.silu(x[t] @ gate.T) * (x[t] @ up.T)) @ down.T)
    return out


def router_margin(cfg, lw, x, eps):
    """The smallest, over rows, of the router-logit gap between the k-th and (k+1)-th expert
    divided by those two logits' tolerances eps·|x_t|·|R_e| together (the bound on a float32
    computation's router logits, as logit_tolerance bounds the LM head's). Above 1, a float32
    router picks the reference's experts; at or below it the checkpoint is unsuited to the
    comparison (a near-tie in routing), which says nothing of dscale."""
    k = cfg["num_experts_per_tok"]
    if k >= cfg["num_experts"]:
        return math.inf
    logits, order = route(cfg, lw, x)
    tol = eps * x.norm(dim=-1)[:, None] * lw.router.norm(dim=-1)[None, :]  # [T, E]
    last, after = order[:, k - 1:k], order[:, k:k + 1]
    gap = torch.gather(logits, 1, last) - torch.gather(logits, 1, after)
    return float((gap / (torch.gather(tol, 1, last) + torch.gather(tol, 1, after))).min())


class TargetReference:
    """Qwen3ForCausalLM, LlamaForCausalLM or Qwen3MoeForCausalLM, by the config's architectures.
    The last forward's router inputs are kept for router_margins."""

    def __init__(self, cfg, tensors):
        self.cfg = cfg
        arch = cfg.get("architectures", ["Qwen3ForCausalLM"])[0]
        assert arch in ("Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen3MoeForCausalLM"), arch
        qk_norm = arch != "LlamaForCausalLM"
        experts = cfg.get("num_experts", 0) if arch == "Qwen3MoeForCausalLM" else 0
        self.embed = tensors["model.embed_tokens.weight"]
        self.layers = [LayerWeights(tensors, f"model.layers.{i}.", qk_norm,
                                    is_sparse_layer(dict(cfg, num_experts=experts), i), experts)
                       for i in range(cfg["num_hidden_layers"])]
        self.router_inputs = {}
        self.norm = tensors["model.norm.weight"]
        self.lm_head = self.embed if cfg.get("tie_word_embeddings", False) else tensors["lm_head.weight"]

    def forward(self, ids):
        """ids -> (logits [T, V], final-normed hidden [T, H], residual streams after each
        layer [L][T, H], score-term magnitude per layer [L])."""
        cfg = self.cfg
        pos = torch.arange(len(ids))
        h = self.embed[torch.tensor(ids)]
        streams, score_gains = [], []
        for i, lw in enumerate(self.layers):
            x = rms_norm(h, lw.input_layernorm, cfg["rms_norm_eps"])
            a, st = attention(cfg, lw, x, x, pos, pos, causal=True)
            h = h + a
            x = rms_norm(h, lw.post_attention_layernorm, cfg["rms_norm_eps"])
            if lw.sparse:
                self.router_inputs[i] = x
                h = h + sparse_mlp(cfg, lw, x)
            else:
                h = h + mlp(lw, x)
            streams.append(h)
            score_gains.append(st)
        out = rms_norm(h, self.norm, cfg["rms_norm_eps"])
        return out @ self.lm_head.T, out, streams, score_gains

    def router_margins(self, eps):
        """{sparse layer: router_margin} of the last forward, against the relative bound eps."""
        return {i: router_margin(self.cfg, self.layers[i], x, eps)
                for i, x in self.router_inputs.items()}


class DFlashReference:
    """z-lab's DFlashDraftModel, or the backbone of DeepSpec's Qwen3DSparkModel (by the config's
    architectures)."""

    def __init__(self, cfg, tensors, target):
        self.cfg, self.target = cfg, target
        prefix = "" if "fc.weight" in tensors else "model."
        self.dspark = cfg.get("architectures", [None])[0] == "Qwen3DSparkModel"
        # The block's rows that propose a token: DFlash's from 1 on (row 0 is the anchor's own
        # position), all of DSpark's (row j proposes the token after position n + j).
        self.first_row = 0 if self.dspark else 1
        self.embed = tensors[prefix + "embed_tokens.weight"] if self.dspark else target.embed
        self.lm_head = tensors[prefix + "lm_head.weight"] if self.dspark else target.lm_head
        self.fc = tensors[prefix + "fc.weight"]
        self.hidden_norm = tensors[prefix + "hidden_norm.weight"]
        self.norm = tensors[prefix + "norm.weight"]
        self.layers = [LayerWeights(tensors, f"{prefix}layers.{i}.") for i in range(cfg["num_hidden_layers"])]
        # Drafting fields: in dflash_config, else at the top level (both schemas exist).
        dc = cfg.get("dflash_config", {})
        self.block_size = dc.get("block_size", cfg.get("block_size", 16))
        self.mask_token_id = dc.get("mask_token_id", cfg.get("mask_token_id"))
        ids = dc.get("target_layer_ids", cfg.get("target_layer_ids"))
        if ids is None:
            # z-lab's build_target_layer_ids: one draft layer -> the middle target layer; else
            # num_draft_layers ids spread (rounded) over [1, num_target_layers - 3].
            n_t = cfg.get("num_target_layers", target.cfg["num_hidden_layers"])
            n_d = cfg["num_hidden_layers"]
            if n_d == 1:
                ids = [n_t // 2]
            else:
                ids = [int(round(1 + i * (n_t - 4) / (n_d - 1))) for i in range(n_d)]
        self.target_layer_ids = list(ids)

    def draft(self, streams, n, anchor):
        """One drafting step after a prefill of n tokens whose residual streams are `streams`.

        Returns (draft logits [C, V], final-normed rows [C, H], score gain S per draft layer),
        C = block_size - first_row proposals."""
        cfg, eps = self.cfg, self.cfg["rms_norm_eps"]
        feats = torch.cat([streams[i] for i in self.target_layer_ids], dim=-1)  # [n, K*H]
        c = rms_norm(feats @ self.fc.T, self.hidden_norm, eps)
        b = self.block_size
        block = torch.tensor([anchor] + [self.mask_token_id] * (b - 1))
        h = self.embed[block]
        pos_ctx, pos_blk = torch.arange(n), torch.arange(n, n + b)
        score_gains = []
        for lw in self.layers:
            x = rms_norm(h, lw.input_layernorm, eps)
            a, st = attention(cfg, lw, x, torch.cat([c, x]), pos_blk, torch.cat([pos_ctx, pos_blk]),
                              causal=False)
            h = h + a
            h = h + mlp(lw, rms_norm(h, lw.post_attention_layernorm, eps))
            score_gains.append(st)
        out = rms_norm(h, self.norm, eps)[self.first_row:]
        return out @ self.lm_head.T, out, score_gains


# ------------------------------------------------------------------------------------------
# The float32 error budget behind the tolerances.
#
# dscale computes in float32 (unit roundoff u = 2^-24) on the same weight values (BF16, F16 and
# F32 values are exact in float32 and float64), so its difference from this float64 reference
# is its own rounding error. That is bounded with the probabilistic rounding-error analysis of
# Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019): when each float32 operation's relative
# rounding error is an independent, mean-zero variable of size at most u, a reduction of K terms
# (dot product, sum of squares, softmax denominator, Σ p·v), in any order, is off by at most
# lambda·sqrt(K)·u times the sum of its terms' magnitudes, except with probability
# 2K·exp(-lambda²/2); lambda = 8 makes that 2.6e-14·K. (The deterministic worst case, K·u, needs
# every rounding to go the same way.)
#
# A stage is one such reduction plus at most two elementwise roundings (RMSNorm's 1/rms and
# weight, RoPE's cos/sin and rotation, SiLU·up, a residual add): K + 2 of them. Model of the
# chain: the RMSNorms and q/k norms bring each stage's input back to unit scale, so a stage
# passes its input's relative error on with gain 1, and the stages' independent errors add in
# quadrature:
#     eps = lambda · u · sqrt( Σ_stages a² · (K + 2) )
# over the stages on the path to the logit (every layer the prefill or the draft goes through,
# then the final norm and lm_head). The one gain above 1, a = S, is at the attention scores,
# where an absolute score error becomes a relative error of the softmax weights:
# S = max over heads, query rows and keys of sqrt(Σ_i (q_i k_i)²)·head_dim^-0.5 (a score's error
# when q and k carry independent unit relative errors), measured on the reference per layer; it
# weights the stages that produce q and k, and the scores.
#
# A logit l_v = h·W_v is then within eps·|h|·|W_v| (Cauchy-Schwarz on h's relative error). The
# gain-1 chain is the model's assumption: the test prints each measured difference as a fraction
# of its bound (about 1% on the pairs here, so errors would need ~100x more amplification than
# modelled to fail). A real difference in the math lands far above it: BF16-rounded activations
# (~4e-3 relative) by ~100x; a wrong rms_norm_eps (1e-6 for 1e-5) or a rope_theta off by 0.1%
# already exceeds it on the random pairs.

U = 2.0 ** -24
LAMBDA = 8.0


def _stages_squared(cfg, kv_len, score_gain, layer=None):
    """Σ a²·(K + 2) over one decoder layer's stages (see above). A sparse layer's MLP (`layer`
    given and sparse) has the router's product, the softmax over the experts, the expert's
    gate/up · SiLU and down, and the weighted sum of the k expert outputs before the add; a
    routing weight's relative error is the router logits' absolute error, which the RMSNorm
    before the router keeps at the stage's unit scale."""
    h, i, hd = cfg["hidden_size"], cfg["intermediate_size"], head_dim_of(cfg)
    q_dim = cfg["num_attention_heads"] * hd
    a2 = max(1.0, score_gain) ** 2
    qk = (h + 2) + (h + 2) + (hd + 2) + (2 + 2) + (hd + 2)  # norm, proj, q/k norm, RoPE, scores
    attn = (kv_len + 2) + (kv_len + 2) + (q_dim + 2)                   # softmax, Σ p·v, o_proj + add
    mlp_ = (h + 2) + (h + 2) + (i + 2)                                 # post norm, gate/up · SiLU, down + add
    if layer is not None and is_sparse_layer(cfg, layer):
        e, k, mi = cfg["num_experts"], cfg["num_experts_per_tok"], cfg["moe_intermediate_size"]
        # post norm, router, softmax (+ renormalisation), gate/up · SiLU, down, Σ_k w·y + add
        mlp_ = (h + 2) + (h + 2) + (e + 2 + k) + (h + 2) + (mi + 2) + (k + 2)
    return a2 * qk + attn + mlp_


def _eps(stages_squared):
    return LAMBDA * U * math.sqrt(stages_squared)


def _target_chain(cfg, n, score_gains, layers):
    return sum(_stages_squared(cfg, n, score_gains[l], l) for l in range(layers))


def _head(cfg):
    return (cfg["hidden_size"] + 2) * 2  # final norm, lm_head


def logits_budget(cfg, n, score_gains):
    """Relative bound eps_chain for a prefill of n tokens through every target layer."""
    return _eps(_target_chain(cfg, n, score_gains, cfg["num_hidden_layers"]) + _head(cfg))


def draft_budget(target_cfg, draft_cfg, n, target_gains, draft_gains, layer_ids, block):
    """eps_chain for the draft logits: the target up to the deepest captured layer, fc,
    hidden_norm, the draft layers (spans of n + block keys), final norm and lm_head."""
    s = _target_chain(target_cfg, n, target_gains, max(layer_ids) + 1)
    s += (len(layer_ids) * target_cfg["hidden_size"] + 2) + (draft_cfg["hidden_size"] + 2)
    s += sum(_stages_squared(draft_cfg, n + block, g) for g in draft_gains)
    return _eps(s + _head(draft_cfg))


def logit_tolerance(eps, hidden, lm_head):
    """Per-logit bound eps·|h_t|·|W_v| -> [T, V]."""
    return eps * hidden.norm(dim=-1)[:, None] * lm_head.norm(dim=-1)[None, :]
