"""Stage 1b: tokenises the target's training mixture once, into work/data/mixture.pt.

Sources (training splits and Debian-packaged code only; never GSM8K test, MATH-500, HumanEval
or MBPP tasks 11-510):
  chat        GSM8K train, --boxed of them in `dscale bench`'s format (the question, then
              "Please reason step by step, and put your final answer within \\boxed{}.", the
              answer's last line "#### N" written "The final answer is \\boxed{N}."), the rest
              as published; MBPP tasks 1-10, 511-974 twice, as the task text alone (`dscale
              bench`'s form) and followed by its tests; chat-formatted, loss on the answer;
  code_tasks  functions of the Python 3.11 standard library (Debian `libpython3.11-stdlib`,
              PSF licence): the user turn is the function's signature and docstring, as a
              HumanEval prompt is (half of them wrapped as `dscale bench` wraps HumanEval), and
              the answer is the function without its docstring;
  code_text   the same standard-library modules as plain text, in windows of --max-len tokens;
  chat_redrawn  with --redrawn N: up to N copies of each training (not validation) GSM8K
              question with its quantities redrawn and its solution recomputed
              (gsm8k_redraw.py), formatted as the chat source's GSM8K; train_target.py uses
              it when --mix names it.
A seeded share of GSM8K train and of the code tasks is held out as `val`. `prompts` lists the
training prompts the target later answers for the drafter (stage 3a): every chat and code-task
prompt, validation ones included (the drafter never sees test prompts either).

Each sequence is (ids, first_label): tokens before first_label carry no loss.
"""
import argparse
import ast
import os
import random
import textwrap
import time

import torch

from common import (CODE_PREFIX, CODE_SUFFIX, MATH_SUFFIX, ROOT, WORK, boxed_answer, chat_answer,
                    chat_prompt, gsm8k_train, mbpp_prompt, mbpp_train)
from gsm8k_redraw import redraw_problem
from tokenizer_bpe import Tokenizer

STDLIB = "/usr/lib/python3.11"
SKIP_DIRS = {"test", "tests", "idlelib", "lib2to3", "tkinter", "turtledemo", "ensurepip",
             "dist-packages", "site-packages", "pydoc_data", "encodings", "__pycache__",
             "config-3.11-x86_64-linux-gnu"}


def stdlib_files():
    out = []
    for root, dirs, files in os.walk(STDLIB):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith(".py") and os.path.getsize(path) < 300_000:
                out.append(path)
    return out


def function_tasks(source):
    """(prompt, answer) per function with a docstring: the prompt is the dedented source up to
    the end of the docstring, the answer the whole function with the docstring lines removed."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.split("\n")
    tasks = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
            continue
        doc = node.body[0] if node.body else None
        if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)) or len(node.body) < 2:
            continue
        start, end = node.lineno - 1, node.end_lineno
        if not 4 <= end - start <= 40 or len(doc.value.value.strip()) < 20:
            continue
        body = lines[start:end]
        d0, d1 = doc.lineno - 1 - start, doc.end_lineno - start
        prompt = textwrap.dedent("\n".join(body[:d1])) + "\n"
        answer = textwrap.dedent("\n".join(body[:d0] + body[d1:])).rstrip() + "\n"
        if "\t" not in prompt + answer:
            tasks.append((prompt, answer))
    return tasks


def code_windows(tok, source, max_len):
    """Consecutive line windows of at most max_len tokens."""
    out, cur = [], []
    for line in source.split("\n"):
        ids = tok.encode(line + "\n")
        if cur and len(cur) + len(ids) > max_len:
            out.append(cur)
            cur = []
        cur.extend(ids[:max_len])
    if len(cur) >= 32:
        out.append(cur)
    return out


def encode_chat(tok, pairs, max_len):
    seqs = []
    for q, a in pairs:
        p = tok.encode(chat_prompt(q))
        r = tok.encode(chat_answer(a))[:-1]  # drop the newline after <|im_end|>
        if len(p) < max_len - 8:
            seqs.append(((p + r)[:max_len], len(p)))
    return seqs


def redrawn_copies(pairs, copies, rng, tries=8):
    """Up to `copies` distinct redrawn (question, answer) pairs per GSM8K pair."""
    out = []
    for q, a in pairs:
        got = set()
        for _ in range(copies * tries):
            r = redraw_problem(q, a, rng)
            if r is not None and r[0] not in got:
                got.add(r[0])
                out.append(r)
                if len(got) == copies:
                    break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--val-gsm8k", type=int, default=256)
    ap.add_argument("--val-code", type=int, default=256)
    ap.add_argument("--boxed", type=float, default=0.7,
                    help="share of GSM8K questions in the benchmark's boxed format")
    ap.add_argument("--redrawn", type=int, default=0,
                    help="redrawn copies per training GSM8K question (source chat_redrawn)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(WORK, "data", "mixture.pt"))
    args = ap.parse_args()
    t0 = time.time()
    rng = random.Random(args.seed)
    tok = Tokenizer(args.tokenizer)
    gsm = gsm8k_train()
    rng.shuffle(gsm)
    # Drawn from their own generator, so --redrawn leaves every other source as it was.
    redrawn = redrawn_copies(gsm[args.val_gsm8k:], args.redrawn, random.Random(args.seed + 1))

    def as_chat(pairs):
        return [(q + MATH_SUFFIX, boxed_answer(a)) if rng.random() < args.boxed else (q, a)
                for q, a in pairs]

    gsm = as_chat(gsm)
    mbpp = [p for r, code in mbpp_train() for p in ((r["text"], code), (mbpp_prompt(r), code))]
    tasks, windows = [], []
    seen = set()
    for path in stdlib_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            src = f.read()
        for t in function_tasks(src):
            if t[0] not in seen:
                seen.add(t[0])
                tasks.append(t)
        windows.extend(code_windows(tok, src, args.max_len))
    rng.shuffle(tasks)
    tasks = [(CODE_PREFIX + p.rstrip("\n") + CODE_SUFFIX, a) if i % 2 else (p, a)
             for i, (p, a) in enumerate(tasks)]
    val = encode_chat(tok, gsm[:args.val_gsm8k] + tasks[:args.val_code], args.max_len)
    chat = encode_chat(tok, gsm[args.val_gsm8k:] + mbpp, args.max_len)
    code_tasks = encode_chat(tok, tasks[args.val_code:], args.max_len)
    code_text = [(w, 1) for w in windows]
    chat_redrawn = encode_chat(tok, as_chat(redrawn), args.max_len)
    prompts = [s[:plen] for s, plen in val + chat + code_tasks]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    torch.save({"chat": chat, "code_tasks": code_tasks, "code_text": code_text, "val": val,
                "chat_redrawn": chat_redrawn, "prompts": prompts, "max_len": args.max_len},
               args.out)
    for name, seqs in (("chat", chat), ("code_tasks", code_tasks), ("code_text", code_text),
                       ("chat_redrawn", chat_redrawn), ("val", val)):
        n = sum(len(s) for s, _ in seqs)
        lab = sum(len(s) - p for s, p in seqs)
        print(f"{name:10s} {len(seqs):6d} sequences {n/1e6:6.2f} M tokens {lab/1e6:6.2f} M labels")
    print(f"{len(prompts)} prompts for the target's answers; {time.time()-t0:.0f}s -> {args.out}")


if __name__ == "__main__":
    main()
