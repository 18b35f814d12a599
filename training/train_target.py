"""Stage 2: trains the Qwen3-architecture target on chat-formatted training-split Q->A text.

Loss on assistant tokens only (the answer and its <|im_end|>). Thinking disabled in the
chat format. Checkpoints to work/target/ckpt.pt; the loss log to work/target/loss.tsv.
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torch.nn.functional as F

from common import WORK, chat_answer, chat_prompt, train_pairs
from qwen3_torch import Qwen3
from tokenizer_bpe import Tokenizer


def target_config(tok, args):
    vocab = max(max(tok.vocab.values()), max(tok.added.values())) + 1
    vocab = (vocab + 63) // 64 * 64
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "vocab_size": vocab, "hidden_size": args.hidden, "intermediate_size": args.intermediate,
        "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
        "num_key_value_heads": args.kv_heads, "head_dim": args.hidden // args.heads,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_scaling": None, "attention_bias": False,
        "attention_dropout": 0.0, "tie_word_embeddings": False, "use_cache": True,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": args.layers,
        "bos_token_id": tok.added["<|endoftext|>"], "eos_token_id": tok.added["<|im_end|>"],
        "torch_dtype": "bfloat16", "initializer_range": 0.02,
    }


def encode_pairs(tok, max_len):
    seqs = []
    for q, a in train_pairs():
        p = tok.encode(chat_prompt(q))
        r = tok.encode(chat_answer(a))[:-1]  # drop the newline after <|im_end|>
        ids = (p + r)[:max_len]
        seqs.append((ids, len(p)))
    return seqs


def batches(seqs, tokens_per_batch, rng):
    order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i][0]), rng.random()))
    out, cur, cur_max = [], [], 0
    for i in order:
        L = len(seqs[i][0])
        if cur and max(cur_max, L) * (len(cur) + 1) > tokens_per_batch:
            out.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, L)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(seqs, idx, pad):
    T = max(len(seqs[i][0]) for i in idx)
    ids = torch.full((len(idx), T), pad, dtype=torch.long)
    labels = torch.full((len(idx), T), -100, dtype=torch.long)
    for b, i in enumerate(idx):
        s, plen = seqs[i]
        ids[b, :len(s)] = torch.tensor(s)
        lab = torch.tensor(s[1:])
        labels[b, :len(s) - 1] = lab
        labels[b, :plen - 1] = -100
    return ids, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=640)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--tokens-per-batch", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(WORK, "target"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tok = Tokenizer(os.path.join(WORK, "tokenizer"))
    cfg = target_config(tok, args)
    os.makedirs(args.out, exist_ok=True)
    seqs = encode_pairs(tok, args.max_len)
    model = Qwen3(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"target params {n_params/1e6:.2f}M, {len(seqs)} sequences", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    warmup = max(1, args.steps // 25)
    pad = tok.added["<|endoftext|>"]
    log = open(os.path.join(args.out, "loss.tsv"), "w")
    log.write("step\tloss\ttokens\tseconds\n")
    queue, step, t0, seen, run_loss, run_n = [], 0, time.time(), 0, 0.0, 0
    epoch = 0
    while step < args.steps:
        if not queue:
            queue = batches(seqs, args.tokens_per_batch, rng)
            epoch += 1
        idx = queue.pop()
        ids, labels = collate(seqs, idx, pad)
        lr = args.lr * min(1.0, (step + 1) / warmup) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.steps))))
        for g in opt.param_groups:
            g["lr"] = lr
        h, _ = model(ids)
        logits = model.lm_head(h)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += int((labels != -100).sum())
        run_loss += loss.item()
        run_n += 1
        if step % 10 == 0 or step == args.steps:
            el = time.time() - t0
            print(f"step {step} epoch {epoch} loss {run_loss/run_n:.4f} lr {lr:.2e} "
                  f"answer-tokens {seen} {el:.0f}s", flush=True)
            log.write(f"{step}\t{run_loss/run_n:.4f}\t{seen}\t{el:.0f}\n")
            log.flush()
            run_loss, run_n = 0.0, 0
        if step % 100 == 0 or step == args.steps:
            torch.save({"config": cfg, "model": model.state_dict(), "step": step},
                       os.path.join(args.out, "ckpt.pt"))
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
