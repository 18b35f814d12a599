"""A float64 reference of a DSpark drafter's heads, written from DeepSpec's definition
(deepspec/modeling/dspark/markov_head.py: VanillaMarkov, GatedMarkovHead, RNNHead;
common.py: AcceptRatePredictor; qwen3/modeling.py: sample_draft_tokens,
predict_confidence_step; eval/dspark/draft_ops.py: build_dspark_proposal), independent of dscale.

Greedy walk over one block of B rows, h_j the backbone's final-normed row j, base_j its logits,
prev_0 the anchor and prev_{j+1} the token proposed at j:
  e_j = W1[prev_j]                                  (markov_w1, an embedding [V, r])
  vanilla: x_j = e_j
  gated:   x_j = sigmoid(gate_proj([h_j ; e_j])) * e_j
  rnn:     (g, c, o) = chunks of joint_proj([s ; e_j ; h_j]),  s_0 = 0,
           s <- sigmoid(g) * s + (1 - sigmoid(g)) * tanh(c),  x_j = tanh(o)
  logits_j = base_j + markov_w2(x_j)                (no Markov head: base_j)
  token_j = argmax logits_j
  confidence_j = proj([h_j ; e_j]) with the Markov input, else proj(h_j)

The float32 error of each value is bounded to first order (absolute bounds, propagated through
the walk; u = 2^-24, lambda and the reduction bound as in hf_reference.py's error budget):
  * h_j carries the backbone's relative error eps norm-wise, so a product G . h_j is off by at
    most eps |G| |h_j| (Cauchy-Schwarz) on top of its own rounding;
  * a product of K terms plus a bias rounds within lambda u sqrt(K + 2) (sum |terms| + |bias|);
  * sigmoid and tanh pass an input error d on as f'(a) d (f' = s(1 - s), 1 - t^2) and add
    4u of their value (exp or tanh, an add and a divide);
  * an elementwise product or sum adds u of each part's magnitude;
  * W1's rows are exact (the checkpoint's values), as is an argmax given its inputs.
"""
import math

import torch

import hf_reference as ref

F64 = torch.float64
U = ref.U


def _reduction(terms, bias=None):
    """lambda u sqrt(K + 2) (sum |terms| + |bias|) per output row; terms [..., K]."""
    size = terms.abs().sum(dim=-1)
    if bias is not None:
        size = size + bias.abs()
    return ref.LAMBDA * U * math.sqrt(terms.shape[-1] + 2) * size


class DSparkHeadsReference:
    def __init__(self, cfg, tensors):
        prefix = "" if "fc.weight" in tensors else "model."

        def t(name):
            return tensors[prefix + name]

        self.rank = int(cfg["markov_rank"])
        self.kind = str(cfg["markov_head_type"]).lower() if self.rank > 0 else None
        self.confidence = bool(cfg["enable_confidence_head"])
        self.with_markov = self.confidence and bool(cfg["confidence_head_with_markov"])
        if self.rank > 0:
            self.w1 = t("markov_head.markov_w1.weight")  # [V, r]
            self.w2 = t("markov_head.markov_w2.weight")  # [V, r]
        if self.kind == "gated":
            self.gate_w = t("markov_head.gate_proj.weight")  # [r, H + r]
            self.gate_b = t("markov_head.gate_proj.bias")
        if self.kind == "rnn":
            self.joint_w = t("markov_head.joint_proj.weight")  # [3r, 2r + H]
            self.joint_b = t("markov_head.joint_proj.bias")
        if self.confidence:
            self.proj_w = t("confidence_head.proj.weight")  # [1, H (+ r)]
            self.proj_b = t("confidence_head.proj.bias")

    def walk(self, base, hidden, anchor, tokens, eps):
        """The walk over dscale's realised `tokens` [B] (each row compared given the same previous
        token), from the backbone's `base` logits [B, V] and normed rows `hidden` [B, H] whose
        float32 relative error is `eps`. Returns (corrected logits [B, V], their bound beyond the
        base logits' [B, V], confidence logits [B] or None, their bound [B] or None)."""
        rows, vocab = base.shape
        hsize = hidden.shape[1]
        logits, extra = base.clone(), torch.zeros(rows, vocab, dtype=F64)
        conf = torch.zeros(rows, dtype=F64) if self.confidence else None
        conf_tol = torch.zeros(rows, dtype=F64) if self.confidence else None
        r = self.rank
        s, ds = torch.zeros(r, dtype=F64), torch.zeros(r, dtype=F64)
        prev = anchor
        for j in range(rows):
            h, dh = hidden[j], eps * hidden[j].norm()  # dh: a norm-wise bound on h's error
            e = self.w1[prev] if r > 0 else None
            if r > 0:
                x, dx, s, ds = self.markov_input(h, dh, e, s, ds)
                bias = self.w2 @ x
                dbias = self.w2.abs() @ dx + _reduction(self.w2 * x[None, :])
                logits[j] += bias
                extra[j] = dbias + U * logits[j].abs()
            if self.confidence:
                z = torch.cat([h, e]) if self.with_markov else h
                w = self.proj_w[0]
                conf[j] = w @ z + self.proj_b[0]
                conf_tol[j] = (dh * w[:hsize].norm() + _reduction(w * z, self.proj_b[0])
                               + U * conf[j].abs())
            prev = int(tokens[j])
        return logits, extra, conf, conf_tol

    def markov_input(self, h, dh, e, s, ds):
        """x, its error bound dx [r], and the rnn state and its bound after this row."""
        r, hsize = self.rank, h.shape[0]
        if self.kind == "vanilla":
            return e, torch.zeros(r, dtype=F64), s, ds
        if self.kind == "gated":
            z = torch.cat([h, e])  # hidden first, as GatedMarkovHead concatenates
            pre = self.gate_w @ z + self.gate_b
            dpre = (dh * self.gate_w[:, :hsize].norm(dim=1)
                    + _reduction(self.gate_w * z[None, :], self.gate_b))
            g = torch.sigmoid(pre)
            dg = g * (1 - g) * dpre + 4 * U * g
            x = g * e
            return x, dg * e.abs() + U * x.abs(), s, ds
        assert self.kind == "rnn", self.kind
        z = torch.cat([s, e, h])  # [state ; W1[prev] ; hidden], RNNHead's order
        p = self.joint_w @ z + self.joint_b
        dp = (self.joint_w[:, :r].abs() @ ds + dh * self.joint_w[:, 2 * r:].norm(dim=1)
              + _reduction(self.joint_w * z[None, :], self.joint_b))
        gate, cand, x = torch.sigmoid(p[:r]), torch.tanh(p[r:2 * r]), torch.tanh(p[2 * r:])
        dgate = gate * (1 - gate) * dp[:r] + 4 * U * gate
        dcand = (1 - cand * cand) * dp[r:2 * r] + 4 * U * cand.abs()
        new_s = gate * s + (1 - gate) * cand
        new_ds = (dgate * (s - cand).abs() + gate * ds + (1 - gate) * dcand
                  + 4 * U * ((gate * s).abs() + ((1 - gate) * cand).abs()))
        dx = (1 - x * x) * dp[2 * r:] + 4 * U * x.abs()
        return x, dx, new_s, new_ds
