#!/usr/bin/python3
"""Check a GGUF written by to_gguf.py computes what dscale computes: the next-token distribution
after a prompt, from a running llama-server (its top-N log-probabilities) against `dscale logits`
(full-vocabulary logits, f32 activations) on the source checkpoint.

  compare_logits.py PORT DSCALE CHECKPOINT IDS [--top 10]     (IDS: comma-separated token ids)

Prints both top-N lists and the largest log-probability difference over llama.cpp's top N (those
whose probability does not underflow), in units of the spread of dscale's top-N log-probabilities;
exits 1 when the top-1 tokens differ or the difference is above 5% of that spread (value heads
left in Hugging Face's order: 105% on a random Qwen3.5 with two value heads per key head).
"""
import argparse
import json
import math
import subprocess
import sys
import urllib.request


def llama_top(port, ids, n):
    body = {"prompt": ids, "n_predict": 1, "n_probs": n, "temperature": 0.0, "cache_prompt": False,
            "post_sampling_probs": False}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        res = json.loads(r.read())
    return [(t["id"], t["logprob"]) for t in res["completion_probabilities"][0]["top_logprobs"]]


def dscale_log_probs(dscale, checkpoint, ids):
    out = subprocess.run([dscale, "logits", "--model", checkpoint, "--ids", ",".join(map(str, ids)),
                          "--activations", "f32"], check=True, capture_output=True, text=True).stdout
    numbers = json.loads(out)["logits"][-1]  # one row per prompt position
    top = max(numbers)
    log_z = top + math.log(sum(math.exp(x - top) for x in numbers))
    return [x - log_z for x in numbers]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("dscale")
    p.add_argument("checkpoint")
    p.add_argument("ids")
    p.add_argument("--top", type=int, default=10)
    a = p.parse_args()
    ids = [int(x) for x in a.ids.split(",")]
    theirs = llama_top(a.port, ids, a.top)
    ours = dscale_log_probs(a.dscale, a.checkpoint, ids)
    ours_top = sorted(range(len(ours)), key=lambda i: -ours[i])[:a.top]
    spread = ours[ours_top[0]] - ours[ours_top[-1]]
    # llama.cpp reports a probability that underflows f32 as -FLT_MAX: compare those by rank only
    finite = [(i, lp) for i, lp in theirs if lp > -80]
    worst = max(abs(ours[i] - lp) for i, lp in finite)
    same_order = [i for i, _ in theirs] == ours_top
    print("llama.cpp top:", [(i, round(lp, 4)) for i, lp in theirs])
    print("dscale    top:", [(i, round(ours[i], 4)) for i in ours_top])
    print(f"largest log-prob difference {worst:.5f} over a top-{a.top} spread of {spread:.4f} "
          f"({worst / spread:.2%}; {len(finite)} of {a.top} above exp(-80)); "
          f"top-{a.top} order {'the same' if same_order else 'differs'}")
    ok = theirs[0][0] == ours_top[0] and worst <= 0.05 * spread
    print("agree" if ok else "DIFFER")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
