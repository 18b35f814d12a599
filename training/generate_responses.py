"""Stage 3a: the target answers the training prompts greedily (thinking disabled).

The prompts are prepare_data.py's (every training prompt, shuffled by --seed). On a CUDA
machine the PyTorch target answers in f32 with its weights rounded to BF16, as exported; on
the CPU the exported target (models/tiny-target, `python3 export.py target`) answers through
`dscale generate --spec none`, which is several times faster there. Both give the served
target's responses, up to float ties. Writes work/responses.jsonl with
{"ids": prompt+response ids, "prompt_len": n} per line.
"""
import argparse
import json
import os
import random
import subprocess

import torch

from common import ROOT, WORK
from qwen3_torch import Qwen3
from run_util import load, say, setup
from safetensors_io import load as load_safetensors
from tokenizer_bpe import Tokenizer


def load_target(path, device="cpu"):
    """The trained target with its weights rounded to BF16, as exported and served: from a
    training checkpoint (.pt) or an exported folder (config.json, model.safetensors)."""
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        weights = {k.removeprefix("model."): v
                   for k, v in load_safetensors(os.path.join(path, "model.safetensors")).items()}
    else:
        ck = load(path)
        config, weights = ck["config"], ck["model"]
    model = Qwen3(config)
    model.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in weights.items()})
    return model.to(device).eval()


@torch.no_grad()
def generate(model, prompts, max_new, stop_ids, pad):
    """Batched greedy decoding with a KV cache, in f32; prompts left-padded. Each output ends
    at its first stop token (included) or after max_new tokens."""
    dev = next(model.parameters()).device
    B = len(prompts)
    P = max(len(p) for p in prompts)
    ids = torch.full((B, P), pad, dtype=torch.long)
    valid = torch.zeros((B, P), dtype=torch.bool)
    for b, p in enumerate(prompts):
        ids[b, P - len(p):] = torch.tensor(p)
        valid[b, P - len(p):] = True
    ids, valid = ids.to(dev), valid.to(dev)
    pos = (valid.long().cumsum(1) - 1).clamp(min=0)
    caches = [[None, None] for _ in model.layers]
    causal = torch.full((P, P), float("-inf"), device=dev).triu(1)
    mask = causal[None, None] + torch.where(valid, 0.0, float("-inf"))[:, None, None, :]
    mask = mask.clamp(min=-1e30)
    h, _ = model(ids, positions=pos, mask=mask, caches=caches)
    nxt = model.lm_head(h[:, -1]).argmax(-1)
    stops = torch.tensor(sorted(stop_ids), device=dev)
    out = torch.full((B, max_new), -1, dtype=torch.long, device=dev)
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    cur_pos = pos[:, -1] + 1
    for t in range(max_new):
        out[:, t] = torch.where(done, -1, nxt)
        done |= torch.isin(nxt, stops)
        if t % 16 == 15 and bool(done.all()):
            break
        valid = torch.cat([valid, torch.ones((B, 1), dtype=torch.bool, device=dev)], 1)
        m = torch.where(valid, 0.0, -1e30)[:, None, None, :]
        h, _ = model(nxt[:, None], positions=cur_pos[:, None], mask=m, caches=caches)
        nxt = model.lm_head(h[:, -1]).argmax(-1)
        cur_pos = cur_pos + 1
    return [[int(x) for x in row if x >= 0] for row in out.tolist()]


def answer_with_dscale(args, prompts, stop):
    """Answers in chunks of --chunk prompts, appending to --out as each chunk finishes."""
    done = 0
    with open(args.out, "w") as f:
        for s in range(0, len(prompts), args.chunk):
            chunk = prompts[s:s + args.chunk]
            path = args.out + ".prompts.jsonl"
            with open(path, "w") as pf:
                for p in chunk:
                    pf.write(json.dumps({"ids": p}) + "\n")
            cmd = [args.dscale, "generate", "--target", args.exported,
                   "--spec", "none", "--prompts", path, "--max-tokens", str(args.max_new),
                   "--concurrency", str(args.batch), "--json"]
            out = json.loads(subprocess.check_output(cmd))
            # Results come back in submission order (request ids 1..n).
            for p, r in zip(chunk, out["requests"]):
                o = list(r["output_ids"])
                if r["finish_reason"] == "stop" and (not o or o[-1] not in stop):
                    o.append(min(stop))
                f.write(json.dumps({"ids": p + o, "prompt_len": len(p)}) + "\n")
            f.flush()
            done += len(chunk)
            print(f"{done}/{len(prompts)} answers, {out['stats']['output_tokens']} tokens in the "
                  f"last chunk, {out['stats']['seconds']:.0f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num", type=int, default=0, help="training prompts to answer (0: all)")
    ap.add_argument("--max-new", type=int, default=384)
    ap.add_argument("--batch", type=int, default=64,
                    help="concurrency of dscale, or prompts per PyTorch batch")
    ap.add_argument("--target", default=os.path.join(WORK, "target", "chosen.pt"))
    ap.add_argument("--data", default=os.path.join(WORK, "data", "mixture.pt"))
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--shard", default="0/1", help="i/n: answer every n-th prompt from i")
    ap.add_argument("--out", default=os.path.join(WORK, "responses.jsonl"))
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--engine", choices=["auto", "dscale", "torch"], default="auto",
                    help="auto: PyTorch on CUDA when present, else dscale on the CPU")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--exported", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--dscale", default=os.environ.get("DSCALE_BIN",
                                                       os.path.join(ROOT, "build", "dscale")),
                    help="the dscale binary (a copy, when build/ is rebuilt meanwhile; "
                         "default $DSCALE_BIN or build/dscale)")
    args = ap.parse_args()
    device = setup(args)
    torch.backends.cuda.matmul.allow_tf32 = False  # the served model computes in f32
    tok = Tokenizer(args.exported)
    prompts = list(load(args.data)["prompts"])
    random.Random(args.seed).shuffle(prompts)
    if args.num:
        prompts = prompts[:args.num]
    si, sn = map(int, args.shard.split("/"))
    prompts = prompts[si::sn]
    stop = {tok.added["<|im_end|>"], tok.added["<|endoftext|>"]}
    if args.engine == "dscale" or (args.engine == "auto" and device.type != "cuda"):
        answer_with_dscale(args, prompts, stop)
        return
    model = load_target(args.target, device)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    with open(args.out, "w") as f:
        for s in range(0, len(order), args.batch):
            chunk = [prompts[i] for i in order[s:s + args.batch]]
            outs = generate(model, chunk, args.max_new, stop, tok.added["<|endoftext|>"])
            for p, o in zip(chunk, outs):
                f.write(json.dumps({"ids": p + o, "prompt_len": len(p)}) + "\n")
            f.flush()
            say(f"{min(s + args.batch, len(order))}/{len(order)} answers")


if __name__ == "__main__":
    main()
