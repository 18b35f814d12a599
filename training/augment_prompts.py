"""Stage 3a': more training prompts for the drafter, into work/data/extra_prompts.pt.

The drafter learns the target's own greedy answers, so every new prompt whose answer differs
is new data; the target itself is not retrained on these. Sources (training splits and
Debian-packaged code only, as in prepare_data.py):
  GSM8K train questions with their numbers redrawn (--variants per question, each number
              replaced by a random one of the same digit count and format), in `dscale bench`'s
              boxed format: the same reasoning, different arithmetic;
  standard-library function tasks in whichever of the two user-turn forms (bare, or wrapped
              as `dscale bench` wraps HumanEval) the mixture did not use;
  function tasks from other Debian-packaged Python code (--code-dirs, in both forms; `tests`
              folders skipped), e.g. python3-numpy, python3-sympy, python3-mpmath (BSD).
Prompts already in work/data/mixture.pt, or in the files named by --exclude, are dropped. The
output has the mixture's "prompts" layout, so `generate_responses.py --data
work/data/extra_prompts.pt` answers it.
"""
import argparse
import os
import random
import re
import time

import torch

from common import CODE_PREFIX, CODE_SUFFIX, MATH_SUFFIX, ROOT, WORK, chat_prompt, gsm8k_train
from prepare_data import function_tasks, stdlib_files
from run_util import load
from tokenizer_bpe import Tokenizer

NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?")


def redraw_number(text, rng):
    """A random number written like `text`: same digit count, commas and decimals."""
    whole, _, frac = text.replace(",", "").partition(".")
    d = len(whole)
    lo = 2 if d == 1 else 10 ** (d - 1)
    n = rng.randint(lo, 10 ** d - 1)
    out = f"{n:,}" if "," in text else str(n)
    if frac:
        out += "." + "".join(str(rng.randint(0, 9)) for _ in frac)
    return out


def redraw_numbers(question, rng):
    return NUMBER.sub(lambda m: redraw_number(m.group(0), rng), question)


def package_files(dirs):
    """The .py files under each comma-separated folder, sorted, without test folders."""
    out = []
    for top in filter(None, dirs.split(",")):
        for root, sub, files in os.walk(top):
            sub[:] = sorted(d for d in sub if d not in ("tests", "test", "testing"))
            out += [os.path.join(root, f) for f in sorted(files)
                    if f.endswith(".py") and os.path.getsize(os.path.join(root, f)) < 300_000]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--mixture", default=os.path.join(WORK, "data", "mixture.pt"))
    ap.add_argument("--variants", type=int, default=2, help="redrawn copies per GSM8K question")
    ap.add_argument("--max-len", type=int, default=512, help="longest prompt kept, in tokens")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--code-dirs", default="",
                    help="comma-separated folders of Python sources for more function tasks")
    ap.add_argument("--no-stdlib", action="store_true", help="leave out the stdlib's tasks")
    ap.add_argument("--exclude", default="",
                    help="comma-separated prompt files (this script's outputs) to leave out")
    ap.add_argument("--out", default=os.path.join(WORK, "data", "extra_prompts.pt"))
    args = ap.parse_args()
    t0 = time.time()
    rng = random.Random(args.seed)
    tok = Tokenizer(args.tokenizer)
    seen = {tuple(p) for p in load(args.mixture)["prompts"]}
    for path in filter(None, args.exclude.split(",")):
        seen |= {tuple(p) for p in load(path)["prompts"]}
    users = [redraw_numbers(q, rng) + MATH_SUFFIX
             for q, _ in gsm8k_train() for _ in range(args.variants)]
    n_math = len(users)
    for path in ([] if args.no_stdlib else stdlib_files()) + package_files(args.code_dirs):
        with open(path, encoding="utf-8", errors="replace") as f:
            for prompt, _ in function_tasks(f.read()):
                users += [prompt, CODE_PREFIX + prompt.rstrip("\n") + CODE_SUFFIX]
    prompts, kept_math = [], 0
    for i, user in enumerate(users):
        ids = tok.encode(chat_prompt(user))
        if len(ids) <= args.max_len and tuple(ids) not in seen:
            seen.add(tuple(ids))
            prompts.append(ids)
            kept_math += i < n_math
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    torch.save({"prompts": prompts}, args.out)
    print(f"{len(prompts)} new prompts ({kept_math} GSM8K redrawn, {len(prompts) - kept_math} "
          f"code tasks); {time.time() - t0:.0f}s -> {args.out}")


if __name__ == "__main__":
    main()
