"""Exports trained checkpoints in the Hugging Face layouts dscale loads.

  python3 export.py target  -> models/tiny-target (config, BF16 safetensors, tokenizer files)
  python3 export.py drafter -> models/tiny-dflash (config, BF16 safetensors)
  python3 export.py domino  -> models/tiny-dflash/domino_head.safetensors (BF16) and the
                               "domino_config" entry of its config.json (docs/DOMINO.md)
  python3 export.py dspark  -> models/tiny-dspark (DeepSpec's Qwen3DSparkModel layout: config,
                               BF16 safetensors with copies of the target's embed_tokens and
                               lm_head, as DeepSpec saves them)
"""
import argparse
import json
import os
import shutil

import torch

from common import ROOT, WORK
from run_util import load as load_ckpt
from safetensors_io import save

TEMPLATE = os.path.join(ROOT, "tests", "data", "tokenizer", "qwen3", "chat_template.jinja")


def bf16(sd):
    return {k: v.detach().to(torch.bfloat16) for k, v in sd.items()}


def export_target(ckpt, out, tokenizer):
    ck = load_ckpt(ckpt)
    cfg = dict(ck["config"])
    eos = cfg["eos_token_id"]
    cfg["eos_token_id"] = [eos, cfg["bos_token_id"]]  # <|im_end|>, <|endoftext|>
    os.makedirs(out, exist_ok=True)
    tensors = {}
    for k, v in bf16(ck["model"]).items():
        tensors[k if k.startswith("lm_head") else "model." + k] = v
    save(os.path.join(out, "model.safetensors"), tensors, {"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
                   "pad_token_id": cfg["bos_token_id"], "do_sample": False}, f, indent=2)
    tok = tokenizer
    for name in ("vocab.json", "merges.txt", "added_tokens.json"):
        if not os.path.exists(os.path.join(out, name)) or \
                not os.path.samefile(os.path.join(tok, name), os.path.join(out, name)):
            shutil.copy(os.path.join(tok, name), os.path.join(out, name))
    with open(os.path.join(tok, "tokenizer_config.json")) as f:
        tcfg = json.load(f)
    with open(TEMPLATE) as f:
        tcfg["chat_template"] = f.read()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, ensure_ascii=False, indent=2)
    print(f"target -> {out}")


def export_drafter(ckpt, out):
    ck = load_ckpt(ckpt)
    cfg = ck["config"]
    os.makedirs(out, exist_ok=True)
    save(os.path.join(out, "model.safetensors"), bf16(ck["model"]), {"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    print(f"drafter -> {out}")


def export_dspark(ckpt, out, target):
    from generate_responses import load_target
    ck = load_ckpt(ckpt)
    tm = load_target(target)
    tensors = dict(ck["model"])
    tensors["embed_tokens.weight"] = tm.embed_tokens.weight
    tensors["lm_head.weight"] = tm.lm_head.weight
    os.makedirs(out, exist_ok=True)
    save(os.path.join(out, "model.safetensors"), bf16(tensors), {"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(ck["config"], f, indent=2)
    print(f"DSpark drafter -> {out} (step {ck['step']} of {ck['steps']})")


DOMINO_HEAD_FILE = "domino_head.safetensors"


def export_domino(ckpt, out):
    ck = load_ckpt(ckpt)
    cfg = ck["config"]
    save(os.path.join(out, DOMINO_HEAD_FILE), bf16(ck["model"]), {"format": "pt"})
    path = os.path.join(out, "config.json")
    with open(path) as f:
        dcfg = json.load(f)
    dcfg["domino_config"] = {"head_file": DOMINO_HEAD_FILE,
                             "gru_hidden_size": cfg["gru_hidden_size"],
                             "bottleneck_size": cfg["bottleneck_size"]}
    with open(path, "w") as f:
        json.dump(dcfg, f, indent=2)
    print(f"domino head -> {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("which", choices=["target", "drafter", "domino", "dspark"])
    ap.add_argument("--ckpt")
    ap.add_argument("--out")
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"),
                    help="dspark: the target whose embed_tokens and lm_head the folder copies")
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"),
                    help="folder of the tokenizer files the target ships (work/tokenizer after "
                         "stage 1)")
    a = ap.parse_args()
    if a.which == "target":
        export_target(a.ckpt or os.path.join(WORK, "target", "chosen.pt"),
                      a.out or os.path.join(ROOT, "models", "tiny-target"), a.tokenizer)
    elif a.which == "dspark":
        export_dspark(a.ckpt or os.path.join(WORK, "dspark", "ckpt.pt"),
                      a.out or os.path.join(ROOT, "models", "tiny-dspark"), a.target)
    elif a.which == "domino":
        export_domino(a.ckpt or os.path.join(WORK, "domino", "ckpt.pt"),
                      a.out or os.path.join(ROOT, "models", "tiny-dflash"))
    else:
        export_drafter(a.ckpt or os.path.join(WORK, "drafter", "ckpt.pt"),
                       a.out or os.path.join(ROOT, "models", "tiny-dflash"))


if __name__ == "__main__":
    main()
