"""Stage 3c: trains the Domino head on the frozen exported pair (models/tiny-target and
models/tiny-dflash, BF16 as dscale serves them).

Data: the target's own greedy answers (work/responses.jsonl, stage 3a), as for the drafter.
Per step: random anchors among response positions; the backbone drafts [anchor, MASK x 15]
exactly as in train_drafter.py (teacher-forced context); the head reads the true tokens
[anchor, t_1 .. t_14] (teacher-forced causal encoding) and corrects positions 2..15.

Base-anchored curriculum: loss = (1 - a) * CE(backbone logits) + a * CE(corrected logits), the
weight a rising linearly from 0 to 1 over the first --curriculum share of the steps. The backbone
stays frozen here (the bundled drafter is served unchanged without the head), so the anchor term
is a constant that keeps the logged loss continuous and the curriculum amounts to a ramp of the
head's loss weight. Position weights exp(-(k-1)/7) as for the drafter.
"""
import argparse
import json
import os
import random

import torch
import torch.nn.functional as F

from common import ROOT, WORK
from domino_torch import DominoHead
from qwen3_torch import DFlashDrafter, Qwen3
from run_util import Budget, Logger, add_run_args, elapsed, lr_at, resume, save_ckpt, say, setup
from safetensors_io import load
from train_drafter import draft_blocks, make_batch, read_responses


def load_exported(target_dir, drafter_dir):
    with open(os.path.join(target_dir, "config.json")) as f:
        tcfg = json.load(f)
    with open(os.path.join(drafter_dir, "config.json")) as f:
        dcfg = json.load(f)
    target = Qwen3(tcfg)
    sd = load(os.path.join(target_dir, "model.safetensors"))
    target.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v.float()
                            for k, v in sd.items()})
    layer_ids = dcfg["dflash_config"]["target_layer_ids"]
    drafter = DFlashDrafter(dcfg, layer_ids)
    drafter.load_state_dict({k: v.float() for k, v in
                             load(os.path.join(drafter_dir, "model.safetensors")).items()})
    for m in (target, drafter):
        m.eval()
        for p in m.parameters():
            p.requires_grad_(False)
    return target, drafter, tcfg, dcfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gru-hidden", type=int, default=128)
    ap.add_argument("--bottleneck", type=int, default=64)
    ap.add_argument("--curriculum", type=float, default=0.5,
                    help="share of the steps over which the loss moves to the corrected logits")
    ap.add_argument("--seqs-per-batch", type=int, default=32)
    ap.add_argument("--anchors", type=int, default=32)
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--drafter", default=os.path.join(ROOT, "models", "tiny-dflash"))
    ap.add_argument("--responses", default=os.path.join(WORK, "responses.jsonl"))
    ap.add_argument("--out", default=os.path.join(WORK, "domino"))
    add_run_args(ap, seed=2718, steps=600, lr=3e-3)
    args = ap.parse_args()
    device = setup(args)
    rng = random.Random(args.seed)
    target, drafter, tcfg, dcfg = load_exported(args.target, args.drafter)
    target, drafter = target.to(device), drafter.to(device)
    args.target_layers = dcfg["dflash_config"]["target_layer_ids"]
    args.block = dcfg["block_size"]
    mask_id = dcfg["dflash_config"]["mask_token_id"]
    pad = tcfg["bos_token_id"]
    H, V, Bk = tcfg["hidden_size"], tcfg["vocab_size"], args.block
    head = DominoHead(H, V, args.gru_hidden, args.bottleneck).to(device)
    say(f"Domino head {sum(p.numel() for p in head.parameters())/1e6:.2f}M parameters on {device}")
    data = read_responses(args.responses)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    kw = torch.exp(-(torch.arange(1, Bk, dtype=torch.float32, device=device) - 1) / args.gamma)
    os.makedirs(args.out, exist_ok=True)
    config = {"hidden_size": H, "vocab_size": V, "gru_hidden_size": args.gru_hidden,
              "bottleneck_size": args.bottleneck}
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    step = 0
    if args.resume:
        step = resume(ckpt_path, head, opt, args, rng, device)["step"]
    log = Logger(os.path.join(args.out, "loss.tsv"), ["step", "alpha", "loss", "ce_base",
                 "ce_head", "accept_len_base", "accept_len_head", "seconds"], args.resume)
    budget = Budget(args, step)
    stats, order = [0.0] * 5 + [0], []
    while step < args.steps:
        if len(order) < args.seqs_per_batch:
            order = list(range(len(data)))
            rng.shuffle(order)
        ids, anchors, lengths = make_batch([data[order.pop()] for _ in range(args.seqs_per_batch)],
                                           args, rng, pad, mask_id, device)
        B, N = anchors.shape
        with torch.no_grad():
            z, labels, valid, blk_ids = draft_blocks(target, drafter, ids, anchors, lengths, args,
                                                     mask_id)
            z = z.reshape(B * N, Bk - 1, H)
            base = target.lm_head(z)
            # The realised prefix under teacher forcing: anchor, then the true tokens 1..14.
            prefix = torch.cat([blk_ids[:, :, :1].reshape(B * N, 1),
                                labels.reshape(B * N, Bk - 1)[:, :-1]], 1)
            prefix_emb = target.embed_tokens(prefix)
        lr = lr_at(args, step, floor=0.05)
        for g in opt.param_groups:
            g["lr"] = lr
        alpha = min(1.0, (step + 1) / max(1.0, args.curriculum * args.steps))
        corrected = head.teacher_forced(z, base, prefix_emb)
        w = (kw * valid).reshape(B * N, Bk - 1)
        flat_labels = labels.reshape(-1)

        def weighted_ce(logits):
            ce = F.cross_entropy(logits.reshape(-1, V), flat_labels, reduction="none")
            return (ce.reshape(B * N, Bk - 1) * w).sum() / w.sum()

        ce_base, ce_head = weighted_ce(base), weighted_ce(corrected)
        loss = (1 - alpha) * ce_base + alpha * ce_head
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        step += 1
        budget.tick(step, say)
        with torch.no_grad():
            ok = valid.reshape(B * N, Bk - 1)
            lab = labels.reshape(B * N, Bk - 1)
            acc_base = ((base.argmax(-1) == lab) & ok).long().cumprod(-1).sum(-1).float().mean()
            acc_head = ((corrected.argmax(-1) == lab) & ok).long().cumprod(-1).sum(-1).float().mean()
        for i, v in enumerate((loss, ce_base, ce_head, acc_base, acc_head)):
            stats[i] += v.item()
        stats[5] += 1
        if step % 25 == 0 or step == args.steps:
            m = [s / stats[5] for s in stats[:5]]
            say(f"step {step}/{args.steps} alpha {alpha:.2f} loss {m[0]:.4f} ce base {m[1]:.4f} "
                f"head {m[2]:.4f} accept-len base {m[3]:.2f} head {m[4]:.2f} lr {lr:.2e}")
            log.row(step, f"{alpha:.2f}", *(f"{v:.4f}" for v in m[:3]),
                    *(f"{v:.2f}" for v in m[3:]), f"{elapsed():.0f}")
            stats = [0.0] * 5 + [0]
        if step % args.save_every == 0 or step == args.steps:
            save_ckpt(ckpt_path, config=config, model=head.state_dict(), opt=opt.state_dict(),
                      step=step, steps=args.steps, rng=rng.getstate())
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
