#pragma once
// Random Qwen3 (Llama, Qwen3-MoE, Qwen3.5) checkpoints in the real Hugging Face layout, for tests,
// benchmarks and `dscale make-tiny`. Weights are scaled so activations stay O(1) through depth and
// logits are spread enough that greedy decoding rarely meets near-ties.

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "io/decoder_config.h"
#include "io/dflash_config.h"
#include "io/domino_config.h"
#include "io/safetensors.h"
#include "model/decoder_weights.h"
#include "model/dspark_head.h"

namespace dscale {

// `make-tiny`'s default target: vocab 512, hidden 128, intermediate 256, 4 layers, 4 heads over
// 2 KV heads of 32, RoPE θ 1e6, 4096 positions, untied, no EOS.
DecoderConfig TinyQwen3Config();
// TinyQwen3Config's shape as a Llama 3 model: no q/k norms, θ 500000, llama3 rope_scaling
// (factor 8, low 1, high 4, original context 1024: wavelengths past 256 positions are stretched,
// past 1024 by the whole factor).
DecoderConfig TinyLlamaConfig();

// TinyQwen3Config's shape as a Qwen3-MoE model: every MLP sparse, 8 experts of 64, top 2,
// renormalised.
DecoderConfig TinyQwen3MoeConfig();

// TinyQwen3Config's shape as a dense Qwen3.5 model (Qwen3_5ForCausalLM layout): layers linear,
// linear, linear, full attention; Gated DeltaNet 2 key heads over 4 value heads of 16, conv
// kernel 4; a quarter of each 32-dim attention head rotated (8 dims), θ 1e7; zero-centred norms.
DecoderConfig TinyQwen3_5Config();
// TinyQwen3_5Config's layers with TinyQwen3MoeConfig's experts in every layer, fused, and a
// shared expert of 64 (Qwen3_5MoeForCausalLM).
DecoderConfig TinyQwen3_5MoeConfig();

// Every tensor of DecoderTensorShapes(config), seeded; values are already rounded to `dtype`, so
// loading the written file gives exactly these values back.
std::vector<TensorToWrite> RandomDecoderTensors(const DecoderConfig& config, uint64_t seed,
                                                DType dtype);

// The same weights without a file round trip.
DecoderWeights RandomDecoderWeights(const DecoderConfig& config, uint64_t seed, DType dtype);

// Writes `dir`/config.json and `dir`/model.safetensors (creating `dir`).
Status WriteRandomCheckpoint(const std::string& dir, const DecoderConfig& config, uint64_t seed,
                             DType dtype);

// A DFlash drafter for a target of hidden size `target_hidden`, in the real layout (no prefix).
std::vector<TensorToWrite> RandomDFlashTensors(const DFlashConfig& config, int64_t target_hidden,
                                               uint64_t seed, DType dtype);
Status WriteRandomDFlashCheckpoint(const std::string& dir, const DFlashConfig& config,
                                   int64_t target_hidden, uint64_t seed, DType dtype);

// A DSpark drafter's checkpoint in DeepSpec's layout (config.dspark set): the backbone's tensors,
// its heads', and kDSparkEmbedCopyName / kDSparkLmHeadCopyName [vocab, target_hidden], the frozen
// copies of the target's embedding and LM head (model/dspark_head.h).
TensorShapes DSparkDrafterTensorShapes(const DFlashConfig& config, int64_t target_hidden,
                                       int64_t vocab);
// A DSpark drafter's head tensors, random: the Markov embedding N(0, 1), its output projection
// N(0, 9/r), so the head moves some of a random drafter's argmaxes; biases in [−0.5, 0.5].
std::vector<TensorToWrite> RandomDSparkHeadTensors(const DSparkHeadConfig& config, int64_t hidden,
                                                   int64_t vocab, uint64_t seed, DType dtype);
// Writes `dir`/config.json (DeepSpec's layout) and `dir`/model.safetensors: the backbone and heads
// random, the copies with the values given (the target's embedding and LM head [vocab,
// target_hidden], already in `dtype`).
Status WriteRandomDSparkCheckpoint(const std::string& dir, const DFlashConfig& config,
                                   int64_t target_hidden, uint64_t seed, DType dtype,
                                   std::vector<float> embed, std::vector<float> lm_head);

// A Domino head (model/domino_head.h) for a target of `hidden` and `vocab`: projections
// N(0, 1/in), so corrections are O(1) and move some of a random drafter's argmaxes.
std::vector<TensorToWrite> RandomDominoHeadTensors(const DominoHeadConfig& config, int64_t hidden,
                                                   int64_t vocab, uint64_t seed, DType dtype);
// Writes `drafter_dir`/config.head_file (the drafter's config.json is left as it is).
Status WriteRandomDominoHead(const std::string& drafter_dir, const DominoHeadConfig& config,
                             int64_t hidden, int64_t vocab, uint64_t seed, DType dtype);

}  // namespace dscale
