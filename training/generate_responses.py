"""Stage 3a: the target answers the training prompts greedily (thinking disabled).

By default the exported target (models/tiny-target, `python3 export.py target`) answers
through `dscale generate --spec none` (several times faster than PyTorch here); with
--engine torch the PyTorch model answers with its weights rounded to BF16, as exported, so
both give the served target's responses. Writes work/responses.jsonl with
{"ids": prompt+response ids, "prompt_len": n} per line.
"""
import argparse
import json
import os
import random
import subprocess

import torch

from common import ROOT, WORK, chat_prompt, train_pairs
from qwen3_torch import Qwen3
from tokenizer_bpe import Tokenizer


def load_target(path):
    ck = torch.load(path)
    model = Qwen3(ck["config"])
    model.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in ck["model"].items()})
    model.eval()
    return model


@torch.no_grad()
def generate(model, prompts, max_new, stop_ids, pad):
    """Batched greedy decoding with a KV cache; prompts left-padded."""
    B = len(prompts)
    P = max(len(p) for p in prompts)
    ids = torch.full((B, P), pad, dtype=torch.long)
    valid = torch.zeros((B, P), dtype=torch.bool)
    for b, p in enumerate(prompts):
        ids[b, P - len(p):] = torch.tensor(p)
        valid[b, P - len(p):] = True
    pos = (valid.long().cumsum(1) - 1).clamp(min=0)
    caches = [[None, None] for _ in model.layers]
    causal = torch.full((P, P), float("-inf")).triu(1)
    mask = causal[None, None] + torch.where(valid, 0.0, float("-inf"))[:, None, None, :]
    mask = mask.clamp(min=-1e30)
    h, _ = model(ids, positions=pos, mask=mask, caches=caches)
    nxt = model.lm_head(h[:, -1]).argmax(-1)
    outs = [[] for _ in range(B)]
    done = torch.zeros(B, dtype=torch.bool)
    cur_pos = pos[:, -1] + 1
    for _ in range(max_new):
        for b in range(B):
            if not done[b]:
                outs[b].append(int(nxt[b]))
                if int(nxt[b]) in stop_ids:
                    done[b] = True
        if done.all():
            break
        valid = torch.cat([valid, torch.ones((B, 1), dtype=torch.bool)], 1)
        m = torch.where(valid, 0.0, -1e30)[:, None, None, :]
        h, _ = model(nxt[:, None], positions=cur_pos[:, None], mask=m, caches=caches)
        nxt = model.lm_head(h[:, -1]).argmax(-1)
        cur_pos = cur_pos + 1
    return outs


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
            cmd = [os.path.join(ROOT, "build", "dscale"), "generate", "--target", args.exported,
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
    ap.add_argument("--num", type=int, default=3000, help="training prompts to answer")
    ap.add_argument("--max-new", type=int, default=320)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--target", default=os.path.join(WORK, "target", "ckpt.pt"))
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shard", default="0/1", help="i/n: answer every n-th prompt from i")
    ap.add_argument("--out", default=os.path.join(WORK, "responses.jsonl"))
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--engine", choices=["dscale", "torch"], default="dscale")
    ap.add_argument("--exported", default=os.path.join(ROOT, "models", "tiny-target"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    tok = Tokenizer(os.path.join(WORK, "tokenizer"))
    pairs = train_pairs()
    random.Random(args.seed).shuffle(pairs)
    si, sn = map(int, args.shard.split("/"))
    prompts = [tok.encode(chat_prompt(q)) for q, _ in pairs[:args.num]][si::sn]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    stop = {tok.added["<|im_end|>"], tok.added["<|endoftext|>"]}
    if args.engine == "dscale":
        answer_with_dscale(args, prompts, stop)
        return
    model = load_target(args.target)
    with open(args.out, "w") as f:
        for s in range(0, len(order), args.batch):
            chunk = [prompts[i] for i in order[s:s + args.batch]]
            outs = generate(model, chunk, args.max_new, stop, tok.added["<|endoftext|>"])
            for p, o in zip(chunk, outs):
                f.write(json.dumps({"ids": p + o, "prompt_len": len(p)}) + "\n")
            f.flush()
            print(f"{min(s + args.batch, len(order))}/{len(order)}", flush=True)


if __name__ == "__main__":
    main()
