#include "strategy_test_util.h"

#include <gtest/gtest.h>

#include <random>

#include "core/dvl_shapes.h"
#include "dvl/features.h"

namespace dscale::plan_test {

StepBatch MakeBlocks(const std::vector<int32_t>& rows) {
  int32_t total = 0;
  for (int32_t r : rows) total += r;
  StepBatch blocks(total, static_cast<int32_t>(rows.size()));
  for (int32_t i = 0; i < static_cast<int32_t>(rows.size()); ++i) {
    blocks.BeginSpan(i, 10 + i, nullptr);
    for (int32_t j = 0; j < rows[i]; ++j) blocks.AddRow(100 * i + j, 16 * i + j, /*logits=*/false);
  }
  return blocks;
}

DraftOutput MakeDrafts(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  DraftOutput drafts;
  drafts.candidates = dvl::kDraftPositions;
  drafts.tokens.assign(n * dvl::kDraftPositions, 1);
  drafts.logits.resize(n * dvl::kDraftPositions * kVocab);
  drafts.hidden.resize(n * dvl::kDraftPositions * kHidden);
  for (float& x : drafts.logits) x = normal(rng);
  for (float& x : drafts.hidden) x = normal(rng);
  return drafts;
}

dvl::Predictor MakePredictor(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> small(0.0f, 0.05f);
  dvl::PredictorWeights w = dvl::PredictorWeights::Zeros();
  for (float& x : w.w1) x = small(rng);
  for (float& x : w.w2) x = 20 * small(rng);
  for (size_t j = 0; j < w.b2.size(); ++j) w.b2[j] = 2.0f - 0.3f * static_cast<float>(j);
  return dvl::Predictor(dvl::MakeProjections(kHidden, kVocab, seed), std::move(w));
}

std::vector<int32_t> DecideAll(LengthStrategy& strategy, const StrategyInput& in) {
  std::vector<int32_t> k(static_cast<size_t>(in.requests()), 1);
  const Status status = strategy.Decide(in, k);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return k;
}

}  // namespace dscale::plan_test
