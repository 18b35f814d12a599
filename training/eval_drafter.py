"""Measures an exported drafter's τ in PyTorch, as decoding would see it, without `dscale`.

  python3 eval_drafter.py --drafter ../models/tiny-dflash --datasets gsm8k:64,humaneval:32

The target (an exported folder) answers the first N test prompts of each benchmark greedily;
the drafter then drafts a block at every position of each answer with the answer itself as
the context (teacher forcing), and the accepted drafts of each block are counted. Two figures:
  walk τ   the blocks decoding would draft — the first anchored at the answer's first token,
           each next one right after the last block's accepted drafts and bonus token —
           committed tokens per block (bonus included): what `bench_acceptance.py` measures
           through `dscale`, up to float ties;
  mean     accepted drafts per block over every anchor (bonus not included), the figure
           `train_drafter.py` logs as accept-len on training answers. It runs above walk τ − 1:
           decoding anchors its blocks right after a rejection, where drafting is hardest.
On a GPU it compares drafter checkpoints where `dscale` is not built. --drafter takes several
folders, comma-separated, DFlash (DFlashDraftModel) or DSpark (Qwen3DSparkModel, dspark_torch.py):
each is measured on the same answers. A DSpark block anchored at a answer position drafts the
tokens at a+1 .. a+15 as DFlash's does (its rows are one fewer: the anchor's own row is its
first draft), so the two figures compare like for like; for DSpark the confidence head's mean
|predicted − soft acceptance| over the rows of every block is printed too.
"""
import argparse
import json
import os
import statistics
import types

import torch

from common import ROOT, bench_prompts, chat_prompt
from dspark_torch import ARCH as DSPARK, accepted, dspark_outputs, load_dspark
from generate_responses import generate, load_target
from qwen3_torch import DFlashDrafter
from run_util import say, setup
from tokenizer_bpe import Tokenizer
from train_drafter import draft_blocks, init_from


def load_drafter(folder, device, target=None):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    if cfg["architectures"] == [DSPARK]:
        return load_dspark(folder, target, device)
    drafter = DFlashDrafter(cfg, cfg["dflash_config"]["target_layer_ids"])
    init_from(drafter, folder)
    return drafter.to(device).eval(), cfg


@torch.no_grad()
def accepted_at_every_anchor(target, drafter, cfg, ids, prompt_len):
    """Accepted drafts of the block anchored at each answer position prompt_len..len-2 (and,
    for a DSpark drafter, the confidence head's summed |error| and its row count)."""
    dev = next(target.parameters()).device
    if cfg["architectures"] == [DSPARK]:
        t = torch.tensor([ids], device=dev)
        anchors = torch.arange(prompt_len, len(ids) - 1, device=dev)[None]
        logits, conf, labels, valid, tlogits = dspark_outputs(
            target, drafter, t, anchors, torch.tensor([len(ids)], device=dev),
            cfg["mask_token_id"])
        hits = (logits.argmax(-1) == labels) & valid
        soft = (1 - 0.5 * (logits.softmax(-1) - tlogits.softmax(-1)).abs().sum(-1)).clamp(0, 1)
        err = ((conf.sigmoid() - soft).abs() * valid).sum()
        return accepted(hits)[0].tolist(), (float(err), int(valid.sum()))
    args = types.SimpleNamespace(block=cfg["block_size"],
                                 target_layers=cfg["dflash_config"]["target_layer_ids"])
    dev = next(target.parameters()).device
    t = torch.tensor([ids], device=dev)
    anchors = torch.arange(prompt_len, len(ids) - 1, device=dev)[None]
    out, labels, valid, _ = draft_blocks(target, drafter, t, anchors,
                                         torch.tensor([len(ids)], device=dev), args,
                                         cfg["dflash_config"]["mask_token_id"])
    hits = (target.lm_head(out).argmax(-1) == labels) & valid
    return hits.long().cumprod(-1).sum(-1)[0].tolist(), None


def walk(accepted):
    """Accepted drafts of the blocks decoding drafts: anchors 0, then a + 1 past each."""
    steps, p = [], 0
    while p < len(accepted):
        steps.append(accepted[p])
        p += accepted[p] + 1
    return steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drafter", default=os.path.join(ROOT, "models", "tiny-dflash"),
                    help="drafter folders, comma-separated, measured on the same answers")
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--datasets", default="gsm8k:64,math500:32,humaneval:32,mbpp:32")
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    device = setup(args)
    torch.backends.cuda.matmul.allow_tf32 = False  # the served models compute in f32
    tok = Tokenizer(args.target)
    stop = {tok.added["<|im_end|>"], tok.added["<|endoftext|>"]}
    target = load_target(args.target, device)
    drafters = [(f,) + load_drafter(f, device, target) for f in args.drafter.split(",")]
    for spec in args.datasets.split(","):
        name, n = spec.split(":")
        prompts = [tok.encode(chat_prompt(p)) for p in bench_prompts(name, int(n))]
        answers = []
        for s in range(0, len(prompts), args.batch):
            chunk = prompts[s:s + args.batch]
            answers += [(p, a) for p, a in zip(chunk, generate(target, chunk, args.max_new, stop,
                                                                tok.added["<|endoftext|>"]))
                        if len(a) >= 2]
        for folder, drafter, cfg in drafters:
            steps, every, err = [], [], [0.0, 0]
            for p, answer in answers:
                acc, conf = accepted_at_every_anchor(target, drafter, cfg, p + answer, len(p))
                steps += walk(acc)
                every += acc
                if conf:
                    err = [err[0] + conf[0], err[1] + conf[1]]
            extra = f"  confidence |error| {err[0] / err[1]:.3f}" if err[1] else ""
            say(f"{name:10s} n={len(prompts):4d} walk tau {statistics.mean(steps) + 1:.2f} "
                f"({len(steps)} blocks)  mean accepted over every anchor "
                f"{statistics.mean(every):.2f}{extra}  [{os.path.basename(folder.rstrip('/'))}]")


if __name__ == "__main__":
    main()
