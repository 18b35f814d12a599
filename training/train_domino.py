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
import math
import os
import random
import time

import torch
import torch.nn.functional as F

from common import ROOT, WORK
from domino_torch import DominoHead
from qwen3_torch import DFlashDrafter, Qwen3
from safetensors_io import load


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
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--curriculum", type=float, default=0.5,
                    help="share of the steps over which the loss moves to the corrected logits")
    ap.add_argument("--seqs-per-batch", type=int, default=8)
    ap.add_argument("--anchors", type=int, default=32)
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=2718)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--drafter", default=os.path.join(ROOT, "models", "tiny-dflash"))
    ap.add_argument("--responses", default=os.path.join(WORK, "responses.jsonl"))
    ap.add_argument("--out", default=os.path.join(WORK, "domino"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    target, drafter, tcfg, dcfg = load_exported(args.target, args.drafter)
    H, V = tcfg["hidden_size"], tcfg["vocab_size"]
    Bk = dcfg["block_size"]
    mask_id = dcfg["dflash_config"]["mask_token_id"]
    layer_ids = dcfg["dflash_config"]["target_layer_ids"]
    pad = tcfg["bos_token_id"]
    head = DominoHead(H, V, args.gru_hidden, args.bottleneck)
    print(f"head params {sum(p.numel() for p in head.parameters())/1e6:.3f}M", flush=True)
    with open(args.responses) as f:
        data = [json.loads(l) for l in f if l.strip()]
    data = [d for d in data if len(d["ids"]) - d["prompt_len"] >= 2]
    print(f"{len(data)} sequences", flush=True)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, args.steps // 25)
    kw = torch.exp(-(torch.arange(1, Bk, dtype=torch.float32) - 1) / args.gamma)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "loss.tsv"), "w")
    log.write("step\talpha\tloss\tce_base\tce_head\taccept_base\taccept_head\tseconds\n")
    t0 = time.time()
    stats, order = [0.0] * 5 + [0], []
    for step in range(1, args.steps + 1):
        if len(order) < args.seqs_per_batch:
            order = list(range(len(data)))
            rng.shuffle(order)
        batch = [data[order.pop()] for _ in range(args.seqs_per_batch)]
        T = max(len(d["ids"]) for d in batch)
        B, N = len(batch), args.anchors
        ids = torch.full((B, T), pad, dtype=torch.long)
        for b, d in enumerate(batch):
            ids[b, :len(d["ids"])] = torch.tensor(d["ids"])
        anchors = torch.zeros((B, N), dtype=torch.long)
        for b, d in enumerate(batch):
            cand = list(range(d["prompt_len"], len(d["ids"]) - 1))
            pick = rng.sample(cand, N) if len(cand) >= N else [rng.choice(cand) for _ in range(N)]
            anchors[b] = torch.tensor(sorted(pick))
        lengths = torch.tensor([len(d["ids"]) for d in batch])
        offs = torch.arange(Bk)
        lab_pos = anchors[:, :, None] + offs[1:]
        labels = torch.gather(ids, 1, lab_pos.clamp(max=T - 1).reshape(B, -1)).reshape(B, N, Bk - 1)
        valid = lab_pos < lengths[:, None, None]
        with torch.no_grad():
            _, feats = target(ids, capture=set(layer_ids))
            ctx = torch.cat([feats[i] for i in layer_ids], dim=-1)
            blk_ids = torch.full((B, N, Bk), mask_id, dtype=torch.long)
            blk_ids[:, :, 0] = torch.gather(ids, 1, anchors)
            blk_emb = target.embed_tokens(blk_ids.reshape(B, N * Bk))
            blk_pos = (anchors[:, :, None] + offs).reshape(B, N * Bk)
            ctx_ok = torch.arange(T)[None, None, :] < anchors[:, :, None]
            ctx_ok = ctx_ok[:, :, None, :].expand(B, N, Bk, T).reshape(B, N * Bk, T)
            blk_ok = torch.eye(N, dtype=torch.bool)[:, None, :, None].expand(N, Bk, N, Bk)
            blk_ok = blk_ok.reshape(1, N * Bk, N * Bk).expand(B, -1, -1)
            mask = torch.where(torch.cat([ctx_ok, blk_ok], -1), 0.0, -1e30)[:, None]
            z = drafter(ctx, torch.arange(T)[None].expand(B, T), blk_emb, blk_pos, mask)
            z = z.reshape(B * N, Bk, H)[:, 1:]
            base = target.lm_head(z)
            # The realised prefix under teacher forcing: anchor, then the true tokens 1..14.
            prefix = torch.cat([blk_ids[:, :, :1].reshape(B * N, 1),
                                labels.reshape(B * N, Bk - 1)[:, :-1]], 1)
            prefix_emb = target.embed_tokens(prefix)
        lr = args.lr * min(1.0, step / warmup) * \
            (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        alpha = min(1.0, step / max(1.0, args.curriculum * args.steps))
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
        with torch.no_grad():
            ok = valid.reshape(B * N, Bk - 1)
            lab = labels.reshape(B * N, Bk - 1)
            acc_base = ((base.argmax(-1) == lab) & ok).long().cumprod(-1).sum(-1).float().mean()
            acc_head = ((corrected.argmax(-1) == lab) & ok).long().cumprod(-1).sum(-1).float().mean()
        for i, v in enumerate((loss.item(), ce_base.item(), ce_head.item(), acc_base.item(),
                               acc_head.item())):
            stats[i] += v
        stats[5] += 1
        if step % 10 == 0 or step == args.steps:
            n, el = stats[5], time.time() - t0
            m = [s / n for s in stats[:5]]
            print(f"step {step} alpha {alpha:.2f} loss {m[0]:.4f} ce base {m[1]:.4f} head {m[2]:.4f} "
                  f"accept-len base {m[3]:.2f} head {m[4]:.2f} lr {lr:.2e} {el:.0f}s", flush=True)
            log.write(f"{step}\t{alpha:.2f}\t{m[0]:.4f}\t{m[1]:.4f}\t{m[2]:.4f}\t{m[3]:.2f}\t"
                      f"{m[4]:.2f}\t{el:.0f}\n")
            log.flush()
            stats = [0.0] * 5 + [0]
    config = {"hidden_size": H, "vocab_size": V, "gru_hidden_size": args.gru_hidden,
              "bottleneck_size": args.bottleneck}
    torch.save({"config": config, "model": head.state_dict(), "step": args.steps},
               os.path.join(args.out, "ckpt.pt"))
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
