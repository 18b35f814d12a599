// Speculation with a DSpark drafter (DeepSpec's Qwen3DSparkModel: B = 15 rows drafted, all of
// them proposals, so the verify block is W = B + 1 = 16 and every policy runs, the DVL
// predictor's included): greedy output in every mode — none, dflash, fixed:4, fixed:16, dscale at
// a fraction and with auto, dspark — at c = 1 and 16 equals plain greedy decoding token for token,
// for each Markov head type, without a Markov head, and with each confidence head. The engine
// reserves and verifies W rows while the drafter stages B: a block rule applied wrong would write
// K/V past a request's pages, which every-mode's page and token checks see; a drafter whose
// walk proposes the target's own tokens (BigramDSparkDrafter) has its drafts accepted too.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "every_mode_lossless.h"
#include "model/greedy_decode.h"
#include "model/random_checkpoint.h"

namespace dscale {
namespace {

struct DSparkCase {
  const char* name;
  DSparkHeadConfig heads;
};

class DSparkEngineTest : public ::testing::TestWithParam<DSparkCase> {};

TEST_P(DSparkEngineTest, GreedyOutputEqualsPlainDecodingInEveryModeAndConcurrency) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  const std::unique_ptr<DFlashDrafter> drafter =
      testing::RandomDrafter(target, 11, testing::TestDSparkConfig(c, GetParam().heads, 15));
  ASSERT_EQ(drafter->block_size(), 16);
  testing::ExpectEveryModeEqualsPlainDecoding(target, drafter.get());
}

INSTANTIATE_TEST_SUITE_P(
    Heads, DSparkEngineTest,
    ::testing::Values(DSparkCase{"vanilla_markov_confidence",
                                 {.markov_rank = 9,
                                  .markov_head_type = MarkovHeadType::kVanilla,
                                  .confidence_head = true,
                                  .confidence_with_markov = true}},
                      DSparkCase{"gated_plain_confidence",
                                 {.markov_rank = 6,
                                  .markov_head_type = MarkovHeadType::kGated,
                                  .confidence_head = true}},
                      DSparkCase{"rnn",
                                 {.markov_rank = 5, .markov_head_type = MarkovHeadType::kRnn}},
                      DSparkCase{"no_markov_head", {.markov_rank = 0, .confidence_head = true}}),
    [](const ::testing::TestParamInfo<DSparkCase>& info) { return std::string(info.param.name); });

// A DSpark drafter (B = 15) whose vanilla Markov head of rank V plants the target's bigrams: W1
// the identity and W2's column t a bias of 40 on the token that most often follows t in the
// target's greedy continuations of the every-mode check's prompts (none observed: no bias).
// The bias outweighs the random backbone's logits, so each block proposes the chain t → f(t) →
// f(f(t)) … from the anchor t, which the target accepts wherever its greedy tokens follow their
// bigrams (τ ≈ 3 at a whole block): the walk feeds each proposal to the next row, and candidate
// k is verified at position ctx_len + 1 + k.
std::unique_ptr<DFlashDrafter> BigramDSparkDrafter(DecoderModel& target) {
  const DecoderConfig& c = target.config();
  const int64_t v = c.vocab_size;
  std::vector<std::map<int32_t, int>> follows(static_cast<size_t>(v));
  for (const auto& prompt : testing::RandomPrompts(24, v, 13)) {
    std::vector<int32_t> seq = prompt;
    const std::vector<int32_t> out =
        GreedyDecode(target, prompt, {.max_new_tokens = 20, .stop_ids = c.eos_token_ids}).value();
    seq.insert(seq.end(), out.begin(), out.end());
    for (size_t i = prompt.size(); i < seq.size(); ++i) ++follows[seq[i - 1]][seq[i]];
  }
  std::vector<float> w1(v * v, 0.0f), w2(v * v, 0.0f);
  for (int64_t t = 0; t < v; ++t) {
    w1[t * v + t] = 1.0f;
    int best = 0;
    int32_t next = -1;
    for (const auto& [token, count] : follows[t]) {
      if (count > best) best = count, next = token;
    }
    if (next >= 0) w2[next * v + t] = 40.0f;
  }
  const DFlashConfig config = testing::TestDSparkConfig(c, {.markov_rank = v}, 15);
  const std::unique_ptr<DFlashDrafter> backbone = testing::RandomDrafter(target, 11, config);
  DSparkHeadWeights heads{.markov_w1 = WeightMatrix::FromF32(std::move(w1), v, v),
                          .markov_w2 = WeightMatrix::FromF32(std::move(w2), v, v)};
  return std::make_unique<DFlashDrafter>(config, backbone->weights(), target, std::move(heads));
}

TEST(DSparkBigramEngineTest, PlantedBigramsAreAcceptedAndOutputStaysPlainDecodings) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kBF16));
  const std::unique_ptr<DFlashDrafter> drafter = BigramDSparkDrafter(target);
  testing::ExpectEveryModeEqualsPlainDecoding(target, drafter.get(), /*min_tau=*/1.5);
}

// The engine's block is the verify block W = B + 1; a draft holds B candidates per request.
TEST(DSparkEngineBlockTest, TheEnginesBlockIsBPlusOne) {
  const DecoderConfig c = testing::EngineTestTargetConfig();
  DecoderModel target(c, RandomDecoderWeights(c, 5, DType::kF32));
  const std::unique_ptr<DFlashDrafter> drafter =
      testing::RandomDrafter(target, 11, testing::TestDSparkConfig(c, {.markov_rank = 4}, 7));
  const auto engine =
      Engine::Create(target, drafter.get(), {.policy = LengthPolicy::Parse("dflash").value()});
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->block_size(), 8);
}

}  // namespace
}  // namespace dscale
