// Speculation over a reduced draft vocabulary stays lossless: greedy output equals plain
// decoding under the dflash and dscale policies, with and without a Domino head. The subset only
// changes which tokens are proposed; acceptance compares each proposal with the target's own
// choice, and a token outside the subset still comes out as the target's next token.

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/greedy_decode.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::RandomPrompts;
using testing::RunPrompts;

class DraftVocabEngineTest : public testing::EngineFixture {
 protected:
  // Two thirds of the target's ids (EOS among them): the drafts never propose the others, which
  // the target still emits.
  DraftVocab TwoThirds() const {
    DraftVocab subset{.target_vocab_size = target_.config().vocab_size, .token_ids = {}};
    for (int32_t id = 0; id < target_.config().vocab_size; ++id) {
      const bool eos =
          std::find(target_.config().eos_token_ids.begin(), target_.config().eos_token_ids.end(),
                    id) != target_.config().eos_token_ids.end();
      if (eos || id % 3 != 1) subset.token_ids.push_back(id);
    }
    return subset;
  }

  void ExpectPlainGreedyOutput(DFlashDrafter& drafter) {
    const auto prompts = RandomPrompts(32, target_.config().vocab_size, 17);
    const GenerationParams params{.max_tokens = 24, .stop_ids = target_.config().eos_token_ids};
    const dvl::Predictor predictor = testing::RandomPredictor(
        target_.config().hidden_size, drafter.draft_vocab_size(), /*seed=*/3);
    int outside_subset = 0;  // committed tokens the drafts could not have proposed
    for (const std::string mode : {"dflash", "dscale"}) {
      for (const int32_t c : {1, 16}) {
        const EngineConfig config{.policy = LengthPolicy::Parse(mode).value(),
                                  .max_running = c,
                                  .inputs = {.predictor = &predictor}};
        const EngineRun run = RunPrompts(target_, &drafter, config, prompts, params);
        for (size_t i = 0; i < prompts.size(); ++i) {
          const std::vector<int32_t> want =
              GreedyDecode(target_, prompts[i],
                           {.max_new_tokens = 24, .stop_ids = target_.config().eos_token_ids})
                  .value();
          EXPECT_EQ(testing::FirstDifference(run.outputs[i], want), "") << mode << " c=" << c;
          for (int32_t t : run.outputs[i]) outside_subset += t % 3 == 1 ? 1 : 0;
        }
        EXPECT_EQ(run.free_pages_after, run.total_pages) << mode << " c=" << c;
      }
    }
    EXPECT_GT(outside_subset, 0) << "the outputs must hold tokens the drafts cannot propose";
  }
};

TEST_F(DraftVocabEngineTest, GreedyOutputEqualsPlainDecodingOverASubset) {
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDrafter(target_, 9);
  drafter->RestrictVocab(TwoThirds());
  ExpectPlainGreedyOutput(*drafter);
}

TEST_F(DraftVocabEngineTest, GreedyOutputEqualsPlainDecodingOverASubsetWithADominoHead) {
  std::unique_ptr<DFlashDrafter> drafter = testing::RandomDominoDrafter(target_, 9);
  drafter->RestrictVocab(TwoThirds());
  ExpectPlainGreedyOutput(*drafter);
}

}  // namespace
}  // namespace dscale
