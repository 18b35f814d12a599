"""Stage 3b: trains the DFlash drafter against the frozen target.

Per sequence (prompt + the target's own greedy response): target features from the
listed target layers; random anchors among response positions; blocks [anchor, MASK x 15]
at positions anchor..anchor+15 that see target context strictly before the anchor and
their own block (bidirectionally); block row k predicts the token at anchor+k with loss
weight exp(-(k-1)/gamma), normalized by the weight sum. Target embedding and lm_head are
shared and frozen.
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F

from common import WORK
from generate_responses import load_target
from qwen3_torch import DFlashDrafter
from tokenizer_bpe import Tokenizer


def drafter_config(tcfg, args, mask_id):
    cfg = dict(tcfg)
    cfg.update({
        "architectures": ["DFlashDraftModel"], "num_hidden_layers": args.layers,
        "intermediate_size": args.intermediate, "block_size": args.block,
        "num_target_layers": tcfg["num_hidden_layers"], "max_window_layers": args.layers,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": args.target_layers},
        "tie_word_embeddings": False,
    })
    return cfg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--intermediate", type=int, default=640)
    ap.add_argument("--target-layers", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 3, 5])
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--seqs-per-batch", type=int, default=8)
    ap.add_argument("--anchors", type=int, default=32)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--target", default=os.path.join(WORK, "target", "ckpt.pt"))
    ap.add_argument("--seed", type=int, default=99)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--responses", default=os.path.join(WORK, "responses.jsonl"))
    ap.add_argument("--out", default=os.path.join(WORK, "drafter"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tok = Tokenizer(os.path.join(WORK, "tokenizer"))
    mask_id = tok.added["<|MASK|>"]
    pad = tok.added["<|endoftext|>"]
    target = load_target(args.target)
    for p in target.parameters():
        p.requires_grad_(False)
    cfg = drafter_config(target.cfg, args, mask_id)
    drafter = DFlashDrafter(cfg, args.target_layers)
    print(f"drafter params {sum(p.numel() for p in drafter.parameters())/1e6:.2f}M", flush=True)
    def read_responses():
        # Re-read at every pass, so training can start while responses are still written.
        with open(args.responses) as f:
            rows = [json.loads(l) for l in f if l.endswith("\n")]
        return [d for d in rows if len(d["ids"]) - d["prompt_len"] >= 2]

    data = read_responses()
    print(f"{len(data)} sequences", flush=True)
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, args.steps // 25)
    Bk = args.block
    kw = torch.exp(-(torch.arange(1, Bk, dtype=torch.float32) - 1) / args.gamma)  # k=1..15
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "loss.tsv"), "w")
    log.write("step\tloss\tacc_k1\tsim_accept_len\tseconds\n")
    t0 = time.time()
    stats = [0.0, 0.0, 0.0, 0]
    order = []
    for step in range(1, args.steps + 1):
        if len(order) < args.seqs_per_batch:
            data = read_responses()
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
            lo, hi = d["prompt_len"], len(d["ids"]) - 2  # the anchor needs >= 1 label
            cand = list(range(lo, hi + 1))
            pick = rng.sample(cand, N) if len(cand) >= N else [rng.choice(cand) for _ in range(N)]
            anchors[b] = torch.tensor(sorted(pick))
        lengths = torch.tensor([len(d["ids"]) for d in batch])
        with torch.no_grad():
            _, feats = target(ids, capture=set(args.target_layers))
            ctx = torch.cat([feats[i] for i in args.target_layers], dim=-1)
        offs = torch.arange(Bk)
        blk_pos = (anchors[:, :, None] + offs).reshape(B, N * Bk)
        blk_ids = torch.full((B, N, Bk), mask_id, dtype=torch.long)
        blk_ids[:, :, 0] = torch.gather(ids, 1, anchors)
        blk_emb = target.embed_tokens(blk_ids.reshape(B, N * Bk))
        lab_pos = (anchors[:, :, None] + offs[1:])  # [B,N,15]
        labels = torch.gather(ids, 1, lab_pos.clamp(max=T - 1).reshape(B, -1)).reshape(B, N, Bk - 1)
        valid = lab_pos < lengths[:, None, None]
        # mask: block query (n,k) sees ctx j < anchor_n, and keys of block n.
        ctx_ok = torch.arange(T)[None, None, :] < anchors[:, :, None]  # [B,N,T]
        ctx_ok = ctx_ok[:, :, None, :].expand(B, N, Bk, T).reshape(B, N * Bk, T)
        blk_ok = torch.eye(N, dtype=torch.bool)[:, None, :, None].expand(N, Bk, N, Bk)
        blk_ok = blk_ok.reshape(1, N * Bk, N * Bk).expand(B, -1, -1)
        ok = torch.cat([ctx_ok, blk_ok], dim=-1)
        mask = torch.where(ok, 0.0, -1e30)[:, None]
        ctx_pos = torch.arange(T)[None].expand(B, T)
        lr = args.lr * min(1.0, step / warmup) * \
            (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        out = drafter(ctx, ctx_pos, blk_emb, blk_pos, mask).reshape(B, N, Bk, -1)[:, :, 1:]
        logits = target.lm_head(out)
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                             reduction="none").reshape(B, N, Bk - 1)
        w = kw * valid
        loss = (ce * w).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            hit = (logits.argmax(-1) == labels) & valid
            acc_len = hit.long().cumprod(-1).sum(-1).float()  # accepted drafts per block
            stats[0] += loss.item()
            stats[1] += hit[:, :, 0].float().mean().item()
            stats[2] += acc_len.mean().item()
            stats[3] += 1
        if step % 10 == 0 or step == args.steps:
            n = stats[3]
            el = time.time() - t0
            print(f"step {step} loss {stats[0]/n:.4f} acc@1 {stats[1]/n:.3f} "
                  f"accept-len {stats[2]/n:.2f} (+1 bonus) lr {lr:.2e} {el:.0f}s", flush=True)
            log.write(f"{step}\t{stats[0]/n:.4f}\t{stats[1]/n:.3f}\t{stats[2]/n:.2f}\t{el:.0f}\n")
            log.flush()
            stats = [0.0, 0.0, 0.0, 0]
        if step % 50 == 0 or step == args.steps:
            torch.save({"config": cfg, "model": drafter.state_dict(), "step": step},
                       os.path.join(args.out, "ckpt.pt"))
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
