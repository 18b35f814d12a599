#!/usr/bin/env bash
# CTest fixture: the tiny models the server's end-to-end tests serve. A random Qwen3 target with
# a 512-token vocabulary (hidden 64, 2 layers: small, so that the load test is quick) and a
# matching DFlash drafter, with the small test tokenizer
# (tests/data/server_tokenizer) copied next to the target. EOS is "<|im_end|>" (id 509). And a
# Qwen3.5 hybrid of the same size (a Gated DeltaNet layer, then an attention layer) with its
# drafter and the same tokenizer.
# Usage: make_model.sh DSCALE TOKENIZER_DIR OUT_DIR
set -euo pipefail
dscale=$1
tokenizer=$2
out=$3
mkdir -p "$out"
rm -rf "$out/tiny" "$out/tiny-drafter"
"$dscale" make-tiny --out "$out/tiny" --drafter-out "$out/tiny-drafter" --seed 7 --eos 509 \
  --hidden 64 --intermediate 128 --layers 2 --heads 2 --kv-heads 1 --head-dim 32 \
  --max-positions 4096
cp "$tokenizer/vocab.json" "$tokenizer/merges.txt" "$tokenizer/added_tokens.json" \
  "$tokenizer/tokenizer_config.json" "$out/tiny/"
rm -rf "$out/tiny-hybrid" "$out/tiny-hybrid-drafter"
"$dscale" make-tiny --arch qwen3_5 --out "$out/tiny-hybrid" --drafter-out "$out/tiny-hybrid-drafter" \
  --seed 7 --eos 509 --hidden 64 --intermediate 128 --layers 2 --heads 2 --kv-heads 1 \
  --head-dim 32 --linear-key-heads 2 --linear-value-heads 2 --linear-key-dim 16 \
  --linear-value-dim 16 --conv-kernel 4 --full-attention-interval 2 --max-positions 4096
cp "$tokenizer/vocab.json" "$tokenizer/merges.txt" "$tokenizer/added_tokens.json" \
  "$tokenizer/tokenizer_config.json" "$out/tiny-hybrid/"
