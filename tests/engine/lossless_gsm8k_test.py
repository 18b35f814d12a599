#!/usr/bin/env python3
"""Lossless on real prompts, bit for bit: every length policy commits plain decoding's tokens.

Runs `dscale generate --json` on GSM8K test questions (chat format, greedy, default flags but for
the policy) with every policy — none, dflash, fixed:5, dscale, dscale with the auto budget,
dspark, and the Domino head (with dflash and with dscale) — at concurrency 1 and 16, and
requires every request's output_ids to equal plain decoding's at concurrency 1, token for token:
no near-tie is excused, since no kernel's bits depend on the rows beside it
(tests/kernels/row_invariance_test.cc). With --caps, the whole comparison runs once under each
DSCALE_CPU_ISA cap that runs different kernels on this CPU (a cap only removes instruction sets,
so one above the CPU's level runs what the CPU's level runs, and is checked once).

usage: lossless_gsm8k_test.py DSCALE --target DIR --drafter DIR [--prompts N] [--max-tokens N]
                              [--caps amx,avx512,avx2,portable] [--policies a,b,...]
Exits 0 when every run matches, 1 otherwise (printing each first difference).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GSM8K = os.path.join(HERE, "..", "..", "data", "gsm8k", "test.jsonl")

# name -> the flags that select it (dspark's SPS table is added per run: profiled once per cap).
POLICIES = {
    "none": ["--spec", "none"],
    "dflash": ["--spec", "dflash"],
    "fixed:5": ["--spec", "fixed:5"],
    "dscale": ["--spec", "dscale"],
    "dscale-auto": ["--spec", "dscale", "--verify-budget", "auto"],
    "dspark": ["--spec", "dspark"],
    "domino": ["--spec", "dflash", "--drafter-head", "domino"],
    "domino+dscale": ["--spec", "dscale", "--drafter-head", "domino"],
}


LEVELS = ["portable", "avx2", "avx512", "amx"]  # DSCALE_CPU_ISA's caps, lowest first


def cpu_level():
    """The highest cap level this CPU reaches (kernels/cpu/cpu_isa_cap.h's levels)."""
    flags = set()
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512bw"} <= flags:
        return "amx" if {"amx_tile", "amx_bf16"} <= flags else "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "portable"


def distinct_caps(caps):
    """The caps that run different kernels here: a cap above the CPU's level runs what the CPU's
    level runs, so it is checked once."""
    top = LEVELS.index(cpu_level())
    chosen, seen = [], set()
    for cap in caps:
        level = LEVELS[min(LEVELS.index(cap), top)] if cap else LEVELS[top]
        if level in seen:
            print(f"DSCALE_CPU_ISA={cap or '(unset)'} runs the {level} kernels here: "
                  "checked once", flush=True)
            continue
        seen.add(level)
        chosen.append(cap)
    return chosen


def write_prompts(path, count):
    with open(GSM8K, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as dst:
        for line, _ in zip(src, range(count)):
            question = json.loads(line)["question"]
            dst.write(json.dumps({"messages": [{"role": "user", "content": question}]}) + "\n")


def generate(args, env, flags):
    command = [args.dscale, "generate", "--target", args.target, "--drafter", args.drafter,
               "--prompts", args.prompt_file, "--max-tokens", str(args.max_tokens), "--json",
               *flags]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return [r["output_ids"] for r in json.loads(result.stdout)["requests"]]


def first_difference(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            at = next((j for j, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w)))
            return f"prompt {i}, token {at}: {g[at:at + 3]} where plain decoding has {w[at:at + 3]}"
    return None if len(got) == len(want) else f"{len(got)} outputs for {len(want)}"


def check_cap(args, cap, workdir):
    env = dict(os.environ)
    if cap:
        env["DSCALE_CPU_ISA"] = cap
    label = cap or "uncapped"
    reference = generate(args, env, POLICIES["none"] + ["--concurrency", "1"])
    tokens = sum(len(r) for r in reference)
    sps_table = os.path.join(workdir, f"sps-{label}.json")
    failures = 0
    for name in args.policies:
        for concurrency in (1, 16):
            if name == "none" and concurrency == 1:
                continue
            flags = POLICIES[name] + ["--concurrency", str(concurrency)]
            if name == "dspark":
                flags += (["--sps-table", sps_table] if os.path.exists(sps_table)
                          else ["--sps-table-out", sps_table])
            started = time.monotonic()
            got = generate(args, env, flags)
            diff = first_difference(got, reference)
            verdict = "same" if diff is None else f"DIFFERS at {diff}"
            print(f"{label:9} {name:14} c={concurrency:<3} {verdict} "
                  f"({time.monotonic() - started:.1f} s)", flush=True)
            failures += diff is not None
    print(f"{label}: {len(reference)} prompts, {tokens} plain tokens", flush=True)
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dscale")
    parser.add_argument("--target", required=True)
    parser.add_argument("--drafter", required=True)
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--caps", default="", help="comma-separated DSCALE_CPU_ISA values")
    parser.add_argument("--policies", default=",".join(POLICIES))
    args = parser.parse_args()
    args.policies = args.policies.split(",")
    bad_caps = [c for c in args.caps.split(",") if args.caps and c not in LEVELS]
    if bad_caps:
        sys.exit(f"--caps: unknown {bad_caps}; known: {', '.join(LEVELS)}")
    unknown = [p for p in args.policies if p not in POLICIES]
    if unknown:
        sys.exit(f"--policies: unknown {unknown}; known: {', '.join(POLICIES)}")
    caps = distinct_caps(args.caps.split(",") if args.caps else [""])
    with tempfile.TemporaryDirectory() as workdir:
        args.prompt_file = os.path.join(workdir, "prompts.jsonl")
        write_prompts(args.prompt_file, args.prompts)
        failures = sum(check_cap(args, cap, workdir) for cap in caps)
    if failures:
        print(f"{failures} run(s) differ from plain decoding")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
