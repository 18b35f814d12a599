#pragma once
// The small models that tests and benchmarks share: named Qwen3 configs, and drafters, Domino
// heads, predictors and token sequences with random values. Every function takes its seed from
// the caller, so a test's sizes and seeds stay visible where it runs.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "dvl/predictor.h"
#include "io/decoder_config.h"
#include "io/dflash_config.h"
#include "io/domino_config.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "model/domino_head.h"
#include "model/random_checkpoint.h"

namespace dscale::testing {

// Deliberately odd sizes: vocab 131, hidden 72, intermediate 100, 3 layers, 4 heads over 2 KV
// heads of 32, 1024 positions, untied, EOS 130.
DecoderConfig OddTinyConfig();

// The engine tests' target: hidden 64, intermediate 96, 3 layers, 4 heads over 2 KV heads of 16,
// 2048 positions, untied, EOS vocab − 1.
DecoderConfig EngineTestTargetConfig(int64_t vocab = 131);

// `c` as a Llama 3 target: no q/k norms, RoPE base `rope_theta` with llama3 rope_scaling
// (factor 8, low-frequency factor 1, high-frequency factor 4, Llama 3.1's) over an original
// context of `original_context` positions.
DecoderConfig AsLlama3(DecoderConfig c, double rope_theta, int64_t original_context);

// EngineTestTargetConfig(vocab) as a Llama 3 target: no q/k norms, θ 500000 and llama3
// rope_scaling (factor 8, low 1, high 4) over an original context of `original_context`
// positions: of head_dim 16's 8 frequencies the first is kept, the second (wavelength 32.5
// positions) on the ramp, the rest divided by 8.
DecoderConfig EngineTestLlamaConfig(int64_t vocab = 131, int64_t original_context = 48);

// EngineTestTargetConfig(vocab) as a Qwen3-MoE target: 8 experts of 24, top 2, renormalised
// when `norm_topk_prob`; layer 1 dense (mlp_only_layers), layers 0 and 2 sparse.
DecoderConfig EngineTestMoeConfig(bool norm_topk_prob, int64_t vocab = 131);
// EngineTestTargetConfig as a dense Qwen3.5 hybrid: linear-attention layers at even indices,
// gated attention (half of each head rotated) at odd ones; Gated DeltaNet key_heads over
// value_heads of 12 and 9, conv kernel 4.
DecoderConfig EngineTestHybridConfig(int64_t key_heads, int64_t value_heads, int64_t vocab = 131);
// EngineTestHybridConfig(2, 4, vocab) as a Qwen3.5 mixture of experts: every MLP sparse, 8 fused
// experts of 24, top 2, renormalised, and a shared expert of 16.
DecoderConfig EngineTestHybridMoeConfig(int64_t vocab = 131);

// The server loop's target: vocab 512, hidden 32, intermediate 48, 2 layers, 2 heads over one KV
// head of 16, 2048 positions, untied, no EOS.
DecoderConfig EngineLoopConfig();

// make-tiny's shape (TinyQwen3Config) with 3 layers, EOS 0 and the LM head tied if `tie`: GQA
// group 2 and head_dim a multiple of the warp width, for the device tests.
DecoderConfig TinyDeviceConfig(bool tie = false);

// The forward benchmark's target: vocab 4096, hidden 512, intermediate 1536, 8 layers, 8 heads
// over 4 KV heads of 64, 4096 positions, untied.
DecoderConfig ForwardBenchConfig();

// A drafter config for `target`: 2 Qwen3 layers (whatever the target's family) with the
// target's attention geometry and RoPE, reading target layers {0, last}, block 16, mask id
// vocab − 2.
DFlashConfig TestDrafterConfig(const DecoderConfig& target);

// TestDrafterConfig with three layers laid out as newer drafters declare them: layer_types
// [sliding, full, sliding] under a window of 5 positions (so the sliding layers are causal and
// the full one is not), and block embeddings scaled by 0.375.
DFlashConfig LayeredTestDrafterConfig(const DecoderConfig& target);

// TestDrafterConfig as a DSpark drafter (DeepSpec's Qwen3DSparkModel) with `heads`, drafting
// `rows` = B proposals per block (verified in blocks of W = B + 1).
DFlashConfig TestDSparkConfig(const DecoderConfig& target, const DSparkHeadConfig& heads,
                              int32_t rows);

// `count` tokens uniform in [0, vocab).
std::vector<int32_t> RandomTokens(int32_t count, int64_t vocab, uint32_t seed);

// A random TestDrafterConfig drafter for `target` (f32 weights, no file round trip).
std::unique_ptr<DFlashDrafter> RandomDrafter(const DecoderModel& target, uint64_t seed);
// The same for `config` (made for target's config); a DSpark config gets random head weights
// (RandomDSparkHeadTensors, seed + 1, f32).
std::unique_ptr<DFlashDrafter> RandomDrafter(const DecoderModel& target, uint64_t seed,
                                             const DFlashConfig& config);

// A Domino head config with deliberately odd widths (G 23, B 13).
DominoHeadConfig OddHeadConfig();

// Random head weights for `target`, stored as `dtype` (BF16 matrices held as BF16, as a head
// file's are).
DominoHeadWeights RandomHeadWeights(const DominoHeadConfig& config, const DecoderConfig& target,
                                    uint64_t seed, DType dtype);

// RandomDrafter with a random OddHeadConfig head attached (head seed: seed + 1).
std::unique_ptr<DFlashDrafter> RandomDominoDrafter(const DecoderModel& target, uint64_t seed);

// A DVL predictor with random weights (so lengths vary by request) for a drafter of this hidden
// size and vocabulary.
dvl::Predictor RandomPredictor(int64_t hidden, int64_t vocab, uint64_t seed);

}  // namespace dscale::testing
