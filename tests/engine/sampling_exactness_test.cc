// Speculative sampling is exact end to end: at temperature 1 on a 6-token vocabulary, the joint
// distribution of the first three generated tokens over 20,000 seeded requests matches the
// target's exact distribution (chi-square, p > 0.001). Tokens 2 and 3 come out of verification
// steps driven by the planted-error drafter, so accepts, rejections and bonus samples all occur.

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"
#include "spec/chi_square.h"

namespace dscale {
namespace {

constexpr int64_t kVocab = 6;
constexpr int kSamples = 20000;

// P(t1, t2, t3 | prompt) for every triple, index t1·36 + t2·6 + t3.
std::vector<double> ExactJoint(Qwen3Model& target, const std::vector<int32_t>& prompt,
                               const SamplingParams& params) {
  std::vector<double> joint(kVocab * kVocab * kVocab);
  const auto n = static_cast<int32_t>(prompt.size());
  std::vector<double> p1, p2, p3;
  for (int32_t t1 = 0; t1 < kVocab; ++t1) {
    for (int32_t t2 = 0; t2 < kVocab; ++t2) {
      std::vector<int32_t> tokens = prompt;
      tokens.push_back(t1);
      tokens.push_back(t2);
      PagedKvCache cache(target.KvShape(16, 2));
      const int32_t seq = cache.AddSequence();
      EXPECT_TRUE(cache.Reserve(seq, n + 2).ok());
      PackedBatch batch;
      batch.AddRequest(seq, 0, tokens, cache, /*all_logits=*/true);
      ForwardOutput out;
      EXPECT_TRUE(target.Forward(batch, {}, cache, &out).ok());
      const std::span<const float> logits(out.logits);
      TargetDistribution(logits.subspan((n - 1) * kVocab, kVocab), params, &p1);
      TargetDistribution(logits.subspan(n * kVocab, kVocab), params, &p2);
      TargetDistribution(logits.subspan((n + 1) * kVocab, kVocab), params, &p3);
      for (int32_t t3 = 0; t3 < kVocab; ++t3) {
        joint[(t1 * kVocab + t2) * kVocab + t3] = p1[t1] * p2[t2] * p3[t3];
      }
    }
  }
  return joint;
}

void ExpectExactSampling(const std::string& mode, const SamplingParams& base) {
  const Qwen3Config config = testing::EngineTestTargetConfig(kVocab);
  Qwen3Model target(config, RandomQwen3Weights(config, 31, DType::kF32));
  const std::vector<int32_t> prompt = {1, 4, 2, 0};
  testing::PlantedDrafter drafter(target, 16, /*salt=*/13, /*error_free_share=*/0.3);
  EngineConfig engine_config{.policy = LengthPolicy::Parse(mode).value(), .max_running = 64};
  auto engine = Engine::Create(target, &drafter, engine_config).value();
  for (int i = 0; i < kSamples; ++i) {
    GenerationParams params{.max_tokens = 3, .sampling = base};
    params.sampling.seed = 1000003ull * i + 7;
    ASSERT_TRUE(engine->Submit(prompt, params).ok());
  }
  ASSERT_TRUE(engine->RunToCompletion().ok());
  std::vector<int64_t> counts(kVocab * kVocab * kVocab, 0);
  int64_t accepted_drafts = 0;
  for (const RequestResult& r : engine->TakeFinished()) {
    ASSERT_EQ(r.output_ids.size(), 3u);
    ++counts[(r.output_ids[0] * kVocab + r.output_ids[1]) * kVocab + r.output_ids[2]];
    for (int32_t a : r.accepted) accepted_drafts += a;
  }
  const testing::ChiSquareResult chi = testing::ChiSquareTest(counts, ExactJoint(target, prompt, base));
  EXPECT_GT(chi.p_value, 0.001) << mode << ": chi2 " << chi.statistic << " dof " << chi.dof;
  EXPECT_GT(accepted_drafts, kSamples / 10) << "the accept path must be exercised";
}

TEST(SamplingExactnessTest, DFlashAtTemperatureOne) {
  ExpectExactSampling("dflash", {.temperature = 1.0f});
}

TEST(SamplingExactnessTest, Fixed4AtTemperatureOne) {
  ExpectExactSampling("fixed:4", {.temperature = 1.0f});
}

TEST(SamplingExactnessTest, DFlashWithTopKAndTopP) {
  ExpectExactSampling("dflash", {.temperature = 0.8f, .top_k = 4, .top_p = 0.9f});
}

}  // namespace
}  // namespace dscale
