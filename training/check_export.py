"""Checks the exported pair against dscale: target logits and one drafting step.

  python3 check_export.py --ids 1,2,3   (needs build/dscale)
"""
import argparse
import json
import os
import subprocess

import torch

from common import ROOT, WORK
from generate_responses import load_target
from qwen3_torch import DFlashDrafter
from run_util import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", default="4097,349,264,198,39,299,340,2303,309,610,1636,12")
    ap.add_argument("--target-ckpt", default=os.path.join(WORK, "target", "chosen.pt"))
    ap.add_argument("--drafter-ckpt", default=os.path.join(WORK, "drafter", "ckpt.pt"))
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--drafter", default=os.path.join(ROOT, "models", "tiny-dflash"))
    a = ap.parse_args()
    dscale = os.path.join(ROOT, "build", "dscale")
    ids = [int(x) for x in a.ids.split(",")]
    target = load_target(a.target_ckpt)
    out = json.loads(subprocess.check_output([dscale, "logits", "--model", a.target, "--ids", a.ids,
                                              "--kv-dtype", "f32"]))
    with torch.no_grad():
        h, _ = target(torch.tensor([ids]))
        logits = target.lm_head(h)[0]
    c = torch.tensor(out["logits"])
    print(f"target logits: max |diff| {(logits - c).abs().max().item():.2e}")
    if not os.path.exists(a.drafter_ckpt):
        return
    ck = load(a.drafter_ckpt)
    dr = DFlashDrafter(ck["config"], ck["config"]["dflash_config"]["target_layer_ids"])
    dr.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in ck["model"].items()})
    out = json.loads(subprocess.check_output([dscale, "draft", "--target", a.target, "--drafter",
                                              a.drafter, "--ids", a.ids, "--kv-dtype", "f32"]))
    n, Bk = len(ids), ck["config"]["block_size"]
    mask_id = ck["config"]["dflash_config"]["mask_token_id"]
    with torch.no_grad():
        h, feats = target(torch.tensor([ids]), capture=set(dr.target_layer_ids))
        bonus = int(target.lm_head(h[0, -1]).argmax())
        ctx = torch.cat([feats[i] for i in dr.target_layer_ids], -1)
        blk = torch.tensor([[bonus] + [mask_id] * (Bk - 1)])
        o = dr(ctx, torch.arange(n)[None], target.embed_tokens(blk), torch.arange(n, n + Bk)[None], None)
        dl = target.lm_head(o[0, 1:])
    c = torch.tensor(out["draft_logits"])
    print(f"bonus {bonus} vs {out['bonus']}; draft logits max |diff| {(dl - c).abs().max().item():.2e}; "
          f"draft tokens equal: {dl.argmax(-1).tolist() == out['draft']}")


if __name__ == "__main__":
    main()
