"""The DSpark drafter (deepseek-ai/DeepSpec's Qwen3DSparkModel) in PyTorch: the DFlash backbone,
a Markov head and a confidence head, with DSpark's training losses. Written from the published
definition; the math, not the code, is DeepSpec's.

Block. The block [anchor, MASK x (B-1)] sits at positions a .. a+B-1 and sees the target's
features at positions strictly before a (as DFlash's); row j (0-based) predicts the token at
a + j + 1, so the anchor's own row is the first prediction (DFlash's row k predicts a + k and
its anchor row predicts nothing). A verify step then checks W = B + 1 tokens.

Markov head (vanilla). Draft logits of row j = lm_head(h_j) + W2 W1[prev_j], h_j the backbone's
normed row, W1 a [V, r] table, W2 a [V, r] projection, prev_0 the anchor token and prev_j the
token row j-1 drafted (in training the true token at a + j: teacher forcing). Decoding is
therefore sequential within a block, through the head only.

Confidence head. logit_j = proj([h_j ; W1[prev_j]]) (a [1, d + r] linear with bias): the
predicted probability that row j's draft is accepted, trained against the soft acceptance
1 - TV(draft, target) = 1 - 1/2 |softmax(draft_j) - softmax(target_j)|_1 (detached), target_j
the frozen target's logits at position a + j (which predict a + j + 1).

Losses, each a mean over the rows with weights exp(-j / gamma) (gamma 4) times the eval mask
(the contiguous prefix of rows whose label exists): cross-entropy against the true tokens, the
L1 distance of the probability vectors (twice the TV distance) and the confidence head's
binary cross-entropy; total = 0.1 CE + 0.9 L1 + 1.0 BCE (DeepSpec's defaults).
"""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen3_torch import DFlashDrafter
from safetensors_io import load as load_safetensors
from train_drafter import block_labels, run_blocks

ARCH = "Qwen3DSparkModel"
# Tensors the exported folder holds besides the drafter's own: copies of the target's.
TARGET_COPIES = ("embed_tokens.weight", "lm_head.weight")


class MarkovHead(nn.Module):
    """Vanilla Markov head: a rank-r bias W2 W1[prev] on the draft logits."""

    def __init__(self, vocab, rank):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, vocab, bias=False)

    def forward(self, prev):
        """prev [...] token ids -> (bias [..., V], W1[prev] [..., r])."""
        e = self.markov_w1(prev)
        return self.markov_w2(e), e


class ConfidenceHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def forward(self, x):
        return self.proj(x).squeeze(-1)


class DSparkDrafter(DFlashDrafter):
    """DFlashDrafter's backbone (fc, hidden_norm, layers, norm: the same parameter names) plus
    markov_head and confidence_head. The target's embedding and lm_head stay outside."""

    def __init__(self, cfg):
        super().__init__(cfg, cfg["target_layer_ids"])
        assert cfg.get("markov_head_type", "vanilla") == "vanilla", "only the vanilla head"
        r, V, H = cfg["markov_rank"], cfg["vocab_size"], cfg["hidden_size"]
        self.markov_head = MarkovHead(V, r)
        self.confidence_head = ConfidenceHead(H + (r if cfg["confidence_head_with_markov"] else 0))
        # DeepSpec's initialisation (Qwen3PreTrainedModel): normal(0, 0.02), biases zero.
        std = cfg.get("initializer_range", 0.02)
        for m in (self.markov_head.markov_w1, self.markov_head.markov_w2,
                  self.confidence_head.proj):
            nn.init.normal_(m.weight, std=std)
        nn.init.zeros_(self.confidence_head.proj.bias)

    def heads(self, h, lm_head, prev):
        """Normed rows h [..., H], their previous tokens prev [...] -> (draft logits [..., V],
        confidence logits [...])."""
        bias, e = self.markov_head(prev)
        logits = lm_head(h) + bias
        feat = torch.cat([h, e], dim=-1) if self.cfg["confidence_head_with_markov"] else h
        return logits, self.confidence_head(feat)


def dspark_config(tcfg, args, mask_id):
    """The exported config.json: the target's Qwen3 fields with DeepSpec's DSpark fields."""
    cfg = dict(tcfg)
    if isinstance(cfg.get("eos_token_id"), list):
        cfg["eos_token_id"] = cfg["eos_token_id"][0]
    cfg.update({
        "architectures": [ARCH], "num_hidden_layers": args.layers,
        "intermediate_size": args.intermediate, "max_window_layers": args.layers,
        "layer_types": ["full_attention"] * args.layers, "tie_word_embeddings": False,
        "block_size": args.block, "mask_token_id": mask_id,
        "target_layer_ids": args.target_layers, "num_target_layers": tcfg["num_hidden_layers"],
        "num_anchors": args.anchors, "markov_rank": args.markov_rank,
        "markov_head_type": "vanilla", "enable_confidence_head": True,
        "confidence_head_with_markov": True,
    })
    return cfg


def dspark_outputs(target, drafter, ids, anchors, lengths, mask_id):
    """Teacher-forced outputs of every block: draft logits [B, N, Bk, V], confidence logits
    [B, N, Bk], labels (the tokens at a+1 .. a+Bk) [B, N, Bk], the eval mask [B, N, Bk] and the
    target's logits at a .. a+Bk-1 (aligned with the labels) [B, N, Bk, V]."""
    cfg = drafter.cfg
    Bk = cfg["block_size"]
    out, blk_ids, last = run_blocks(target, drafter, ids, anchors, Bk, cfg["target_layer_ids"],
                                    mask_id, final=True)
    labels, valid = block_labels(ids, anchors, lengths, 1, Bk)
    valid = valid.long().cumprod(-1).bool()  # the contiguous valid prefix
    prev = torch.cat([blk_ids[:, :, :1], labels[:, :, :-1]], dim=-1)  # anchor, then true tokens
    logits, conf = drafter.heads(out, target.lm_head, prev)
    with torch.no_grad():
        B, N = anchors.shape
        pos = (anchors[:, :, None] + torch.arange(Bk, device=ids.device)).clamp(max=ids.shape[1] - 1)
        aligned = torch.gather(last, 1, pos.reshape(B, -1, 1).expand(-1, -1, last.shape[-1]))
        tlogits = target.lm_head(aligned).reshape(B, N, Bk, -1)
    return logits, conf, labels, valid, tlogits


def dspark_loss(logits, conf, labels, valid, tlogits, gamma=4.0, alpha=(0.1, 0.9, 1.0)):
    """(total, {ce, l1, bce}, hits [B, N, Bk], soft acceptance [B, N, Bk])."""
    Bk = logits.shape[2]
    w = torch.exp(-torch.arange(Bk, dtype=torch.float32, device=logits.device) / gamma) * valid
    den = w.sum() + 1e-6
    logits = logits.float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                         reduction="none").reshape(labels.shape)
    l1 = (torch.softmax(logits, -1) - torch.softmax(tlogits.float(), -1)).abs().sum(-1)
    accept = (1 - 0.5 * l1).clamp(0, 1)
    bce = F.binary_cross_entropy_with_logits(conf.float(), accept.detach(), reduction="none")
    terms = {"ce": (ce * w).sum() / den, "l1": (l1 * w).sum() / den, "bce": (bce * w).sum() / den}
    total = alpha[0] * terms["ce"] + alpha[1] * terms["l1"] + alpha[2] * terms["bce"]
    hit = (logits.argmax(-1) == labels) & valid
    return total, terms, hit, accept.detach()


def accepted(hit):
    """Accepted drafts per block under teacher forcing (the bonus token not counted): with the
    Markov head fed the true tokens, the drafts up to the first miss are exactly the greedy
    drafts decoding would make."""
    return hit.long().cumprod(-1).sum(-1)


def load_dspark(folder, target=None, device="cpu"):
    """An exported DSpark drafter (config.json, model.safetensors). With target, checks that the
    folder's embed_tokens / lm_head are the target's (DeepSpec saves copies)."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["architectures"] == [ARCH], cfg["architectures"]
    weights = {k: v.float() for k, v in
               load_safetensors(os.path.join(folder, "model.safetensors")).items()}
    if target is not None:
        for k in TARGET_COPIES:
            mine = getattr(target, k.split(".")[0]).weight.detach().cpu()
            if not torch.equal(weights[k], mine):
                raise SystemExit(f"{folder}: {k} is not the target's")
    drafter = DSparkDrafter(cfg)
    drafter.load_state_dict({k: v for k, v in weights.items() if k not in TARGET_COPIES})
    return drafter.to(device).eval(), cfg


@torch.no_grad()
def draft_greedy(drafter, lm_head, h, anchor_token):
    """Decoding's greedy block for one anchor: h [Bk, H] the backbone's rows, anchor_token the
    block's first token -> (draft tokens [Bk], step logits [Bk, V], confidences [Bk])."""
    prev = torch.tensor(anchor_token, device=h.device)
    toks, logs, confs = [], [], []
    for j in range(h.shape[0]):
        lg, c = drafter.heads(h[j], lm_head, prev)
        prev = lg.argmax(-1)
        toks.append(int(prev))
        logs.append(lg)
        confs.append(float(torch.sigmoid(c)))
    return toks, torch.stack(logs), confs
