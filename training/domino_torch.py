"""The Domino head in PyTorch (training side); dscale's C++ head is src/model/domino_head.h.

A bias-free one-layer GRU over the target embeddings of the realised prefix tokens
[anchor, proposal 1, ...] gives s_i; a bias-free two-layer MLP [z_i; s_i] -> bottleneck -> SiLU
-> vocab is added to the backbone's logits of position i >= 2 (position 1 keeps the backbone's).
Tensor names are those of domino_head.safetensors (docs/DOMINO.md).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DominoHead(nn.Module):
    def __init__(self, hidden, vocab, gru_hidden, bottleneck):
        super().__init__()
        self.gru = nn.GRU(hidden, gru_hidden, num_layers=1, bias=False, batch_first=True)
        self.correction = nn.Module()
        self.correction.proj_in = nn.Linear(hidden + gru_hidden, bottleneck, bias=False)
        self.correction.proj_out = nn.Linear(bottleneck, vocab, bias=False)
        # Zero output layer: the head starts as the identity on the backbone's logits.
        nn.init.zeros_(self.correction.proj_out.weight)

    def correct(self, z, s):
        """z [..., hidden], s [..., G] -> logit corrections [..., vocab]."""
        return self.correction.proj_out(F.silu(self.correction.proj_in(torch.cat([z, s], -1))))

    def teacher_forced(self, z, base, prefix_emb):
        """Corrected logits for whole blocks at once, the GRU reading the true tokens.

        z [R, W, hidden] backbone rows of positions 1..W, base [R, W, vocab] their logits,
        prefix_emb [R, W, hidden] embeddings of [anchor, token 1, ..., token W-1].
        Row k >= 1 is corrected with the state after anchor..token k (states[:, k]).
        """
        states, _ = self.gru(prefix_emb)  # [R, W, G]: after 1 .. W prefix tokens
        corr = self.correct(z[:, 1:], states[:, 1:])
        return torch.cat([base[:, :1], base[:, 1:] + corr], dim=1)
