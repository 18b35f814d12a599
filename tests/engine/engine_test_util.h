#pragma once
// Helpers for engine tests: tiny random target + DFlash drafter pairs, running prompts through
// an engine, and token-for-token comparisons of greedy outputs.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dvl/predictor.h"
#include "engine/engine.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "model/quantize_weights.h"
#include "support/tiny_models.h"

namespace dscale::testing {

struct EngineRun {
  std::vector<std::vector<int32_t>> outputs;  // in prompt order
  std::vector<RequestResult> results;         // in prompt order
  StepStats stats;
  int32_t free_pages_after = 0;
  int32_t total_pages = 0;
  int32_t prefix_cache_states_after = 0;  // a hybrid's recurrent states the prefix cache keeps
};

// `count` prompts of random tokens in [0, vocab − 3) (the top ids stay free for EOS and the
// like), of 3 … max_length tokens, from `seed`.
std::vector<std::vector<int32_t>> RandomPrompts(int count, int64_t vocab, uint32_t seed,
                                                int32_t max_length = 40);

// A target of config `c` with random BF16 weights (seed 5): as stored (kAsStored), or with its
// projections quantised to `weights` (int8 or int4) under int8 activations.
DecoderModel RandomTarget(const DecoderConfig& c, WeightsMode weights);

// Submits every prompt at once and runs to completion (fatal test failure on errors).
// `step_times`: what --verify-budget auto reads (null: the clock).
EngineRun RunPrompts(TargetModel& target, Drafter* drafter, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const GenerationParams& params,
                     const budget::StepTimeSource* step_times = nullptr);
// The same on an engine over `backend`.
EngineRun RunPrompts(StepBackend& backend, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const GenerationParams& params,
                     const budget::StepTimeSource* step_times = nullptr);

// The target's logits [vocab] for the token after `context`, from one plain forward over it (K/V
// cached as `kv`).
std::vector<float> NextTokenLogits(TargetModel& target, const std::vector<int32_t>& context,
                                   KvDtype kv = KvDtype::kBf16);

// Greedy outputs compared token for token. On the CPU every kernel gives a row the same bits
// whatever rows share its step (tests/kernels/row_invariance_test.cc), so speculation, any
// concurrency and prefix caching commit plain decoding's tokens exactly: no near-tie is excused.
//
// "" when got equals want; else where they first differ: the prompt (when comparing lists),
// the token index and both tokens, or the lengths.
std::string FirstDifference(const std::vector<int32_t>& got, const std::vector<int32_t>& want);
std::string FirstDifference(const std::vector<std::vector<int32_t>>& got,
                            const std::vector<std::vector<int32_t>>& want);

// Comparisons between two different arithmetics — a model and its inflation to another shape,
// the GPU against the CPU — where the same function is computed in other orders, so the top two
// logits may swap within a tolerance (model/logit_bounds.h):
//
// Whether the target's top-two logits after `context` (K/V cached as `kv`) are within
// `tolerance`: a greedy choice that float noise may flip.
bool IsNearTie(TargetModel& target, const std::vector<int32_t>& context, float tolerance,
               KvDtype kv = KvDtype::kBf16);

// Compares `got` with `want`, the other arithmetic's greedy output of `prompt`. Equal: true. At
// the first difference, returns false after checking (EXPECT) that it is a near-tie within
// `tie_tolerance` of `target` (the arithmetic of `got`); `*ties` counts those.
bool SameGreedyOutputUpToTies(TargetModel& target, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                              int* ties, float tie_tolerance, KvDtype kv = KvDtype::kBf16);

// The test-name suffix of a KvDtype parameter ("bf16", "f32").
inline std::string KvDtypeCase(const ::testing::TestParamInfo<KvDtype>& info) {
  return std::string(KvDtypeName(info.param));
}

// A backend that runs every stage on `inner` and claims none of its capabilities
// (VerifyTakesPromptRows, PassesOnHost: false), as a device backend would; a test overrides what
// it watches.
class DelegatingBackend : public StepBackend {
 public:
  explicit DelegatingBackend(StepBackend& inner) : inner_(inner) {}

  std::string_view name() const override { return inner_.name(); }
  TargetModel& target() override { return inner_.target(); }
  Drafter* drafter() override { return inner_.drafter(); }
  Result<TargetPass> Prefill(const StepBatch& chunks, PagedKvCache& cache,
                             ForwardOutput* out) override {
    return inner_.Prefill(chunks, cache, out);
  }
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override {
    return inner_.Draft(requests, cache, tile_rows, out);
  }
  Result<TargetPass> Verify(const StepBatch& packed, std::span<const AcceptRequest> requests,
                            PagedKvCache& cache, ForwardOutput* out) override {
    return inner_.Verify(packed, requests, cache, out);
  }
  void Accept(const TargetPass& pass, std::span<const AcceptRequest> requests,
              std::span<Acceptance> outcomes) override {
    inner_.Accept(pass, requests, outcomes);
  }
  void AppendContext(const TargetPass& pass, int32_t first, int32_t count) override {
    inner_.AppendContext(pass, first, count);
  }

 private:
  StepBackend& inner_;
};

// The engine tests' models: an EngineTestTargetConfig() target with f32 weights (seed 5) and a
// random predictor for its drafters (seed 3).
class EngineFixture : public ::testing::Test {
 protected:
  EngineFixture();

  DecoderModel target_;
  dvl::Predictor predictor_;
};

}  // namespace dscale::testing
