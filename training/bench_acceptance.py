"""Measures DFlash acceptance with dscale on the benchmark test prompts.

  python3 bench_acceptance.py --datasets gsm8k:200,math500:100,humaneval:100,mbpp:100
  python3 bench_acceptance.py --drafter-head domino --out work/bench-domino.json

Runs `build/dscale generate --spec dflash --json` (temperature 0, thinking disabled) and
reports per dataset: tau (committed tokens per verify step, bonus included), the share of
steps accepting all block_size-1 drafts, the spread of per-request tau, and the step-time
breakdown. Writes work/bench.json. --drafter-head domino drafts through the drafter's Domino
head (docs/DOMINO.md), verification unchanged (full blocks).
"""
import argparse
import json
import os
import statistics
import subprocess
import time

from common import ROOT, WORK, bench_prompts
from quality import has_final_answer, loops


def run(dataset, n, args):
    prompts = bench_prompts(dataset, n)
    path = os.path.join(WORK, f"prompts_{dataset}_{args.drafter_head}.jsonl")
    os.makedirs(WORK, exist_ok=True)
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps({"prompt": p}) + "\n")
    cmd = [args.dscale, "generate", "--target", args.target,
           "--drafter", args.drafter, "--spec", "dflash", "--prompts", path,
           "--max-tokens", str(args.max_tokens), "--concurrency", str(args.concurrency),
           "--drafter-head", args.drafter_head, "--json"]
    t = time.time()
    out = json.loads(subprocess.check_output(cmd))
    wall = time.time() - t
    acc = [a for r in out["requests"] for a in r["accepted"]]
    per_req = [statistics.mean(r["accepted"]) + 1 for r in out["requests"] if r["accepted"]]
    st = out["stats"]
    parts = st["step_time_s"]
    decode = sum(v for k, v in parts.items() if k != "prefill")
    return {
        "dataset": dataset, "prompts": len(prompts), "steps": len(acc),
        "tau": statistics.mean(acc) + 1, "engine_tau": st["tau"],
        "all_accepted_share": sum(a == args.block - 1 for a in acc) / len(acc),
        "request_tau_min": min(per_req), "request_tau_median": statistics.median(per_req),
        "request_tau_max": max(per_req),
        "verify_share_of_decode": parts["verify"] / decode if decode else 0.0,
        "draft_share_of_decode": parts["draft"] / decode if decode else 0.0,
        "output_tokens": st["output_tokens"], "tokens_per_second": st["tokens_per_second"],
        "step_time_s": parts, "wall_s": wall,
        "accepted_histogram": [sum(a == k for a in acc) for k in range(args.block)],
        "looping_share": sum(loops(r["output_ids"]) for r in out["requests"]) / len(prompts),
        "final_answer_share": sum(has_final_answer(r["text"]) for r in out["requests"])
        / len(prompts),
        "outputs": [r.get("text", "") for r in out["requests"][:3]],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default="gsm8k:200,math500:100,humaneval:100,mbpp:100")
    ap.add_argument("--target", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--drafter", default=os.path.join(ROOT, "models", "tiny-dflash"))
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--block", type=int, default=16)
    ap.add_argument("--drafter-head", choices=["none", "domino"], default="none")
    ap.add_argument("--dscale", default=os.path.join(ROOT, "build", "dscale"))
    ap.add_argument("--out", default=os.path.join(WORK, "bench.json"))
    args = ap.parse_args()
    results = []
    for spec in args.datasets.split(","):
        name, n = spec.split(":")
        r = run(name, int(n), args)
        results.append(r)
        print(f"{name:10s} n={r['prompts']:4d} steps={r['steps']:6d} tau={r['tau']:.2f} "
              f"(engine {r['engine_tau']:.2f}) all-15={100*r['all_accepted_share']:.1f}% "
              f"req-tau min/med/max={r['request_tau_min']:.2f}/{r['request_tau_median']:.2f}/"
              f"{r['request_tau_max']:.2f} verify={100*r['verify_share_of_decode']:.1f}% "
              f"draft={100*r['draft_share_of_decode']:.1f}% loops={100*r['looping_share']:.0f}% "
              f"final-answer={100*r['final_answer_share']:.0f}% {r['wall_s']:.0f}s\n"
              f"           accepted drafts per step: {r['accepted_histogram']}", flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
