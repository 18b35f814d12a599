"""Stage 2b: greedy answers of target checkpoints on held-out prompts; picks one for the drafter.

For each checkpoint: the share of answers that loop (an 8-token sequence three or more times)
and, for GSM8K, that end with a final answer, on the validation prompts prepare_data.py held out
of GSM8K train and of the code tasks (never test prompts). The checkpoint with the highest
answers-minus-loops score is copied to --chosen. With --test N it also reports the chosen one on
the first N test prompts of each benchmark (measurement only).
"""
import argparse
import os
import shutil

import torch

from common import ROOT, WORK, bench_prompts, chat_prompt
from generate_responses import generate, load_target
from quality import has_final_answer, loops
from run_util import load, say, setup
from tokenizer_bpe import Tokenizer


def rates(model, tok, prompts, max_new, batch):
    stop = {tok.added["<|im_end|>"], tok.added["<|endoftext|>"]}
    outs = []
    for s in range(0, len(prompts), batch):
        outs += generate(model, prompts[s:s + batch], max_new, stop, tok.added["<|endoftext|>"])
    loop = sum(loops(o) for o in outs) / len(outs)
    final = sum(has_final_answer(tok.decode(o)) for o in outs) / len(outs)
    return loop, final, tok.decode(outs[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpts", nargs="+", default=[os.path.join(WORK, "target", "best.pt"),
                                                   os.path.join(WORK, "target", "ckpt.pt")])
    ap.add_argument("--chosen", default=os.path.join(WORK, "target", "chosen.pt"))
    ap.add_argument("--data", default=os.path.join(WORK, "data", "mixture.pt"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--test", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    setup(args)
    torch.backends.cuda.matmul.allow_tf32 = False
    tok = Tokenizer(args.tokenizer)
    val = load(args.data)["val"]
    gsm = [s[:p] for s, p in val[:len(val) // 2]]
    code = [s[:p] for s, p in val[len(val) // 2:]]
    best, best_score = None, None
    for path in args.ckpts:
        if not os.path.exists(path):
            continue
        model = load_target(path, args.device)
        g_loop, g_final, sample = rates(model, tok, gsm, args.max_new, args.batch)
        c_loop, _, _ = rates(model, tok, code, args.max_new, args.batch)
        score = g_final - g_loop - c_loop
        say(f"{path} (step {load(path)['step']}): GSM8K val loops {100*g_loop:.1f}% final answer "
            f"{100*g_final:.1f}%, code val loops {100*c_loop:.1f}%, score {score:.3f}\n{sample}")
        if best_score is None or score > best_score:
            best, best_score = path, score
    shutil.copy(best, args.chosen)
    say(f"chosen: {best} -> {args.chosen}")
    if args.test:
        model = load_target(args.chosen, args.device)
        for name in ("gsm8k", "math500", "humaneval", "mbpp"):
            prompts = [tok.encode(chat_prompt(p)) for p in bench_prompts(name, args.test)]
            loop, final, sample = rates(model, tok, prompts, args.max_new, args.batch)
            say(f"test {name} n={len(prompts)}: loops {100*loop:.1f}% final answer "
                f"{100*final:.1f}%\n{sample}")


if __name__ == "__main__":
    main()
