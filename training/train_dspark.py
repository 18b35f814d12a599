"""Trains a DSpark drafter (dspark_torch.py) against the frozen target.

As train_drafter.py, on the target's own greedy answers: random anchors among response
positions, blocks [anchor, MASK x (B-1)] that see target features strictly before the anchor,
but row j predicting the token at anchor + j + 1, the vanilla Markov head's bias on the draft
logits (teacher-forced previous tokens) and the confidence head; losses 0.1 CE + 0.9 L1 of the
probability vectors against the target's + 1.0 confidence BCE, rows weighted exp(-j/4). The
target's embedding and lm_head are shared and frozen. --init-backbone starts fc, hidden_norm,
layers and norm from an exported DFlash drafter; the heads start from scratch.
"""
import argparse
import json
import os

import torch

from common import ROOT, WORK
from dspark_torch import (DSparkDrafter, accepted, dspark_config, dspark_loss, dspark_outputs,
                          load_dspark)
from run_util import (Budget, Logger, add_run_args, autocast, elapsed, lr_at, resume, save_ckpt,
                      say)
from train_drafter import init_from, make_batch, read_responses, start_drafter_run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--target-layers", type=lambda s: [int(x) for x in s.split(",")],
                    help="target layers the drafter reads (default: --init's, else 1,3,5,6; "
                         "DeepSpec's evaluator and dscale refuse the target's last layer, 7)")
    ap.add_argument("--block", type=int, default=15,
                    help="draft rows per block (the verify block is one more: 16)")
    ap.add_argument("--markov-rank", type=int, default=128)
    ap.add_argument("--gamma", type=float, default=4.0, help="row weights exp(-j/gamma)")
    ap.add_argument("--alpha", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.1, 0.9, 1.0], help="weights of CE, L1 and confidence BCE")
    ap.add_argument("--seqs-per-batch", type=int, default=8)
    ap.add_argument("--anchors", type=int, default=16)
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"),
                    help="the frozen target: an exported folder or a training checkpoint")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--responses", default=os.path.join(WORK, "responses.jsonl"),
                    help="the target's answers: one file or a comma-separated list")
    ap.add_argument("--out", default=os.path.join(WORK, "dspark"))
    ap.add_argument("--init-backbone",
                    help="an exported DFlash drafter folder: its fc, hidden_norm, layers, norm")
    ap.add_argument("--init", help="an exported DSpark drafter folder: all its weights (a new "
                                   "schedule, to continue a finished run)")
    add_run_args(ap, seed=77, steps=2000, lr=1e-3)
    args = ap.parse_args()
    if args.target_layers is None:
        if args.init:
            with open(os.path.join(args.init, "config.json")) as f:
                args.target_layers = json.load(f)["target_layer_ids"]
        else:
            args.target_layers = [1, 3, 5, 6]
    device, rng, mask_id, pad, target = start_drafter_run(args)
    cfg = dspark_config(target.cfg, args, mask_id)
    drafter = DSparkDrafter(cfg).to(device)
    # DeepSpec trains without weight decay.
    opt = torch.optim.AdamW(drafter.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    step = 0
    if args.init_backbone and not args.resume:
        init_from(drafter, args.init_backbone, heads=("markov_head.", "confidence_head."))
    if args.init and not args.resume:
        drafter.load_state_dict(load_dspark(args.init, target)[0].state_dict())
        say(f"initialised from {args.init}")
    if args.resume:
        step = resume(ckpt_path, drafter, opt, args, rng, device)["step"]
    data = read_responses(args.responses)
    say(f"DSpark drafter {sum(p.numel() for p in drafter.parameters())/1e6:.2f}M parameters on "
        f"{device}; {len(data)} sequences; {args.seqs_per_batch} x {args.anchors} blocks of "
        f"{args.block} per step")
    cols = ["step", "loss", "ce", "l1", "conf_bce", "conf_mae", "acc_k1", "sim_accept_len",
            "lr", "seconds"]
    log = Logger(os.path.join(args.out, "loss.tsv"), cols, args.resume)
    budget = Budget(args, step)
    stats, order = torch.zeros(8), []

    def save():
        save_ckpt(ckpt_path, config=cfg, model=drafter.state_dict(), opt=opt.state_dict(),
                  step=step, steps=args.steps, rng=rng.getstate())

    while step < args.steps:
        if len(order) < args.seqs_per_batch:
            if step:  # each pass reads the answers again: generation may still be appending
                data = read_responses(args.responses)
            order = list(range(len(data)))
            rng.shuffle(order)
        ids, anchors, lengths = make_batch([data[order.pop()] for _ in range(args.seqs_per_batch)],
                                           args, rng, pad, mask_id, device)
        lr = lr_at(args, step, floor=0.05)
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast(device):
            logits, conf, labels, valid, tlogits = dspark_outputs(target, drafter, ids, anchors,
                                                                  lengths, mask_id)
            loss, terms, hit, accept = dspark_loss(logits, conf, labels, valid, tlogits,
                                                   args.gamma, args.alpha)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        budget.tick(step, say)
        with torch.no_grad():
            mae = ((torch.sigmoid(conf.float()) - accept).abs() * valid).sum() / valid.sum()
            stats += torch.tensor([loss.item(), terms["ce"].item(), terms["l1"].item(),
                                   terms["bce"].item(), mae.item(),
                                   hit[:, :, 0].float().mean().item(),
                                   accepted(hit).float().mean().item(), 1.0])
        if step % 25 == 0 or step == args.steps:
            m = (stats[:7] / stats[7]).tolist()
            say(f"step {step}/{args.steps} loss {m[0]:.4f} ce {m[1]:.3f} l1 {m[2]:.3f} "
                f"bce {m[3]:.4f} conf-mae {m[4]:.3f} acc@1 {m[5]:.3f} accept-len {m[6]:.2f} "
                f"(+1 bonus) lr {lr:.2e}")
            log.row(step, *(f"{x:.4f}" for x in m[:5]), f"{m[5]:.3f}", f"{m[6]:.2f}",
                    f"{lr:.2e}", f"{elapsed():.0f}")
            stats.zero_()
        if step % args.save_every == 0 or step == args.steps:
            save()
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
