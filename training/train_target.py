"""Stage 2: trains the Qwen3-architecture target on the tokenised mixture (prepare_data.py).

Chat sequences carry loss on the assistant tokens only (the answer and its <|im_end|>);
standard-library code windows on every token. Batches of similar lengths up to
--tokens-per-batch tokens (padding included), AdamW with warmup and cosine decay, BF16 autocast
on CUDA. Every --eval-every steps the loss on the held-out validation sequences is measured and
the best weights are kept in OUT/best.pt; OUT/ckpt.pt holds the latest full state (weights,
optimizer, step) for --resume. The loss log is OUT/loss.tsv.
"""
import argparse
import json
import os
import random

import torch
import torch.nn.functional as F

from common import ROOT, WORK
from qwen3_torch import Qwen3
from run_util import (Budget, Logger, add_run_args, autocast, elapsed, load, lr_at, resume,
                      save_ckpt, say, setup)
from safetensors_io import load as load_safetensors
from tokenizer_bpe import Tokenizer


def target_config(tok, args):
    vocab = max(max(tok.vocab.values()), max(tok.added.values())) + 1
    vocab = (vocab + 63) // 64 * 64
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "vocab_size": vocab, "hidden_size": args.hidden, "intermediate_size": args.intermediate,
        "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
        "num_key_value_heads": args.kv_heads, "head_dim": args.head_dim,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_scaling": None, "attention_bias": False,
        "attention_dropout": 0.0, "tie_word_embeddings": False, "use_cache": True,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": args.layers,
        "bos_token_id": tok.added["<|endoftext|>"], "eos_token_id": tok.added["<|im_end|>"],
        "torch_dtype": "bfloat16", "initializer_range": 0.02,
    }


def epoch_sequences(data, mix, rng):
    """One pass of the mixture: each source repeated by its weight (fractions sampled)."""
    out = []
    for name, w in mix.items():
        seqs = data[name]
        out += seqs * int(w)
        frac = w - int(w)
        if frac > 0:
            out += rng.sample(seqs, int(frac * len(seqs)))
    return out


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
    return [[seqs[i] for i in b] for b in out]


def collate(batch, pad, device):
    """ids [B, T] right-padded; labels[t] = ids[t + 1] from each sequence's first label on."""
    T = max(len(s) for s, _ in batch)
    ids = torch.full((len(batch), T), pad, dtype=torch.long)
    labels = torch.full((len(batch), T), -100, dtype=torch.long)
    for b, (s, first) in enumerate(batch):
        ids[b, :len(s)] = torch.tensor(s)
        labels[b, first - 1:len(s) - 1] = torch.tensor(s[first:])
    return ids.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def loss_of(model, ids, labels, device):
    with autocast(device):
        h, _ = model(ids)
        logits = model.lm_head(h)
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1),
                           ignore_index=-100, reduction="sum"), int((labels != -100).sum())


@torch.no_grad()
def validate(model, val, pad, device, rng):
    model.eval()
    total, n = 0.0, 0
    for b in batches(val, 32768, random.Random(0)):
        l, k = loss_of(model, *collate(b, pad, device), device)
        total, n = total + float(l), n + k
    model.train()
    return total / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--intermediate", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--tokens-per-batch", type=int, default=65536)
    ap.add_argument("--mix", default="chat=3,code_tasks=2,code_text=0.5",
                    help="source=weight: how often each source appears per pass")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--data", default=os.path.join(WORK, "data", "mixture.pt"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tiny-target"))
    ap.add_argument("--out", default=os.path.join(WORK, "target"))
    ap.add_argument("--init", help="start from these weights: an exported target folder")
    add_run_args(ap, seed=1234, steps=3000, lr=2e-3)
    args = ap.parse_args()
    device = setup(args)
    rng = random.Random(args.seed)
    tok = Tokenizer(args.tokenizer)
    pad = tok.added["<|endoftext|>"]
    data = load(args.data)
    mix = {k: float(v) for k, v in (kv.split("=") for kv in args.mix.split(","))}
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    cfg = target_config(tok, args)
    model = Qwen3(cfg).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    step, best = 0, float("inf")
    if args.init:
        sd = load_safetensors(os.path.join(args.init, "model.safetensors"))
        model.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v.float()
                               for k, v in sd.items()})
        say(f"initialised from {args.init}")
    if args.resume:
        ck = resume(ckpt_path, model, opt, args, rng, device)
        step, best = ck["step"], ck["best"]
    say(f"target {sum(p.numel() for p in model.parameters())/1e6:.2f}M parameters on {device}; "
        f"sources {', '.join(f'{k} {len(data[k])}' for k in mix)}")
    log = Logger(os.path.join(args.out, "loss.tsv"),
                 ["step", "loss", "val_loss", "lr", "labels", "seconds"], args.resume)
    budget = Budget(args, step)
    queue, run_loss, run_n, labels_seen, epoch = [], 0.0, 0, 0, 0

    def save():
        save_ckpt(ckpt_path, config=cfg, model=model.state_dict(), opt=opt.state_dict(),
                  step=step, steps=args.steps, best=best, rng=rng.getstate())

    while step < args.steps:
        if not queue:
            queue = batches(epoch_sequences(data, mix, rng), args.tokens_per_batch, rng)
            epoch += 1
        ids, labels = collate(queue.pop(), pad, device)
        lr = lr_at(args, step)
        for g in opt.param_groups:
            g["lr"] = lr
        total, n = loss_of(model, ids, labels, device)
        loss = total / max(1, n)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        labels_seen += n
        run_loss, run_n = run_loss + loss.item(), run_n + 1
        budget.tick(step, say)
        if step % args.eval_every == 0 or step == args.steps:
            val = validate(model, data["val"], pad, device, rng)
            if val < best:
                best = val
                torch.save({"config": cfg, "model": model.state_dict(), "step": step, "val": val},
                           os.path.join(args.out, "best.pt"))
            say(f"step {step}/{args.steps} epoch {epoch} loss {run_loss/run_n:.4f} val {val:.4f} "
                f"(best {best:.4f}) lr {lr:.2e} labels {labels_seen/1e6:.1f}M")
            log.row(step, f"{run_loss/run_n:.4f}", f"{val:.4f}", f"{lr:.2e}", labels_seen,
                    f"{elapsed():.0f}")
            run_loss, run_n = 0.0, 0
        if step % args.save_every == 0 or step == args.steps:
            save()
    with open(os.path.join(args.out, "args.json"), "w") as f:
        json.dump(vars(args), f, indent=2)


if __name__ == "__main__":
    main()
