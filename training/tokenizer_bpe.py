"""Byte-level BPE with Qwen2's pre-tokenizer split pattern: training and encoding."""
import json
import os
import unicodedata

import regex

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLIT = regex.compile(QWEN2_PATTERN)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs])), bs


BYTE_ENC, BYTE_ORDER = bytes_to_unicode()


def pretokenize(text):
    text = unicodedata.normalize("NFC", text)
    return ["".join(BYTE_ENC[b] for b in piece.encode("utf-8")) for piece in SPLIT.findall(text)]


class Tokenizer:
    def __init__(self, directory):
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        with open(os.path.join(directory, "merges.txt"), encoding="utf-8") as f:
            lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#version")]
        self.ranks = {tuple(l.split(" ")): i for i, l in enumerate(lines)}
        with open(os.path.join(directory, "added_tokens.json"), encoding="utf-8") as f:
            self.added = json.load(f)
        self.id_to_token = {v: k for k, v in self.vocab.items()}
        self.id_to_token.update({v: k for k, v in self.added.items()})
        self.byte_dec = {c: b for b, c in BYTE_ENC.items()}
        self.cache = {}
        self.special_re = regex.compile("(" + "|".join(regex.escape(t) for t in
                                        sorted(self.added, key=len, reverse=True)) + ")")

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        ids = []
        for chunk in self.special_re.split(text):
            if not chunk:
                continue
            if chunk in self.added:
                ids.append(self.added[chunk])
                continue
            for w in pretokenize(chunk):
                ids.extend(self._bpe(w))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.id_to_token[i]
            if t in self.added:
                out += t.encode("utf-8")
            else:
                out += bytes(self.byte_dec[c] for c in t)
        return out.decode("utf-8", errors="replace")
