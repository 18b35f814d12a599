"""A float64 reference of the Domino head (docs/DOMINO.md), written from its definition and
independent of dscale and of training/: a bias-free GRU (PyTorch's gate order r, z, n) over the
target embeddings of [anchor, proposal 1, ...], and the correction
W_out · silu(W_in · [z_i; s_i]) added to the backbone's logits of positions 2 .. W-1.
"""
import math
import os

import torch

import hf_reference as ref
import hf_safetensors as st


class DominoReference:
    def __init__(self, drafter_cfg, drafter_dir, target):
        dc = drafter_cfg["domino_config"]
        self.g, self.b = dc["gru_hidden_size"], dc["bottleneck_size"]
        tensors, _, _ = st.read_file(os.path.join(drafter_dir, dc["head_file"]))
        self.w_ih = tensors["gru.weight_ih_l0"]           # [3G, H]
        self.w_hh = tensors["gru.weight_hh_l0"]           # [3G, G]
        self.w_in = tensors["correction.proj_in.weight"]  # [B, H + G]
        self.w_out = tensors["correction.proj_out.weight"]  # [V, B]
        self.embed = target.embed

    def step(self, s, token):
        g = self.g
        gx, gh = self.w_ih @ self.embed[token], self.w_hh @ s
        r = torch.sigmoid(gx[:g] + gh[:g])
        z = torch.sigmoid(gx[g:2 * g] + gh[g:2 * g])
        n = torch.tanh(gx[2 * g:] + r * gh[2 * g:])
        return (1 - z) * n + z * s

    def refine(self, base_logits, hidden, anchor, proposals):
        """base_logits [W, V], hidden [W, H] (the backbone's final-normed rows) and the realised
        proposals [W] -> (corrected logits [W, V], SiLU outputs [W, B] (row 0 zero))."""
        width = base_logits.shape[0]
        out, mids = base_logits.clone(), torch.zeros(width, self.b, dtype=torch.float64)
        s = self.step(torch.zeros(self.g, dtype=torch.float64), anchor)
        for k in range(1, width):
            s = self.step(s, proposals[k - 1])
            pre = self.w_in @ torch.cat([hidden[k], s])
            mids[k] = pre * torch.sigmoid(pre)
            out[k] += self.w_out @ mids[k]
        return out, mids

    def budget(self, draft_eps, hidden_size, width):
        """Relative bound for a correction: the backbone's draft budget (its rows z carry that
        error) plus float32 rounding along the head's own chain: `width` GRU steps (two products
        and the gate arithmetic), proj_in, SiLU and proj_out (hf_reference's _eps)."""
        gru = width * ((hidden_size + 2) + (self.g + 2) + 6)
        chain = gru + (hidden_size + self.g + 2) + 4 + (self.b + 2)
        return draft_eps + ref.LAMBDA * ref.U * math.sqrt(chain)

    def tolerance(self, eps, mids):
        """Per-logit bound of the correction, eps · Σ_b |W_out[v, b] · m_b| -> [W, V]."""
        return eps * (mids.abs() @ self.w_out.abs().T)
