"""Shared data helpers: dataset splits, prompt formats and the Qwen3 chat format."""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
WORK = os.environ.get("DSCALE_TRAIN_WORK", os.path.join(ROOT, "training", "work"))

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|MASK|>"]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def mbpp_prompt(rec):
    return rec["text"] + "\nYour code should pass these tests:\n" + "\n".join(rec["test_list"])


def boxed_answer(answer):
    """A GSM8K answer whose last line '#### N' becomes 'The final answer is \\boxed{N}.'"""
    body, _, final = answer.rpartition("####")
    return body.rstrip() + "\nThe final answer is \\boxed{" + final.strip() + "}."


def gsm8k_train():
    return [(r["question"], r["answer"])
            for r in read_jsonl(os.path.join(DATA, "gsm8k", "train.jsonl"))]


def mbpp_train():
    """MBPP tasks 1-10 (few-shot) and 511-974 (train/validation): (record, code)."""
    return [(r, r["code"].replace("\r\n", "\n"))
            for r in read_jsonl(os.path.join(DATA, "mbpp", "mbpp.jsonl"))
            if int(r["task_id"]) <= 10 or int(r["task_id"]) >= 511]


def train_pairs():
    """(prompt, answer) pairs from the training splits only: GSM8K train and MBPP tasks
    1-10 (few-shot) and 511-974 (train/validation). Test prompts are never used."""
    return gsm8k_train() + [(mbpp_prompt(r), code) for r, code in mbpp_train()]


# The user-turn formats of `dscale bench` (src/bench/datasets.cc), also used in training.
MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
CODE_PREFIX = ("Write a solution to the following problem and make sure that it passes the "
               "tests:\n```python\n")
CODE_SUFFIX = "\n```"


def bench_prompts(name, n=None):
    """Benchmark prompts (test splits) as user-message text, formatted as `dscale bench` does."""
    if name == "gsm8k":
        out = [r["question"] + MATH_SUFFIX
               for r in read_jsonl(os.path.join(DATA, "gsm8k", "test.jsonl"))]
    elif name == "math500":
        out = [r["problem"] + MATH_SUFFIX
               for r in read_jsonl(os.path.join(DATA, "math500", "test.jsonl"))]
    elif name == "humaneval":
        out = [CODE_PREFIX + r["prompt"] + CODE_SUFFIX
               for r in read_jsonl(os.path.join(DATA, "humaneval", "HumanEval.jsonl"))]
    elif name == "mbpp":
        out = [r["text"] for r in read_jsonl(os.path.join(DATA, "mbpp", "mbpp.jsonl"))
               if 11 <= int(r["task_id"]) <= 510]
    else:
        raise ValueError(name)
    return out[:n] if n else out


def chat_prompt(user):
    """Qwen3 chat format, one user turn, generation prompt with thinking disabled."""
    return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def chat_answer(answer):
    return answer + "<|im_end|>\n"
