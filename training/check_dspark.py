"""Checks an exported DSpark drafter (export.py dspark) against its training checkpoint, and
against `dscale draft` where that loads DSpark drafters.

  python3 check_dspark.py [--answers 32] [--dscale ../build/dscale]

1. The folder's tensors are the checkpoint's rounded to BF16, its embed_tokens / lm_head the
   target's, and it gives the checkpoint's teacher-forced accepted length (rounded to BF16) on
   the first --answers target answers of --responses, block by block.
2. Teacher forcing is decoding: on those answers, the greedy block drafted sequentially through
   the Markov head (draft_greedy) agrees with the teacher-forced count at every anchor.
3. When `dscale draft --help` mentions DSpark: one drafting step after each of --prompts prompts
   (the bonus token, the drafts, their logits and the confidences) against PyTorch, with an f32
   KV cache and f32 activations. dscale, as DeepSpec's evaluator, refuses a drafter that reads
   the target's last layer (transformers' hidden_states there is the final-normed state).
"""
import argparse
import json
import os
import subprocess

import torch

from common import ROOT, WORK
from dspark_torch import DSparkDrafter, accepted, draft_greedy, dspark_outputs, load_dspark
from generate_responses import load_target
from run_util import load
from train_drafter import read_responses, run_blocks


@torch.no_grad()
def every_anchor(target, drafter, ids, prompt_len, mask_id):
    t = torch.tensor([ids])
    anchors = torch.arange(prompt_len, len(ids) - 1)[None]
    logits, _, labels, valid, _ = dspark_outputs(target, drafter, t, anchors,
                                                 torch.tensor([len(ids)]), mask_id)
    return accepted((logits.argmax(-1) == labels) & valid)[0]


@torch.no_grad()
def one_step(target, drafter, cfg, ids):
    """Prefill ids, the target's bonus token, then the drafter's greedy block after it."""
    h, feats = target(torch.tensor([ids]), capture=set(cfg["target_layer_ids"]))
    bonus = int(target.lm_head(h[0, -1]).argmax())
    seq = torch.tensor([ids + [bonus]])
    out, _, _ = run_blocks(target, drafter, seq, torch.tensor([[len(ids)]]), cfg["block_size"],
                           cfg["target_layer_ids"], cfg["mask_token_id"])
    toks, logits, conf = draft_greedy(drafter, target.lm_head, out[0, 0], bonus)
    return bonus, toks, logits, conf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(WORK, "dspark", "ckpt.pt"))
    ap.add_argument("--drafter", default=os.path.join(ROOT, "models", "tiny-dspark"))
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--responses", default=os.path.join(WORK, "responses.jsonl"))
    ap.add_argument("--answers", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--dscale", default=os.path.join(ROOT, "build", "dscale"))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    target = load_target(a.target)
    exported, cfg = load_dspark(a.drafter, target)
    ck = load(a.ckpt)
    trained = DSparkDrafter(ck["config"])
    trained.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in ck["model"].items()})
    trained.eval()
    same = all(torch.equal(v, exported.state_dict()[k]) for k, v in trained.state_dict().items())
    print(f"tensors: checkpoint (BF16) == export: {same}; config equal: {ck['config'] == cfg}")
    data = read_responses(a.responses)[:a.answers]
    n_tf, n_ck, agree, sampled, blocks = 0, 0, 0, 0, 0
    for d in data:
        acc_e = every_anchor(target, exported, d["ids"], d["prompt_len"], cfg["mask_token_id"])
        acc_c = every_anchor(target, trained, d["ids"], d["prompt_len"], cfg["mask_token_id"])
        n_tf += int(acc_e.sum())
        n_ck += int(acc_c.sum())
        blocks += len(acc_e)
        # Sequential greedy drafting at a few anchors of each answer.
        for i in range(0, len(acc_e), max(1, len(acc_e) // 4)):
            a_pos = d["prompt_len"] + i
            toks, _, _ = draft_at(target, exported, cfg, d["ids"], a_pos)
            truth = d["ids"][a_pos + 1:a_pos + 1 + cfg["block_size"]]
            run = 0
            while run < len(truth) and toks[run] == truth[run]:
                run += 1
            agree += int(run == int(acc_e[i]))
            sampled += 1
    print(f"teacher-forced accepted length over {blocks} anchors of {len(data)} answers: "
          f"export {n_tf / blocks:.4f}, checkpoint {n_ck / blocks:.4f}")
    print(f"sequential greedy drafts agree with teacher forcing at {agree} of {sampled} "
          "sampled anchors")
    help_text = ""
    if os.path.exists(a.dscale):
        help_text = subprocess.run([a.dscale, "draft", "--help"], capture_output=True,
                                   text=True).stdout
    if "dspark" not in help_text.lower():
        print(f"{a.dscale} draft does not load DSpark drafters yet: the comparison with dscale "
              "remains")
        return
    for d in data[:a.prompts]:
        ids = d["ids"][:d["prompt_len"]]
        bonus, toks, logits, conf = one_step(target, exported, cfg, ids)
        out = json.loads(subprocess.check_output(
            [a.dscale, "draft", "--target", a.target, "--drafter", a.drafter,
             "--ids", ",".join(map(str, ids)), "--kv-dtype", "f32", "--activations", "f32"],
            env=dict(os.environ, OMP_NUM_THREADS="1"), stderr=subprocess.DEVNULL))
        msg = f"bonus {bonus} vs {out.get('bonus')}; drafts equal: {toks == out.get('draft')}"
        if "draft_logits" in out:
            c = torch.tensor(out["draft_logits"])
            msg += f"; draft logits max |diff| {(logits - c[:len(logits)]).abs().max().item():.2e}"
        if out.get("confidence"):  # dscale gives the confidence logits
            c = torch.sigmoid(torch.tensor(out["confidence"], dtype=torch.float32))
            diff = (c[:len(conf)] - torch.tensor(conf)).abs().max().item()
            msg += f"; confidence (sigmoid) max |diff| {diff:.2e}"
        print(msg)


@torch.no_grad()
def draft_at(target, drafter, cfg, ids, a_pos):
    """The greedy block anchored at a_pos of ids (the context ids[:a_pos], the anchor ids[a_pos])."""
    seq = torch.tensor([ids[:a_pos + 1]])
    out, _, _ = run_blocks(target, drafter, seq, torch.tensor([[a_pos]]), cfg["block_size"],
                           cfg["target_layer_ids"], cfg["mask_token_id"])
    toks, logits, conf = draft_greedy(drafter, target.lm_head, out[0, 0], ids[a_pos])
    return toks, logits, conf


if __name__ == "__main__":
    main()
