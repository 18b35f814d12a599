// Greedy generation through the engine with every length policy, small pair against inflated
// pair: the same tokens, the same drafts at every step and so the same accepted counts, on the
// bundled trained pair (GSM8K questions in Qwen3's chat format) with both its drafters, on random
// pairs (a Llama one, and one inflated to a mixture of experts), and on random DSpark pairs with
// every kind of head.

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "../engine/engine_test_util.h"
#include "inflate/inflate_predictor.h"
#include "inflate_test_util.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale {
namespace {

using test_util::ScopedTempDir;
using testing::PairDirs;

// One run's outputs, and per request the draft candidates of every step with the top-two gap of
// each candidate's logits (read through StepRecord).
struct Run {
  std::vector<std::vector<int32_t>> outputs;
  std::vector<std::vector<int32_t>> accepted;
  std::vector<std::vector<std::vector<int32_t>>> drafts;  // [request][step][candidate]
  std::vector<std::vector<std::vector<float>>> gaps;      // same shape
  double tau = 0.0;
};

Run Generate(DecoderModel& target, DFlashDrafter* drafter, const std::string& policy,
             const dvl::Predictor* predictor, const std::vector<std::vector<int32_t>>& prompts,
             int32_t concurrency) {
  Run run;
  run.drafts.resize(prompts.size());
  run.gaps.resize(prompts.size());
  std::map<RequestId, size_t> order;
  const int64_t vocab = target.config().vocab_size;
  EngineConfig config{.policy = LengthPolicy::Parse(policy).value(),
                      .max_running = concurrency,
                      .inputs = {.predictor = predictor}};
  config.on_step = [&](const StepRecord& step) {
    if (step.drafts == nullptr) return;
    const int32_t candidates = step.drafts->candidates;
    for (size_t i = 0; i < step.ids.size(); ++i) {
      const size_t p = order.at(step.ids[i]);
      const int32_t* tokens = step.drafts->tokens.data() + i * candidates;
      run.drafts[p].emplace_back(tokens, tokens + candidates);
      std::vector<float>& gaps = run.gaps[p].emplace_back();
      for (int32_t j = 0; j < candidates; ++j) {
        gaps.push_back(
            testing::TopGap(step.drafts->logits.data() + (i * candidates + j) * vocab, vocab));
      }
    }
  };
  Result<std::unique_ptr<Engine>> engine = Engine::Create(target, drafter, config);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return run;
  const GenerationParams params{.max_tokens = 32, .stop_ids = target.config().eos_token_ids};
  for (size_t i = 0; i < prompts.size(); ++i)
    order[(*engine)->Submit(prompts[i], params).value()] = i;
  EXPECT_TRUE((*engine)->RunToCompletion().ok());
  run.outputs.resize(prompts.size());
  run.accepted.resize(prompts.size());
  for (RequestResult& r : (*engine)->TakeFinished()) {
    run.outputs[order.at(r.id)] = r.output_ids;
    run.accepted[order.at(r.id)] = r.accepted;
  }
  run.tau = (*engine)->stats().tau();
  return run;
}

struct Pair {
  std::unique_ptr<DecoderModel> target;
  std::unique_ptr<DFlashDrafter> drafter;
};

Pair LoadPair(const PairDirs& dirs) {
  Pair p;
  p.target = std::make_unique<DecoderModel>(DecoderModel::Load(dirs.target).value());
  p.drafter = std::make_unique<DFlashDrafter>(DFlashDrafter::Load(dirs.drafter, *p.target).value());
  return p;
}

// Every request's tokens equal, or parting at a float-noise tie of the small target; its drafts
// equal at every step, or parting at a float-noise tie of the small drafter; where neither
// parted, its accepted counts equal (they follow from the drafts and the tokens). `exact_rows`:
// the policy verifies a fixed number of rows (not dscale, whose lengths follow predictor scores).
// At most `max_excused` requests may part at ties.
void ExpectSameGeneration(const Pair& small, const Run& a, const Pair& large, const Run& b,
                          const std::vector<std::vector<int32_t>>& prompts, bool exact_rows,
                          int max_excused, const std::string& what) {
  const int64_t context = 256;
  const KvDtype kv = KvDtype::kBf16;  // the engine's default K/V cache
  const float tie = testing::GreedyTieTolerance(
      testing::TargetPairBounds(*small.target, *large.target, context, kv));
  const float draft_tie = testing::GreedyTieTolerance(testing::DraftPairBounds(
      *small.drafter, *small.target, *large.drafter, *large.target, context, kv));
  int excused = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    int ties = 0;
    const bool same_tokens = testing::SameGreedyOutputUpToTies(
        *small.target, prompts[i], b.outputs[i], a.outputs[i], &ties, tie);
    bool same_drafts = true;
    for (size_t s = 0; same_drafts && s < std::min(a.drafts[i].size(), b.drafts[i].size()); ++s) {
      for (size_t j = 0; j < a.drafts[i][s].size(); ++j) {
        if (a.drafts[i][s][j] == b.drafts[i][s][j]) continue;
        EXPECT_LE(a.gaps[i][s][j], draft_tie)
            << what << ": request " << i << " step " << s << " candidate " << j
            << " differs where the small drafter's top two logits are not tied";
        same_drafts = false;
        break;
      }
    }
    if (same_tokens && same_drafts && exact_rows) {
      EXPECT_EQ(b.accepted[i], a.accepted[i]) << what << ": request " << i;
    }
    excused += !(same_tokens && same_drafts);
  }
  EXPECT_LE(excused, max_excused) << what;
  if (excused == 0 && exact_rows) {
    EXPECT_EQ(b.tau, a.tau) << what;
  }
}

void CompareAllPolicies(const Pair& small, const Pair& large, const dvl::Predictor& small_predictor,
                        const dvl::Predictor& large_predictor,
                        const std::vector<std::vector<int32_t>>& prompts, int max_excused,
                        const std::string& what) {
  for (const char* policy : {"none", "dflash", "fixed:6", "dscale"}) {
    const bool dscale = std::string(policy) == "dscale";
    for (const int32_t c : {1, 4}) {
      const std::string where = what + " " + policy + " c=" + std::to_string(c);
      const Run a = Generate(*small.target, small.drafter.get(), policy,
                             dscale ? &small_predictor : nullptr, prompts, c);
      const Run b = Generate(*large.target, large.drafter.get(), policy,
                             dscale ? &large_predictor : nullptr, prompts, c);
      ExpectSameGeneration(small, a, large, b, prompts, !dscale, max_excused, where);
      if (std::string(policy) == "dflash" && c == 1) {
        std::printf("%s: tau %.4f small, %.4f inflated\n", what.c_str(), a.tau, b.tau);
      }
    }
  }
}

std::vector<std::vector<int32_t>> Gsm8kPrompts(const Tokenizer& tokenizer, int count) {
  std::ifstream file(std::string(DSCALE_DATA_DIR) + "/gsm8k/test.jsonl");
  std::vector<std::vector<int32_t>> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < count && std::getline(file, line)) {
    const std::string question = nlohmann::json::parse(line)["question"];
    const std::vector<ChatMessage> messages = {{.role = "user", .content = question}};
    prompts.push_back(tokenizer.Encode(ApplyQwen3ChatTemplate(messages).value()).value());
  }
  EXPECT_EQ(static_cast<int>(prompts.size()), count);
  return prompts;
}

// The bundled target's trained acceptance survives inflation to a shape with every kind of
// change, for both its drafters inflated beside each other: the DFlash one (ids 1, 3, 5, 7) places
// the target's layers, and the DSpark one (ids 1, 3, 5, 6) reads the layers they went to.
TEST(InflateGenerationTest, BundledPairEveryPolicy) {
  const std::string models = DSCALE_MODELS_DIR;
  const PairDirs source{models + "/tiny-target", models + "/tiny-dflash"};
  const PairDirs dspark_source{source.target, models + "/tiny-dspark"};
  ScopedTempDir dir;
  const PairDirs out{dir.File("target"), dir.File("drafter")};
  const PairDirs dspark_out{out.target, dir.File("dspark")};
  const InflateShape shape{.hidden_size = 512,
                           .intermediate_size = 1088,
                           .num_hidden_layers = 11,
                           .num_attention_heads = 8,
                           .num_key_value_heads = 4,
                           .head_dim = 128,
                           .vocab_size = 4224,
                           .tie_word_embeddings = false,
                           .draft_layers = 3};
  Result<InflateResult> result =
      Inflate({.target_dir = source.target,
               .drafters = {{.source = source.drafter, .out = out.drafter},
                            {.source = dspark_source.drafter, .out = dspark_out.drafter}},
               .shape = shape,
               .out_target = out.target});
  ASSERT_TRUE(result.ok()) << result.status().message();
  // At 11 layers the DFlash ids 1, 3, 5, 7 become 1, 3, 6, 8 (small layer 4 goes to 5, layer 6 to
  // 7), so the DSpark drafter's layer 6 is read at 7.
  EXPECT_EQ(result->drafters[0].plan.large_drafter.target_layer_ids,
            (std::vector<int32_t>{1, 3, 6, 8}));
  EXPECT_EQ(result->drafters[1].plan.large_drafter.target_layer_ids,
            (std::vector<int32_t>{1, 3, 6, 7}));
  const Tokenizer tokenizer = Tokenizer::Load(source.target).value();
  const std::vector<std::vector<int32_t>> prompts = Gsm8kPrompts(tokenizer, 3);
  for (const auto& [from, to, what] : {std::tuple{source, out, "bundled"},
                                       std::tuple{dspark_source, dspark_out, "bundled dspark"}}) {
    const Pair small = LoadPair(from);
    const Pair large = LoadPair(to);
    const dvl::Predictor small_predictor =
        dvl::Predictor::Load(from.drafter + "/predictor.bin").value();
    const dvl::Predictor large_predictor =
        dvl::Predictor::Load(to.drafter + "/predictor.bin",
                             {.hidden_size = 512, .vocab_size = 4224})
            .value();
    CompareAllPolicies(small, large, small_predictor, large_predictor, prompts,
                       /*max_excused=*/1, what);
  }
}

// A random drafter's top two logits often lie within float noise of each other (the random Llama
// pair's drafts part at gaps of 8.4e-4 and 5.7e-6 at c = 4 on an AVX2-only CPU, whose 8-lane tiles
// sum in another order than AVX-512's), so two of a random pair's six requests may part at ties;
// each parting is still checked against the stated bound.
constexpr int kRandomPairMaxExcused = 2;

// The random pairs' large shape (EngineTestTargetConfig's pair inflated in every dimension).
InflateShape RandomPairShape() {
  return {.hidden_size = 96,
          .intermediate_size = 128,
          .num_hidden_layers = 5,
          .num_attention_heads = 8,
          .num_key_value_heads = 4,
          .head_dim = 32,
          .vocab_size = 150,
          .tie_word_embeddings = false,
          .draft_layers = 3};
}

// A random pair of `config` (weights seeded by `seed`, BF16; a random predictor) inflated to
// `shape`, on six random prompts of first_length + 7·i tokens: every policy generates as the
// source does, and on the inflated pair greedy speculation generates what plain decoding does at
// c = 1 and 4. `check` looks at the inflated pair first.
void ExpectRandomPairInflates(const DecoderConfig& config, uint64_t seed, const InflateShape& shape,
                              int32_t first_length, const std::string& what,
                              const std::function<void(const Pair& large)>& check) {
  ScopedTempDir dir;
  const PairDirs source = testing::WriteRandomPair(dir.File("small"), config, seed, DType::kBF16);
  const PairDirs out{dir.File("target"), dir.File("drafter")};
  Result<InflateResult> result = testing::InflatePair(source, out, shape);
  ASSERT_TRUE(result.ok()) << what << ": " << result.status().message();
  const Pair small = LoadPair(source);
  const Pair large = LoadPair(out);
  check(large);
  const dvl::Predictor small_predictor = testing::RandomPredictor(64, 131, 3);
  const dvl::Predictor large_predictor = InflatePredictor(small_predictor, result->plan()).value();
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 1; i <= 6; ++i) {
    prompts.push_back(testing::RandomTokens(static_cast<int32_t>(first_length + 7 * i), 129, i));
  }
  CompareAllPolicies(small, large, small_predictor, large_predictor, prompts, kRandomPairMaxExcused,
                     what);
  const auto plain = Generate(*large.target, nullptr, "none", nullptr, prompts, 1);
  for (const int32_t c : {1, 4}) {
    const auto spec = Generate(*large.target, large.drafter.get(), "dflash", nullptr, prompts, c);
    EXPECT_EQ(testing::FirstDifference(spec.outputs, plain.outputs), "") << what << " c=" << c;
  }
}

// A random pair (which accepts almost nothing) with a random predictor, inflated in every
// dimension; its prompts are random tokens.
TEST(InflateGenerationTest, RandomPairEveryPolicy) {
  ExpectRandomPairInflates(testing::EngineTestTargetConfig(), 5, RandomPairShape(), 5, "random",
                           [](const Pair&) {});
}

// A random dense pair inflated to a mixture of experts (16 experts of 32 routed in groups of 4,
// each member a quarter of the source's 96 MLP units; two identity layers with real routers):
// every policy generates as the source does, and on the sparse pair greedy speculation generates
// what plain decoding does.
TEST(InflateGenerationTest, RandomPairToAMixtureOfExperts) {
  InflateShape shape = RandomPairShape();
  shape.moe = {.num_experts = 16,
               .experts_per_token = 4,
               .expert_intermediate_size = 32,
               .norm_topk_prob = true};
  ExpectRandomPairInflates(testing::EngineTestTargetConfig(), 5, shape, 5, "moe",
                           [](const Pair& large) {
                             EXPECT_EQ(large.target->config().family, ModelFamily::kQwen3Moe);
                             EXPECT_TRUE(large.target->config().IsSparseLayer(4));
                           });
}

// Random DSpark pairs (B = 7, rank 5) with every kind of head (EveryDSparkHeadKind), inflated in
// every dimension: greedy speculation with whole blocks (dflash) and with fixed:5 at c = 1 and 4
// drafts the same proposals at every step and commits the same tokens and accepted counts, with
// no request excused.
TEST(InflateGenerationTest, RandomDSparkPairsEveryHead) {
  ScopedTempDir dir;
  const DecoderConfig config = testing::EngineTestTargetConfig();
  const InflateShape shape = RandomPairShape();
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    prompts.push_back(testing::RandomTokens(static_cast<int32_t>(5 + 7 * seed), 129, seed));
  }
  uint64_t seed = 13;
  for (const DSparkHeadConfig& heads : testing::EveryDSparkHeadKind(5)) {
    const std::string what = "dspark, " + testing::DescribeHeads(heads);
    const std::string name = "dspark-" + std::to_string(seed);
    const PairDirs source = testing::WriteRandomDSparkPair(
        dir.File(name), config, testing::TestDSparkConfig(config, heads, 7), seed, DType::kBF16);
    seed += 2;
    const PairDirs out{dir.File(name + "-target"), dir.File(name + "-drafter")};
    Result<InflateResult> result = testing::InflatePair(source, out, shape);
    ASSERT_TRUE(result.ok()) << what << ": " << result.status().message();
    const Pair small = LoadPair(source);
    const Pair large = LoadPair(out);
    for (const char* policy : {"dflash", "fixed:5"}) {
      for (const int32_t c : {1, 4}) {
        const std::string where = what + " " + policy + " c=" + std::to_string(c);
        const auto a = Generate(*small.target, small.drafter.get(), policy, nullptr, prompts, c);
        const auto b = Generate(*large.target, large.drafter.get(), policy, nullptr, prompts, c);
        ExpectSameGeneration(small, a, large, b, prompts, /*exact_rows=*/true,
                             /*max_excused=*/0, where);
        if (std::string(policy) == "dflash" && c == 1) {
          std::printf("%s: tau %.4f small, %.4f inflated\n", what.c_str(), a.tau, b.tau);
        }
      }
    }
  }
}

// A random Llama 3 pair (no q/k norms, llama3 RoPE scaling; EngineTestLlamaConfig) inflated to a
// Llama-like shape whose head dim doubles (16 → 32: the attention scale goes on q_proj as √2, in
// F32): every policy generates as the source does, and on the inflated pair greedy speculation
// generates what plain decoding does.
TEST(InflateGenerationTest, RandomLlamaPairEveryPolicy) {
  const DecoderConfig config = testing::EngineTestLlamaConfig();
  // Prompts past the original context of 48 positions, where the scaling matters.
  ExpectRandomPairInflates(config, 7,
                           {.hidden_size = 128,
                            .intermediate_size = 160,
                            .num_hidden_layers = 5,
                            .num_attention_heads = 8,
                            .num_key_value_heads = 2,
                            .head_dim = 32,
                            .vocab_size = 150,
                            .tie_word_embeddings = false,
                            .draft_layers = 3,
                            .family = ModelFamily::kLlama},
                           20, "llama", [&](const Pair& large) {
                             EXPECT_EQ(large.target->config().family, ModelFamily::kLlama);
                             EXPECT_EQ(large.target->config().rope_scaling, config.rope_scaling);
                             EXPECT_EQ(large.drafter->config().draft.rope_scaling,
                                       config.rope_scaling);
                           });
}

}  // namespace
}  // namespace dscale
