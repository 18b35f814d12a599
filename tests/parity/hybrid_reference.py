"""Float64 reference of the dense Qwen3.5 / Qwen3.6 text model, written from the Hugging Face
definitions (transformers' models/qwen3_5/modular_qwen3_5.py, which builds on
models/qwen3_next/modeling_qwen3_next.py), for checking dscale's numerics.

Checkpoint and config: Qwen3_5ForConditionalGeneration keeps the text model's fields under
`text_config` and its tensors under "model.language_model." (the vision tower "model.visual.*"
and the multi-token-prediction layers "mtp.*" are not part of the text model);
Qwen3_5ForCausalLM keeps both at the top level and under "model.". lm_head.weight is the head,
or embed_tokens when tie_word_embeddings. Layer i is a Gated DeltaNet ("linear_attention") or a
gated softmax attention ("full_attention") layer by `layer_types`, else full attention exactly
when (i + 1) % full_attention_interval == 0 (default 4). Each layer is pre-norm:
h += mixer(norm(h)); h += mlp(norm(h)), the MLP SiLU-gated as in Qwen3.

Norms (Qwen3NextRMSNorm): x / sqrt(mean(x²) + eps) · (1 + w), the weight stored zero-centred;
the input, post-attention and final norms and the attention's q_norm / k_norm (over head_dim).

Full attention (Qwen3NextAttention): q_proj gives per head [query (head_dim) | gate (head_dim)];
q_norm / k_norm per head; rotary embedding on the first rotary_dim = int(head_dim ·
partial_rotary_factor) dims of each head only (rotate_half within them, inv_freq =
1/θ^(2i/rotary_dim), cos/sin of cat(freqs, freqs)), the rest passed through; θ and the factor
from `rope_parameters` (or the top level). Interleaved M-RoPE sections take every frequency's
angle from one of three position streams, which for text are the same position, so the angles
are plain RoPE's. Grouped-query attention, scale head_dim^-0.5, causal; the output times
sigmoid(gate), then o_proj.

Gated DeltaNet (Qwen3_5GatedDeltaNet): with Hk = linear_num_key_heads, Hv =
linear_num_value_heads, dk / dv their head dims, key_dim = Hk·dk, value_dim = Hv·dv:
  qkv = in_proj_qkv(x) [T, 2·key_dim + value_dim], z = in_proj_z(x) [T, value_dim],
  b = in_proj_b(x), a = in_proj_a(x) [T, Hv];
  qkv = SiLU(depthwise causal conv1d(qkv)) with kernel K = linear_conv_kernel_dim, no bias: out_t
  = Σ_j w[c, j] · in_{t-K+1+j}[c], inputs before the sequence zero (or, after a prefix, the
  last K-1 inputs kept as the conv state);
  split into q [T, Hk, dk], k [T, Hk, dk], v [T, Hv, dv] (contiguous, in that order);
  β = sigmoid(b); g = -exp(A_log) · softplus(a + dt_bias);
  value head h reads key head h // (Hv / Hk) (repeat_interleave);
  q, k L2-normalised (x · rsqrt(Σx² + 1e-6)), q also scaled by dk^-1/2;
  per value head, the state S [dk, dv] from zero (or the state after the prefix):
    S ← exp(g_t) · S;  S ← S + k_t (β_t (v_t − Sᵀ k_t))ᵀ;  o_t = Sᵀ q_t
  (torch_recurrent_gated_delta_rule; the chunked form computes the same values);
  o = RMSNorm(o) · w · SiLU(z) per value head (Qwen3NextRMSNormGated: the weight plain, not
  1 + w), then out_proj.

The mixture of experts (Qwen3_5MoeForConditionalGeneration / Qwen3_5MoeForCausalLM:
transformers' models/qwen3_5_moe/modular_qwen3_5_moe.py, whose layer is Qwen3NextDecoderLayer's
with Qwen3NextSparseMoeBlock in every layer): the router mlp.gate [E, H] gives logits, softmax
over the experts in float, the num_experts_per_tok largest (an exact tie goes to the lower index,
the rule dscale states), their probabilities always renormalised to sum 1 (Qwen3VLMoe's
TopKRouter); the experts are two fused tensors per layer, mlp.experts.gate_up_proj [E, 2·I, H]
(expert e's gate rows, then its up rows: `chunk(2)` of its output) and mlp.experts.down_proj
[E, H, I]; the layer's output is Σ_j w_j · down_e(SiLU(gate_e(x)) · up_e(x)) plus a shared
expert, the same SwiGLU of width shared_expert_intermediate_size (mlp.shared_expert.*), scaled
by sigmoid(mlp.shared_expert_gate(x)) [1, H].

Everything runs in float64 on the checkpoint's own values. The forward takes the prompt in
chunks (any split points): attention layers keep K and V, Gated DeltaNet layers carry their conv
and recurrent states across chunks, so a split prefill computes what the whole one does.
"""
import math

import torch

import hf_reference as ref

F64 = torch.float64
ARCHITECTURES = ("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM")
MOE_ARCHITECTURES = ("Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM")


def is_hybrid(cfg):
    return cfg.get("architectures", [None])[0] in ARCHITECTURES + MOE_ARCHITECTURES


def is_moe(cfg):
    return cfg.get("architectures", [None])[0] in MOE_ARCHITECTURES


def text_config(cfg):
    """The text model's fields: `text_config` in the multimodal layout, the config otherwise."""
    return cfg["text_config"] if "text_config" in cfg else cfg


def tensor_prefix(cfg):
    return "model.language_model." if "text_config" in cfg else "model."


def tied(cfg):
    return cfg.get("tie_word_embeddings", text_config(cfg).get("tie_word_embeddings", False))


def layer_types(tc):
    if tc.get("layer_types"):
        return list(tc["layer_types"])
    every = tc.get("full_attention_interval", 4)
    return ["full_attention" if (i + 1) % every == 0 else "linear_attention"
            for i in range(tc["num_hidden_layers"])]


def rope_of(tc):
    """(θ, rotary_dim) from rope_parameters, else the top level."""
    rp = tc.get("rope_parameters") or {}
    theta = rp.get("rope_theta", tc.get("rope_theta"))
    factor = rp.get("partial_rotary_factor", tc.get("partial_rotary_factor", 1.0))
    return theta, int(tc["head_dim"] * factor)


def centred_norm(x, w, eps):
    return ref.rms_norm(x, 1.0 + w, eps)


def silu(x):
    return torch.nn.functional.silu(x)


def l2_normalise(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def partial_rope(x, positions, theta, rotary_dim):
    """x [heads, T, head_dim]: rotate-half RoPE on the first rotary_dim dims, the rest as is."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=F64) / rotary_dim))
    freqs = positions.to(F64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    rot = rot * emb.cos()[None] + ref.rotate_half(rot) * emb.sin()[None]
    return torch.cat((rot, rest), dim=-1)


def causal_conv(x, w, state):
    """Depthwise causal conv, then SiLU. x [T, C]; w [C, K]; state [K-1, C], the inputs before x
    (oldest first). Returns (SiLU(out) [T, C], the new state: the last K-1 inputs)."""
    k = w.shape[1]
    full = torch.cat((state, x), dim=0)  # [K-1+T, C]
    out = torch.zeros_like(x)
    for j in range(k):
        out += w[:, j][None, :] * full[j:j + x.shape[0]]
    return silu(out), full[full.shape[0] - (k - 1):]


def delta_rule(q, k, v, g, beta, state):
    """The gated delta rule, one position after another. q, k [T, Hv, dk] (normalised, q
    scaled), v [T, Hv, dv], g, beta [T, Hv], state [Hv, dk, dv]. Returns (o [T, Hv, dv], the new
    state)."""
    out = torch.zeros(v.shape, dtype=F64)
    s = state.clone()
    for t in range(q.shape[0]):
        s = s * g[t].exp()[:, None, None]
        kv_mem = torch.einsum("hkv,hk->hv", s, k[t])
        delta = (v[t] - kv_mem) * beta[t][:, None]
        s = s + k[t][:, :, None] * delta[:, None, :]
        out[t] = torch.einsum("hkv,hk->hv", s, q[t])
    return out, s


class GdnState:
    """One request's Gated DeltaNet layer state: the conv's last K-1 inputs and S per head."""

    def __init__(self, tc):
        hk, hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
        dk, dv, k = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
        self.conv = torch.zeros(k - 1, 2 * hk * dk + hv * dv, dtype=F64)
        self.s = torch.zeros(hv, dk, dv, dtype=F64)


class HybridLayer:
    def __init__(self, tc, tensors, prefix, kind, moe):
        def w(name):
            return tensors[prefix + name]
        self.kind = kind
        self.input_layernorm = w("input_layernorm.weight")
        self.post_attention_layernorm = w("post_attention_layernorm.weight")
        self.sparse = moe
        if moe:
            assert prefix + "mlp.gate_proj.weight" not in tensors
            i = tc["moe_intermediate_size"]
            self.router = w("mlp.gate.weight")
            gate_up = w("mlp.experts.gate_up_proj")  # [E, 2I, H]
            self.experts = [(gate_up[e, :i], gate_up[e, i:], down)
                            for e, down in enumerate(w("mlp.experts.down_proj"))]
            self.shared = (w("mlp.shared_expert.gate_proj.weight"),
                           w("mlp.shared_expert.up_proj.weight"),
                           w("mlp.shared_expert.down_proj.weight"))
            self.shared_expert_gate = w("mlp.shared_expert_gate.weight")
        else:
            self.gate_proj, self.up_proj = w("mlp.gate_proj.weight"), w("mlp.up_proj.weight")
            self.down_proj = w("mlp.down_proj.weight")
        if kind == "linear_attention":
            la = "linear_attn."
            self.in_proj_qkv, self.in_proj_z = w(la + "in_proj_qkv.weight"), w(la + "in_proj_z.weight")
            self.in_proj_b, self.in_proj_a = w(la + "in_proj_b.weight"), w(la + "in_proj_a.weight")
            self.conv = w(la + "conv1d.weight")[:, 0, :]  # [C, 1, K] -> [C, K]
            self.a_log, self.dt_bias = w(la + "A_log"), w(la + "dt_bias")
            self.norm, self.out_proj = w(la + "norm.weight"), w(la + "out_proj.weight")
        else:
            sa = "self_attn."
            self.q_proj, self.k_proj = w(sa + "q_proj.weight"), w(sa + "k_proj.weight")
            self.v_proj, self.o_proj = w(sa + "v_proj.weight"), w(sa + "o_proj.weight")
            self.q_norm, self.k_norm = w(sa + "q_norm.weight"), w(sa + "k_norm.weight")


def swiglu(x, gate, up, down):
    return (silu(x @ gate.T) * (x @ up.T)) @ down.T


def sparse_moe(tc, lw, x):
    """Qwen3_5MoeSparseMoeBlock on the normed rows x [T, H] -> [T, H]."""
    k = tc["num_experts_per_tok"]
    logits, order = ref.route(tc, lw, x)
    chosen = order[:, :k]
    weights = torch.gather(torch.softmax(logits, dim=-1), 1, chosen)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(k):
            out[t] += weights[t, j] * swiglu(x[t], *lw.experts[int(chosen[t, j])])
    return out + torch.sigmoid(x @ lw.shared_expert_gate.T) * swiglu(x, *lw.shared)


def mlp(tc, lw, x):
    if lw.sparse:
        return sparse_moe(tc, lw, x)
    return swiglu(x, lw.gate_proj, lw.up_proj, lw.down_proj)


def gated_delta_net(tc, lw, x, state):
    """Qwen3_5GatedDeltaNet on the normed rows x [T, H], continuing `state` (updated)."""
    hk, hv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    dk, dv, eps = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["rms_norm_eps"]
    t = x.shape[0]
    qkv, state.conv = causal_conv(x @ lw.in_proj_qkv.T, lw.conv, state.conv)
    q, k, v = torch.split(qkv, [hk * dk, hk * dk, hv * dv], dim=-1)
    q, k, v = q.reshape(t, hk, dk), k.reshape(t, hk, dk), v.reshape(t, hv, dv)
    beta = torch.sigmoid(x @ lw.in_proj_b.T)
    g = -lw.a_log.exp() * torch.nn.functional.softplus(x @ lw.in_proj_a.T + lw.dt_bias)
    q = q.repeat_interleave(hv // hk, dim=1)
    k = k.repeat_interleave(hv // hk, dim=1)
    q, k = l2_normalise(q) * dk ** -0.5, l2_normalise(k)
    o, state.s = delta_rule(q, k, v, g, beta, state.s)
    z = (x @ lw.in_proj_z.T).reshape(t, hv, dv)
    o = ref.rms_norm(o, lw.norm, eps) * silu(z)
    return o.reshape(t, hv * dv) @ lw.out_proj.T


def gated_attention(tc, lw, x, positions, cache):
    """Qwen3_5Attention on the normed rows x [T, H] at `positions`, appending this chunk's K/V to
    cache = [K [kv, n, hd], V [kv, n, hd]] (updated). Returns (output, score gain S)."""
    nh, nkv, hd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    eps = tc["rms_norm_eps"]
    theta, rotary_dim = rope_of(tc)
    t = x.shape[0]
    qg = (x @ lw.q_proj.T).view(t, nh, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:].reshape(t, nh * hd)
    k = (x @ lw.k_proj.T).view(t, nkv, hd)
    v = (x @ lw.v_proj.T).view(t, nkv, hd).transpose(0, 1)
    q = centred_norm(q, lw.q_norm, eps).transpose(0, 1)
    k = centred_norm(k, lw.k_norm, eps).transpose(0, 1)
    q, k = partial_rope(q, positions, theta, rotary_dim), partial_rope(k, positions, theta, rotary_dim)
    cache[0] = k if cache[0] is None else torch.cat((cache[0], k), dim=1)
    cache[1] = v if cache[1] is None else torch.cat((cache[1], v), dim=1)
    keys = ref.repeat_kv(cache[0], nh // nkv)
    values = ref.repeat_kv(cache[1], nh // nkv)
    n = keys.shape[1]
    scale = hd ** -0.5
    scores = (q @ keys.transpose(1, 2)) * scale
    terms = ((q * q) @ (keys * keys).transpose(1, 2)).sqrt() * scale
    mask = torch.arange(n)[None, :] > positions[:, None]
    scores = scores.masked_fill(mask[None], float("-inf"))
    terms = terms.masked_fill(mask[None], 0.0)
    o = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).reshape(t, nh * hd)
    return (o * torch.sigmoid(gate)) @ lw.o_proj.T, float(terms.max())


class Qwen3_5Reference:
    """Qwen3_5ForConditionalGeneration's text model or Qwen3_5ForCausalLM, float64."""

    def __init__(self, cfg, tensors):
        assert is_hybrid(cfg), cfg.get("architectures")
        self.cfg = text_config(cfg)
        p = tensor_prefix(cfg)
        self.types = layer_types(self.cfg)
        self.embed = tensors[p + "embed_tokens.weight"]
        self.layers = [HybridLayer(self.cfg, tensors, f"{p}layers.{i}.", kind, is_moe(cfg))
                       for i, kind in enumerate(self.types)]
        self.router_inputs = {}  # the latest forward's normed MLP inputs by sparse layer
        self.norm = tensors[p + "norm.weight"]
        self.lm_head = self.embed if tied(cfg) else tensors["lm_head.weight"]

    def new_state(self):
        """A request's sequence state: per layer K/V (attention) or a GdnState."""
        return [GdnState(self.cfg) if kind == "linear_attention" else [None, None]
                for kind in self.types]

    def step(self, ids, start, state):
        """Rows `ids` at positions start.. continuing `state` (updated) -> (logits, final-normed
        hidden, residual streams after each layer, score gain per layer: 0 for linear ones)."""
        tc, eps = self.cfg, self.cfg["rms_norm_eps"]
        pos = torch.arange(start, start + len(ids))
        h = self.embed[torch.tensor(ids)]
        streams, gains = [], []
        for i, (lw, layer_state) in enumerate(zip(self.layers, state)):
            x = centred_norm(h, lw.input_layernorm, eps)
            if lw.kind == "linear_attention":
                h = h + gated_delta_net(tc, lw, x, layer_state)
                gains.append(0.0)
            else:
                a, gain = gated_attention(tc, lw, x, pos, layer_state)
                h = h + a
                gains.append(gain)
            x = centred_norm(h, lw.post_attention_layernorm, eps)
            if lw.sparse:
                kept = self.router_inputs.get(i)
                self.router_inputs[i] = x if start == 0 or kept is None else torch.cat((kept, x))
            h = h + mlp(tc, lw, x)
            streams.append(h)
        out = centred_norm(h, self.norm, eps)
        return out @ self.lm_head.T, out, streams, gains

    def router_margins(self, eps):
        """hf_reference.router_margin per sparse layer over the latest forward's rows."""
        return {i: ref.router_margin(self.cfg, self.layers[i], x, eps)
                for i, x in self.router_inputs.items()}

    def forward(self, ids, splits=()):
        """The prompt as chunks cut at `splits` (positions, ascending), states carried across
        them; returns step()'s tuple for every position (gains: the largest per layer)."""
        state = self.new_state()
        bounds = [0, *splits, len(ids)]
        parts = [self.step(ids[a:b], a, state) for a, b in zip(bounds, bounds[1:]) if b > a]
        logits = torch.cat([p[0] for p in parts])
        hidden = torch.cat([p[1] for p in parts])
        streams = [torch.cat([p[2][i] for p in parts]) for i in range(len(self.layers))]
        gains = [max(p[3][i] for p in parts) for i in range(len(self.layers))]
        return logits, hidden, streams, gains


# ------------------------------------------------------------------------------------------
# The float32 error budget (hf_reference.py states the model): the attention layers' stages as
# Qwen3's plus the output gate's product; a Gated DeltaNet layer's stages are the input norm,
# the projections, the conv (K terms) and SiLU, the L2 norms (dk), the recurrence (per position
# the dk-term products Sᵀk and Sᵀq, and the state's decayed sum over the n positions so far, each
# step a contraction: |I − β k kᵀ| ≤ 1 and exp(g) ≤ 1 do not amplify an earlier error), the gated
# RMSNorm (dv) and its SiLU gate, and out_proj (value_dim).

def _mlp_squared(tc):
    """The MLP's stages: hf_reference's dense or sparse ones; with experts, the shared expert's
    gate/up · SiLU, down and sigmoid gate, and its add, counted in series with the routed ones
    (an upper bound: the two run side by side)."""
    h = tc["hidden_size"]
    if "num_experts" not in tc:
        return (h + 2) + (h + 2) + (tc["intermediate_size"] + 2)
    e, k = tc["num_experts"], tc["num_experts_per_tok"]
    mi, si = tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"]
    routed = (h + 2) + (h + 2) + (e + 2 + k) + (h + 2) + (mi + 2) + (k + 2)
    return routed + (h + 2) + (si + 2) + (h + 2) + 3


def _hybrid_layer_squared(tc, n, kind, score_gain):
    h = tc["hidden_size"]
    mlp = _mlp_squared(tc)
    if kind == "linear_attention":
        dk, dv, k = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
        value_dim = tc["linear_num_value_heads"] * dv
        mixer = ((h + 2) + (h + 2) + (k + 2) + (dk + 2) + n * (dk + 4) + (dk + 2) + (dv + 2)
                 + (value_dim + 2))
        return mixer + mlp
    hd = tc["head_dim"]
    q_dim = tc["num_attention_heads"] * hd
    a2 = max(1.0, score_gain) ** 2
    qk = (h + 2) + (h + 2) + (hd + 2) + (2 + 2) + (hd + 2)
    attn = (n + 2) + (n + 2) + 2 + (q_dim + 2)  # softmax, Σ p·v, the gate, o_proj + add
    return a2 * qk + attn + mlp


def logits_budget(tc, n, gains):
    """Relative bound eps for the logits of a prefill of n tokens (hf_reference._eps)."""
    s = sum(_hybrid_layer_squared(tc, n, kind, g) for kind, g in zip(layer_types(tc), gains))
    return ref.LAMBDA * ref.U * math.sqrt(s + (tc["hidden_size"] + 2) * 2)
