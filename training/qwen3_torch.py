"""Qwen3 decoder and DFlash drafter in PyTorch, matching the math dscale runs.

RMSNorm (eps 1e-6), per-head q/k RMSNorm, neox RoPE, GQA, SiLU-gated MLP, no biases.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


CAUSAL = "causal"  # the mask argument for plain causal attention over the given rows


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rope_cos_sin(positions, head_dim, theta):
    steps = torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device)
    inv = 1.0 / (theta ** (steps / head_dim))
    ang = positions.float()[..., None] * inv  # [..., T, hd/2]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    # x: [B, heads, T, hd]; cos/sin: [B, T, hd]
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + rot * sin[:, None]


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, hd = cfg["hidden_size"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], hd
        self.q_proj = nn.Linear(H, self.nh * hd, bias=False)
        self.k_proj = nn.Linear(H, self.nkv * hd, bias=False)
        self.v_proj = nn.Linear(H, self.nkv * hd, bias=False)
        self.o_proj = nn.Linear(self.nh * hd, H, bias=False)
        self.q_norm = RMSNorm(hd, cfg["rms_norm_eps"])
        self.k_norm = RMSNorm(hd, cfg["rms_norm_eps"])

    def qkv(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.nh, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.nkv, self.hd).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def kv_only(self, c, cos, sin):
        B, T, _ = c.shape
        k = self.k_norm(self.k_proj(c).view(B, T, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(c).view(B, T, self.nkv, self.hd).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def attend(self, q, k, v, mask):
        # mask: additive, broadcastable to [B, nh, Tq, Tk], or CAUSAL (Tq == Tk).
        rep = self.nh // self.nkv
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0: fused kernels
            causal = isinstance(mask, str)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else mask,
                                               is_causal=causal)
        else:
            if isinstance(mask, str):
                T = q.shape[2]
                mask = torch.full((T, T), float("-inf"), device=q.device).triu(1)
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
            if mask is not None:
                s = s + mask
            p = torch.softmax(s.float(), dim=-1).to(v.dtype)
            o = torch.matmul(p, v)
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, I = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)

    def forward(self, h, cos, sin, mask, cache=None):
        q, k, v = self.self_attn.qkv(self.input_layernorm(h), cos, sin)
        if cache is not None:
            if cache[0] is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache[0], cache[1] = k, v
        h = h + self.self_attn.attend(q, k, v, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class Qwen3(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.apply(self._init)

    def _init(self, m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, positions=None, mask=None, caches=None, capture=()):
        """ids [B, T] -> (final hidden normed [B,T,H], {layer: residual after that layer})."""
        B, T = ids.shape
        if positions is None:
            positions = torch.arange(T, device=ids.device)[None].expand(B, T)
        cos, sin = rope_cos_sin(positions, self.cfg["head_dim"], self.cfg["rope_theta"])
        if mask is None:
            mask = CAUSAL
        h = self.embed_tokens(ids)
        feats = {}
        for i, layer in enumerate(self.layers):
            h = layer(h, cos, sin, mask, None if caches is None else caches[i])
            if i in capture:
                feats[i] = h
        return self.norm(h), feats


class DFlashDrafter(nn.Module):
    def __init__(self, cfg, target_layer_ids):
        super().__init__()
        self.cfg = cfg
        H = cfg["hidden_size"]
        self.target_layer_ids = list(target_layer_ids)
        self.fc = nn.Linear(len(target_layer_ids) * H, H, bias=False)
        self.hidden_norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(H, cfg["rms_norm_eps"])
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, ctx_feat, ctx_pos, blk_emb, blk_pos, mask):
        """ctx_feat [B,C,K*H], blk_emb [B,Q,H]; mask additive [B,1,Q,C+Q]. Returns normed [B,Q,H]."""
        c = self.hidden_norm(self.fc(ctx_feat))
        hd, theta = self.cfg["head_dim"], self.cfg["rope_theta"]
        ccos, csin = rope_cos_sin(ctx_pos, hd, theta)
        bcos, bsin = rope_cos_sin(blk_pos, hd, theta)
        h = blk_emb
        for layer in self.layers:
            x = layer.input_layernorm(h)
            q, kb, vb = layer.self_attn.qkv(x, bcos, bsin)
            kc, vc = layer.self_attn.kv_only(c, ccos, csin)
            k = torch.cat([kc, kb], dim=2)
            v = torch.cat([vc, vb], dim=2)
            h = h + layer.self_attn.attend(q, k, v, mask)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return self.norm(h)
