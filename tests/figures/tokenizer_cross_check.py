"""`dscale tokenize` against the Python encoder that trained the bundled tokenizer
(training/tokenizer_bpe.py), on models/tiny-target's tokenizer files: the first 15 prompts of
each benchmark set (GSM8K test, MATH500, HumanEval, MBPP 11-510; training/common.py's
bench_prompts), 60 in all, each as plain text and in the chat format (--chat), must give the
same ids.

  /usr/bin/python3 tokenizer_cross_check.py DSCALE_BINARY

Exits 77 with "SKIPPED: ..." when this interpreter lacks the regex module that the Python
encoder needs (Debian: apt-get install python3-regex).
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PER_SET = 15
SETS = ["gsm8k", "math500", "humaneval", "mbpp"]


def dscale_ids(dscale, tokenizer_dir, cases):
    """Ids of each (text, chat) case from one `dscale tokenize --jsonl` call."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".jsonl", delete=False) as f:
        for text, chat in cases:
            f.write(json.dumps({"text": text, "chat": chat}) + "\n")
        path = f.name
    try:
        out = subprocess.check_output(
            [dscale, "tokenize", "--tokenizer", tokenizer_dir, "--jsonl", path], text=True)
    finally:
        os.unlink(path)
    results = [json.loads(line)["ids"] for line in out.splitlines()]
    if len(results) != len(cases):
        raise RuntimeError(f"dscale tokenize gave {len(results)} results for {len(cases)} texts")
    return results


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    dscale = sys.argv[1]
    try:
        import regex  # noqa: F401  (the Python encoder's split pattern needs it)
    except ImportError:
        print(f"SKIPPED: {sys.executable} has no regex module (apt-get install python3-regex)")
        return 77
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.join(ROOT, "training"))
    from common import bench_prompts, chat_prompt
    from tokenizer_bpe import Tokenizer

    tokenizer_dir = os.path.join(ROOT, "models", "tiny-target")
    encoder = Tokenizer(tokenizer_dir)
    checked = 0
    failures = []
    for name in SETS:
        prompts = bench_prompts(name, PER_SET)
        if len(prompts) != PER_SET:
            failures.append(f"{name}: {len(prompts)} prompts, expected {PER_SET}")
            continue
        ids_total = 0
        cases = [(text, chat) for text in prompts for chat in (False, True)]
        for n, got in enumerate(dscale_ids(dscale, tokenizer_dir, cases)):
            (text, chat), i = cases[n], n // 2
            expected = encoder.encode(chat_prompt(text) if chat else text)
            ids_total += len(expected)
            if got != expected:
                first = next((j for j, (a, b) in enumerate(zip(got, expected)) if a != b),
                             min(len(got), len(expected)))
                failures.append(f"{name} prompt {i + 1}{' (chat)' if chat else ''}: ids "
                                f"differ from position {first} (dscale {got[first:first + 8]}, "
                                f"Python {expected[first:first + 8]}); {text[:60]!r}")
        checked += len(prompts)
        print(f"{name}: {PER_SET} prompts, {ids_total} ids (plain + chat)")
    for failure in failures:
        print("FAIL", failure)
    if failures:
        return 1
    print(f"dscale tokenize equals the Python encoder on {checked} benchmark prompts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
