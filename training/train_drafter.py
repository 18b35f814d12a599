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
import os
import random

import torch
import torch.nn.functional as F

from common import ROOT, WORK
from generate_responses import load_target
from qwen3_torch import DFlashDrafter
from run_util import (Budget, Logger, add_run_args, autocast, elapsed, lr_at, resume, save_ckpt,
                      say, setup)
from safetensors_io import load as load_safetensors
from tokenizer_bpe import Tokenizer


def drafter_config(tcfg, args, mask_id):
    cfg = dict(tcfg)
    if isinstance(cfg.get("eos_token_id"), list):  # an exported target lists <|endoftext|> too
        cfg["eos_token_id"] = cfg["eos_token_id"][0]
    cfg.update({
        "architectures": ["DFlashDraftModel"], "num_hidden_layers": args.layers,
        "intermediate_size": args.intermediate, "block_size": args.block,
        "num_target_layers": tcfg["num_hidden_layers"], "max_window_layers": args.layers,
        "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": args.target_layers},
        "tie_word_embeddings": False,
    })
    return cfg


def read_responses(paths):
    """The target's answers from one or more comma-separated responses.jsonl files."""
    rows = []
    for path in paths.split(","):
        with open(path) as f:
            rows += [json.loads(l) for l in f if l.endswith("\n")]
    return [d for d in rows if len(d["ids"]) - d["prompt_len"] >= 2]


def make_batch(batch, args, rng, pad, mask_id, device):
    """Token ids [B, T], anchors [B, N] among response positions, lengths [B]."""
    T = max(len(d["ids"]) for d in batch)
    B, N = len(batch), args.anchors
    ids = torch.full((B, T), pad, dtype=torch.long)
    anchors = torch.zeros((B, N), dtype=torch.long)
    for b, d in enumerate(batch):
        ids[b, :len(d["ids"])] = torch.tensor(d["ids"])
        cand = range(d["prompt_len"], len(d["ids"]) - 1)  # an anchor needs >= 1 label
        pick = rng.sample(cand, N) if len(cand) >= N else [rng.choice(cand) for _ in range(N)]
        anchors[b] = torch.tensor(sorted(pick))
    lengths = torch.tensor([len(d["ids"]) for d in batch])
    return ids.to(device), anchors.to(device), lengths.to(device)


def run_blocks(target, drafter, ids, anchors, block, target_layers, mask_id, final=False):
    """Every block [anchor, MASK x (block-1)] at positions anchor..anchor+block-1 through the
    drafter: each row sees the target's features at positions strictly before its anchor and
    its own block's rows (bidirectionally). Returns the drafter's normed rows [B, N, block, H],
    the block tokens [B, N, block] and, with final, the target's normed last hidden states
    [B, T, H] (else None)."""
    dev = ids.device
    B, T = ids.shape
    N, Bk = anchors.shape[1], block
    with torch.no_grad():
        last, feats = target(ids, capture=set(target_layers))
        ctx = torch.cat([feats[i] for i in target_layers], dim=-1)
    offs = torch.arange(Bk, device=dev)
    blk_pos = (anchors[:, :, None] + offs).reshape(B, N * Bk)
    blk_ids = torch.full((B, N, Bk), mask_id, dtype=torch.long, device=dev)
    blk_ids[:, :, 0] = torch.gather(ids, 1, anchors)
    blk_emb = target.embed_tokens(blk_ids.reshape(B, N * Bk))
    # Block row (n, k) sees target context j < anchor_n and the keys of its own block n.
    ctx_ok = torch.arange(T, device=dev)[None, None, :] < anchors[:, :, None]  # [B,N,T]
    ctx_ok = ctx_ok[:, :, None, :].expand(B, N, Bk, T).reshape(B, N * Bk, T)
    blk_ok = torch.eye(N, dtype=torch.bool, device=dev)[:, None, :, None].expand(N, Bk, N, Bk)
    blk_ok = blk_ok.reshape(1, N * Bk, N * Bk).expand(B, -1, -1)
    ok = torch.cat([ctx_ok, blk_ok], dim=-1)
    mask = torch.zeros(ok.shape, device=dev).masked_fill(~ok, -1e30)[:, None]
    ctx_pos = torch.arange(T, device=dev)[None].expand(B, T)
    out = drafter(ctx, ctx_pos, blk_emb, blk_pos, mask).reshape(B, N, Bk, -1)
    return out, blk_ids, (last if final else None)


def block_labels(ids, anchors, lengths, first, count):
    """The tokens at anchor+first .. anchor+first+count-1 [B, N, count] and which exist."""
    T = ids.shape[1]
    lab_pos = anchors[:, :, None] + torch.arange(first, first + count, device=ids.device)
    labels = torch.gather(ids, 1, lab_pos.clamp(max=T - 1).reshape(ids.shape[0], -1))
    return labels.reshape(lab_pos.shape), lab_pos < lengths[:, None, None]


def draft_blocks(target, drafter, ids, anchors, lengths, args, mask_id):
    """The drafter's normed rows for every block [B, N, 15, H] (rows 1..15), their labels
    [B, N, 15], which labels exist [B, N, 15], and the block tokens [B, N, 16]."""
    out, blk_ids, _ = run_blocks(target, drafter, ids, anchors, args.block, args.target_layers,
                                 mask_id)
    labels, valid = block_labels(ids, anchors, lengths, 1, args.block - 1)
    return out[:, :, 1:], labels, valid, blk_ids


def block_loss(target, drafter, ids, anchors, lengths, args, mask_id, kw):
    """Weighted cross-entropy of every block's rows 1..15, and the rows' argmax hits."""
    out, labels, valid, _ = draft_blocks(target, drafter, ids, anchors, lengths, args, mask_id)
    logits = target.lm_head(out).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                         reduction="none").reshape(labels.shape)
    w = kw * valid
    hit = (logits.argmax(-1) == labels) & valid
    return (ce * w).sum() / w.sum(), hit


def init_from(drafter, folder, heads=()):
    """Loads an exported drafter's weights. A drafter with more layers than the export keeps the
    exported layers and starts each added one as the identity (its o_proj and down_proj zero), so
    training continues from the exported drafter's predictions with more capacity. Parameters
    under the prefixes in heads (a DSpark drafter's own heads) may be missing: they keep their
    initialisation."""
    weights = {k: v.float() for k, v in
               load_safetensors(os.path.join(folder, "model.safetensors")).items()}
    missing, unexpected = drafter.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not k.startswith(tuple(heads))] if heads else missing
    have = {int(k.split(".")[1]) for k in weights if k.startswith("layers.")}
    added = sorted({int(k.split(".")[1]) for k in missing if k.startswith("layers.")})
    if unexpected or any(not k.startswith("layers.") for k in missing) or \
            (added and min(added) <= max(have)):
        raise SystemExit(f"--init {folder}: weights do not fit this drafter "
                         f"(missing {missing[:4]}, unexpected {unexpected[:4]})")
    for i in added:
        torch.nn.init.zeros_(drafter.layers[i].self_attn.o_proj.weight)
        torch.nn.init.zeros_(drafter.layers[i].mlp.down_proj.weight)
    say(f"initialised from {folder}" + (f"; added layers {added} start as the identity"
                                        if added else ""))



def start_drafter_run(args):
    """What every drafter trainer starts from: the device, the seeded RNG, the mask and pad ids of
    the bundled tokenizer, and the frozen target."""
    device = setup(args)
    rng = random.Random(args.seed)
    tok = Tokenizer(args.tokenizer)
    target = load_target(args.target, device)
    for p in target.parameters():
        p.requires_grad_(False)
    return device, rng, tok.added["<|MASK|>"], tok.added["<|endoftext|>"], target

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--target-layers", type=lambda s: [int(x) for x in s.split(",")],
                    default=[1, 3, 5, 7])
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--gamma", type=float, default=7.0)
    ap.add_argument("--seqs-per-batch", type=int, default=64)
    ap.add_argument("--anchors", type=int, default=32)
    ap.add_argument("--target", default=os.path.join(WORK, "target", "chosen.pt"),
                    help="the frozen target: a training checkpoint or an exported folder")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--responses", default=os.path.join(WORK, "responses.jsonl"),
                    help="the target's answers: one file or a comma-separated list")
    ap.add_argument("--out", default=os.path.join(WORK, "drafter"))
    ap.add_argument("--init", help="start from these weights: an exported drafter folder")
    add_run_args(ap, seed=99, steps=2000, lr=2e-3)
    args = ap.parse_args()
    device, rng, mask_id, pad, target = start_drafter_run(args)
    cfg = drafter_config(target.cfg, args, mask_id)
    drafter = DFlashDrafter(cfg, args.target_layers).to(device)
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    step = 0
    if args.init:
        init_from(drafter, args.init)
    if args.resume:
        step = resume(ckpt_path, drafter, opt, args, rng, device)["step"]
    data = read_responses(args.responses)
    say(f"drafter {sum(p.numel() for p in drafter.parameters())/1e6:.2f}M parameters on "
        f"{device}; {len(data)} sequences")
    kw = torch.exp(-(torch.arange(1, args.block, dtype=torch.float32, device=device) - 1)
                   / args.gamma)  # k = 1..15
    log = Logger(os.path.join(args.out, "loss.tsv"),
                 ["step", "loss", "acc_k1", "sim_accept_len", "seconds"], args.resume)
    budget = Budget(args, step)
    stats, order = [0.0, 0.0, 0.0, 0], []

    def save():
        save_ckpt(ckpt_path, config=cfg, model=drafter.state_dict(), opt=opt.state_dict(),
                  step=step, steps=args.steps, rng=rng.getstate())

    while step < args.steps:
        if len(order) < args.seqs_per_batch:
            order = list(range(len(data)))
            rng.shuffle(order)
        batch = make_batch([data[order.pop()] for _ in range(args.seqs_per_batch)], args, rng,
                           pad, mask_id, device)
        lr = lr_at(args, step, floor=0.05)
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast(device):
            loss, hit = block_loss(target, drafter, *batch, args, mask_id, kw)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        budget.tick(step, say)
        stats[0] += loss.item()
        stats[1] += float(hit[:, :, 0].float().mean())
        stats[2] += float(hit.long().cumprod(-1).sum(-1).float().mean())  # accepted per block
        stats[3] += 1
        if step % 25 == 0 or step == args.steps:
            n = stats[3]
            say(f"step {step}/{args.steps} loss {stats[0]/n:.4f} acc@1 {stats[1]/n:.3f} "
                f"accept-len {stats[2]/n:.2f} (+1 bonus) lr {lr:.2e}")
            log.row(step, f"{stats[0]/n:.4f}", f"{stats[1]/n:.3f}", f"{stats[2]/n:.2f}",
                    f"{elapsed():.0f}")
            stats = [0.0, 0.0, 0.0, 0]
        if step % args.save_every == 0 or step == args.steps:
            save()
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
