#pragma once
// Helpers for engine tests: tiny random target + DFlash drafter pairs, running prompts through
// an engine, and the near-tie check that greedy comparisons state explicitly.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dvl/predictor.h"
#include "engine/engine.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "support/tiny_models.h"

namespace dscale::testing {

struct EngineRun {
  std::vector<std::vector<int32_t>> outputs;  // in prompt order
  std::vector<RequestResult> results;         // in prompt order
  StepStats stats;
  int32_t free_pages_after = 0;
  int32_t total_pages = 0;
};

// `count` prompts of random tokens in [0, vocab − 3) (the top ids stay free for EOS and the
// like), of 3 … max_length tokens, from `seed`.
std::vector<std::vector<int32_t>> RandomPrompts(int count, int64_t vocab, uint32_t seed,
                                                int32_t max_length = 40);

// Submits every prompt at once and runs to completion (fatal test failure on errors).
// `step_times`: what --verify-budget auto reads (null: the clock).
EngineRun RunPrompts(TargetModel& target, Drafter* drafter, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const GenerationParams& params,
                     const budget::StepTimeSource* step_times = nullptr);
// The same on an engine over `backend`.
EngineRun RunPrompts(StepBackend& backend, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const GenerationParams& params);

// The target's logits [vocab] for the token after `context`, from one plain forward over it (K/V
// cached as `kv`).
std::vector<float> NextTokenLogits(TargetModel& target, const std::vector<int32_t>& context,
                                   KvDtype kv = KvDtype::kBf16);

// Whether the target's top-two logits after `context` (K/V cached as `kv`) are within
// `tolerance`: a greedy choice that float noise may flip.
bool IsNearTie(TargetModel& target, const std::vector<int32_t>& context, float tolerance,
               KvDtype kv = KvDtype::kBf16);

// Compares `got` with the plain greedy `want` of `prompt`. Equal: true. At the first
// difference, returns false after checking (EXPECT) that it is a near-tie within `tie_tolerance`
// — the only divergence float noise may cause; `*ties` counts those. On the CPU the tolerance
// is GreedyTieTolerance(TargetLogitBounds(...)) (model/logit_bounds.h): two evaluation orders
// can swap the top two logits only within it. `kv`: the runs' KV dtype (the engine's default).
bool SameGreedyOutput(TargetModel& target, const std::vector<int32_t>& prompt,
                      const std::vector<int32_t>& got, const std::vector<int32_t>& want, int* ties,
                      float tie_tolerance, KvDtype kv = KvDtype::kBf16);
// SameGreedyOutput over every prompt: got[i] against want[i]; returns the near-ties counted.
int GreedyTies(TargetModel& target, const std::vector<std::vector<int32_t>>& prompts,
               const std::vector<std::vector<int32_t>>& got,
               const std::vector<std::vector<int32_t>>& want, float tie_tolerance,
               KvDtype kv = KvDtype::kBf16);

// The CPU tie tolerance for EngineTestTargetConfig() targets whose requests stay within
// kEngineTestMaxContext positions, with K/V cached as `kv`. With the engine's default BF16 cache
// (GreedyDecode's too) it is ~160× the f32 one: two evaluation orders can round a K or V value
// that differs in its last f32 bit to neighbouring BF16 values, and the bound must allow every
// value to do so.
inline constexpr int64_t kEngineTestMaxContext = 128;
float EngineTestTieTolerance(const DecoderModel& target, KvDtype kv = KvDtype::kBf16);

// The test-name suffix of a KvDtype parameter ("bf16", "f32").
inline std::string KvDtypeCase(const ::testing::TestParamInfo<KvDtype>& info) {
  return std::string(KvDtypeName(info.param));
}

// The engine tests' models: an EngineTestTargetConfig() target with f32 weights (seed 5), a
// random predictor for its drafters (seed 3), and the tie tolerance of greedy comparisons on the
// default BF16 cache.
class EngineFixture : public ::testing::Test {
 protected:
  EngineFixture();

  DecoderModel target_;
  dvl::Predictor predictor_;
  const float tie_ = EngineTestTieTolerance(target_);
};

}  // namespace dscale::testing
