"""Stage 1: trains a byte-level BPE tokenizer (Qwen2 split pattern) on the training splits.

Writes vocab.json, merges.txt, added_tokens.json, tokenizer_config.json to work/tokenizer.
Deterministic: ties between equally frequent pairs break by the pair's text.
"""
import argparse
import collections
import json
import os

from common import SPECIAL_TOKENS, WORK, train_pairs
from tokenizer_bpe import BYTE_ENC, BYTE_ORDER, pretokenize


def train(words, num_merges):
    # words: {tuple(symbols): count}
    seqs = [list(w) for w in words]
    counts = list(words.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, s in enumerate(seqs):
        for a, b in zip(s, s[1:]):
            pairs[(a, b)] += counts[i]
            where[(a, b)].add(i)
    merges = []
    for _ in range(num_merges):
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if best[1] < 2:
            break
        pair = best[0]
        merges.append(pair)
        merged = pair[0] + pair[1]
        for i in list(where[pair]):
            s = seqs[i]
            c = counts[i]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] -= c
                if pairs[(a, b)] <= 0:
                    del pairs[(a, b)]
                where[(a, b)].discard(i)
            j, out = 0, []
            while j < len(s):
                if j + 1 < len(s) and s[j] == pair[0] and s[j + 1] == pair[1]:
                    out.append(merged)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            seqs[i] = out
            for a, b in zip(out, out[1:]):
                pairs[(a, b)] += c
                where[(a, b)].add(i)
        where.pop(pair, None)
    return merges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=4096, help="BPE vocabulary (bytes + merges)")
    ap.add_argument("--out", default=os.path.join(WORK, "tokenizer"))
    args = ap.parse_args()
    words = collections.Counter()
    for q, a in train_pairs():
        for text in (q, a):
            words.update(pretokenize(text))
    print(f"{len(words)} distinct pre-tokenized words")
    merges = train(words, args.vocab - 256)
    vocab = {}
    for b in BYTE_ORDER:
        vocab[BYTE_ENC[b]] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    added = {t: len(vocab) + i for i, t in enumerate(SPECIAL_TOKENS)}
    os.makedirs(args.out, exist_ok=True)
    write_tokenizer(args.out, vocab, merges, added)
    print(f"vocab {len(vocab)} + {len(added)} special tokens -> {args.out}")


def write_tokenizer(out, vocab, merges, added):
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    with open(os.path.join(out, "added_tokens.json"), "w", encoding="utf-8") as f:
        json.dump(added, f, ensure_ascii=False, indent=2)
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False, "special": True}
                                 for t, i in added.items()},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|MASK|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
