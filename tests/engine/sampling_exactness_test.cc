// Speculative sampling is exact end to end: at temperature 1 on a small vocabulary, the joint
// distribution of the first generated tokens over 20,000 seeded requests matches the target's
// exact distribution (chi-square, p > 0.001). Every token after the first comes out of
// verification steps driven by the planted-error drafter, so accepts, rejections and bonus
// samples all occur (auto's plain steps too); the Domino cases draft with a random DFlash
// drafter and head instead. Three tokens over 6 ids (216 cells) for the uniform
// policies; dscale's features need at least 16 ids, so two tokens over 16 ids (256 cells) there.
// The reduced-vocabulary cases draft with a random DFlash drafter over 16 of 18 ids: the draft
// distribution is zero outside the subset, and the two left-out ids, which the target samples,
// come out through rejections and bonus draws only.
//
// Each request asks for one token more than the law is checked on: a block holds no more rows
// than the tokens its request may still commit, so with that one token the first verification
// can propose a draft for every checked position after the first. "Accepted" counts the drafts
// that became checked tokens.
//
// --draft-sampling distribution (drafts drawn from the drafter's distribution, verified by
// speculative sampling with it) is held to the same law with random DFlash drafters (full
// vocabulary, a Domino head, a reduced vocabulary) and a random DSpark drafter whose Markov walk
// follows its draws, under dflash, fixed and (for drafters without a head) dscale lengths; and
// on the same pair at temperature 1 it accepts more drafts than argmax drafting does.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/random_checkpoint.h"
#include "planted_drafter.h"
#include "spec/chi_square.h"
#include "spec/draft_distribution.h"

namespace dscale {
namespace {

constexpr int kSamples = 20000;

// Exact probability of every sequence of `length` tokens after `prompt`, indexed in base
// `vocab` (first token most significant): products of the target's conditionals, read off one
// prefill of prompt + sequence.
std::vector<double> ExactJoint(DecoderModel& target, const std::vector<int32_t>& prompt,
                               const SamplingParams& params, int length) {
  const int64_t vocab = target.config().vocab_size;
  const auto n = static_cast<int32_t>(prompt.size());
  int64_t cells = 1;
  for (int i = 0; i < length; ++i) cells *= vocab;
  std::vector<double> joint(cells);
  std::vector<double> probs;
  for (int64_t cell = 0; cell < cells; ++cell) {
    std::vector<int32_t> sequence(length);
    for (int i = length - 1, rest = static_cast<int>(cell); i >= 0; --i, rest /= vocab) {
      sequence[i] = static_cast<int32_t>(rest % vocab);
    }
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), sequence.begin(), sequence.end());
    PagedKvCache cache(target.KvShape(16, 2));
    const int32_t seq = cache.AddSequence();
    EXPECT_TRUE(cache.Reserve(seq, n + length).ok());
    StepBatch batch;
    AddRequestRows(batch, seq, 0, tokens, cache, /*all_logits=*/true);
    ForwardOutput out;
    EXPECT_TRUE(target.Forward(batch, cache, &out).ok());
    double p = 1.0;
    for (int i = 0; i < length; ++i) {
      // The row after the request's logit rules, with the sequence's tokens before it as output.
      std::vector<float> row(out.logits.begin() + (n - 1 + i) * vocab,
                             out.logits.begin() + (n + i) * vocab);
      ApplyLogitRules(params.rules, prompt, std::span(sequence).first(i), {}, row, vocab);
      TargetDistribution(row, params, &probs);
      p *= probs[sequence[i]];
    }
    joint[cell] = p;
  }
  return joint;
}

// Which drafter proposes: the planted-error one, a random DFlash drafter (kDFlash), the same with
// a random Domino head (its proposals are the head's corrected choices), or a random DSpark
// drafter of B = 15 with an rnn Markov head of rank 5 and a confidence head reading it (kDSpark).
// kSubset / kDominoSubset: kDFlash / kDomino over a reduced draft vocabulary (all ids but 5 and
// 11).
enum class Proposer { kPlanted, kDFlash, kDomino, kSubset, kDominoSubset, kDSpark };

std::unique_ptr<DFlashDrafter> RandomDFlashProposer(const DecoderModel& target, Proposer proposer) {
  if (proposer == Proposer::kDSpark) {
    const DSparkHeadConfig heads{.markov_rank = 5,
                                 .markov_head_type = MarkovHeadType::kRnn,
                                 .confidence_head = true,
                                 .confidence_with_markov = true};
    return testing::RandomDrafter(target, 21,
                                  testing::TestDSparkConfig(target.config(), heads, 15));
  }
  const bool head = proposer == Proposer::kDomino || proposer == Proposer::kDominoSubset;
  std::unique_ptr<DFlashDrafter> drafter =
      head ? testing::RandomDominoDrafter(target, 21) : testing::RandomDrafter(target, 21);
  if (proposer == Proposer::kSubset || proposer == Proposer::kDominoSubset) {
    DraftVocab subset{.target_vocab_size = target.config().vocab_size, .token_ids = {}};
    for (int32_t id = 0; id < target.config().vocab_size; ++id) {
      if (id != 5 && id != 11) subset.token_ids.push_back(id);
    }
    drafter->RestrictVocab(std::move(subset));
  }
  return drafter;
}

struct ExactRun {
  std::string mode = "dflash";
  SamplingParams base{.temperature = 1.0f};
  int64_t vocab = 6;
  int length = 3;
  int tail = 1;  // tokens generated past the checked ones
  std::string budget = "0.5";
  Proposer proposer = Proposer::kPlanted;
  int64_t min_accepted = kSamples / 10;
  ModelFamily family = ModelFamily::kQwen3;
  DraftSampling draft_sampling = DraftSampling::kArgmax;
};

// kSamples seeded requests of `run` of length + tail tokens: their first `length` tokens must
// follow the target's exact joint law, and more than min_accepted of those tokens be accepted
// drafts. Returns the drafts accepted (every one is an output token: no block reaches past the
// output).
int64_t ExpectExact(const ExactRun& run) {
  const std::string& mode = run.mode;
  const SamplingParams& base = run.base;
  const int64_t vocab = run.vocab;
  const int length = run.length;
  const Proposer proposer = run.proposer;
  const ModelFamily family = run.family;
  DecoderConfig config = testing::EngineTestTargetConfig(vocab);
  if (family == ModelFamily::kLlama) config = testing::EngineTestLlamaConfig(vocab);
  if (family == ModelFamily::kQwen3Moe) config = testing::EngineTestMoeConfig(true, vocab);
  if (family == ModelFamily::kQwen3_5) config = testing::EngineTestHybridConfig(2, 4, vocab);
  if (family == ModelFamily::kQwen3_5Moe) config = testing::EngineTestHybridMoeConfig(vocab);
  DecoderModel target(config, RandomDecoderWeights(config, 31, DType::kF32));
  const std::vector<int32_t> prompt = {1, 4, 2, 0};
  testing::PlantedDrafter planted(target, 16, /*salt=*/13, /*error_free_share=*/0.3);
  std::unique_ptr<DFlashDrafter> random;
  if (proposer != Proposer::kPlanted) random = RandomDFlashProposer(target, proposer);
  Drafter& drafter = random ? static_cast<Drafter&>(*random) : planted;
  EngineConfig engine_config{
      .policy = LengthPolicy::Parse(mode).value(),
      .max_running = 64,
      .draft_sampling = run.draft_sampling,
      .inputs = {.verify_budget = budget::VerifyBudget::Parse(run.budget).value()}};
  // Hardware on which verified rows and drafting cost nothing, so that auto and dspark verify
  // drafts: a flat steps-per-second table, planted flat step times.
  const budget::SpsTable sps{.tokens = {1, 1024}, .steps_per_second = {100, 100}};
  if (engine_config.policy.mode == SpecMode::kDSpark) engine_config.inputs.sps_table = &sps;
  const budget::SimulatedPair free_rows{.verify_seconds = [](int64_t) { return 0.02; },
                                        .draft_seconds = [](int64_t) { return 0.0; }};
  const budget::PlantedStepTimes free_times(free_rows);
  std::optional<dvl::Predictor> predictor;
  if (engine_config.policy.UsesPredictor()) {
    predictor = testing::RandomPredictor(config.hidden_size,
                                         random ? random->draft_vocab_size() : vocab, 4);
    engine_config.inputs.predictor = &*predictor;
  }
  auto engine = Engine::Create(target, &drafter, engine_config, &free_times).value();
  for (int i = 0; i < kSamples; ++i) {
    GenerationParams params{.max_tokens = length + run.tail, .sampling = base};
    params.sampling.seed = 1000003ull * i + 7;
    EXPECT_TRUE(engine->Submit(prompt, params).ok());
  }
  EXPECT_TRUE(engine->RunToCompletion().ok());
  const std::vector<double> exact = ExactJoint(target, prompt, base, length);
  std::vector<int64_t> counts(exact.size(), 0);
  int64_t accepted_drafts = 0, checked_accepts = 0;
  for (const RequestResult& r : engine->TakeFinished()) {
    EXPECT_EQ(r.output_ids.size(), static_cast<size_t>(length + run.tail));
    if (r.output_ids.size() != static_cast<size_t>(length + run.tail)) return 0;
    int64_t cell = 0;
    for (int i = 0; i < length; ++i) cell = cell * vocab + r.output_ids[i];
    ++counts[cell];
    // Step s commits its accepted drafts at output positions produced .. produced + a − 1.
    int64_t produced = 1;  // the prefill's token
    for (int32_t a : r.accepted) {
      checked_accepts += std::clamp<int64_t>(length - produced, 0, a);
      accepted_drafts += a;
      produced += a + 1;
    }
  }
  const testing::ChiSquareResult chi = testing::ChiSquareTest(counts, exact);
  EXPECT_GT(chi.p_value, 0.001) << mode << " " << DraftSamplingName(run.draft_sampling) << ": chi2 "
                                << chi.statistic << " dof " << chi.dof;
  EXPECT_GT(checked_accepts, run.min_accepted) << "the accept path must be exercised";
  return accepted_drafts;
}

void ExpectExactSampling(const std::string& mode, const SamplingParams& base, int64_t vocab = 6,
                         int length = 3, const std::string& budget = "0.5",
                         Proposer proposer = Proposer::kPlanted,
                         int64_t min_accepted = kSamples / 10,
                         ModelFamily family = ModelFamily::kQwen3) {
  ExpectExact({.mode = mode,
               .base = base,
               .vocab = vocab,
               .length = length,
               .budget = budget,
               .proposer = proposer,
               .min_accepted = min_accepted,
               .family = family});
}

TEST(SamplingExactnessTest, DFlashAtTemperatureOne) {
  ExpectExactSampling("dflash", {.temperature = 1.0f});
}

TEST(SamplingExactnessTest, Fixed4AtTemperatureOne) {
  ExpectExactSampling("fixed:4", {.temperature = 1.0f});
}

TEST(SamplingExactnessTest, DScaleAtTemperatureOne) {
  ExpectExactSampling("dscale", {.temperature = 1.0f}, /*vocab=*/16, /*length=*/2);
}

TEST(SamplingExactnessTest, DScaleWithAutoBudgetAtTemperatureOne) {
  ExpectExactSampling("dscale", {.temperature = 1.0f}, /*vocab=*/16, /*length=*/2, "auto");
}

TEST(SamplingExactnessTest, DSparkAtTemperatureOne) {
  ExpectExactSampling("dspark", {.temperature = 1.0f}, /*vocab=*/16, /*length=*/2);
}

TEST(SamplingExactnessTest, DominoHeadAtTemperatureOne) {
  ExpectExactSampling("dflash", {.temperature = 1.0f}, 6, 3, "0.5", Proposer::kDomino);
}

// A random drafter's proposals are tokens the random target rarely samples at temperature 1
// (11 accepts in 20,000 requests); at temperature 4 the target's distribution is flat enough
// that drafts are accepted (about 1,100 times with dflash, 300 with dscale's half budget), and
// the accept path is required 200 times.
TEST(SamplingExactnessTest, ReducedDraftVocabularyAtTemperatureFour) {
  ExpectExactSampling("dflash", {.temperature = 4.0f}, /*vocab=*/18, /*length=*/2, "0.5",
                      Proposer::kSubset, /*min_accepted=*/200);
}

TEST(SamplingExactnessTest, ReducedDraftVocabularyWithDScaleAndADominoHead) {
  ExpectExactSampling("dscale", {.temperature = 4.0f}, /*vocab=*/18, /*length=*/2, "0.5",
                      Proposer::kDominoSubset, /*min_accepted=*/200);
}

// A Llama target (no q/k norms, llama3 RoPE) under the planted drafter and a random DFlash one.
TEST(SamplingExactnessTest, LlamaTargetWithDFlashAtTemperatureOne) {
  ExpectExactSampling("dflash", {.temperature = 1.0f}, 6, 3, "0.5", Proposer::kPlanted,
                      kSamples / 10, ModelFamily::kLlama);
}

TEST(SamplingExactnessTest, LlamaTargetWithDScaleAndARandomDrafterAtTemperatureFour) {
  ExpectExactSampling("dscale", {.temperature = 4.0f}, /*vocab=*/18, /*length=*/2, "0.5",
                      Proposer::kSubset, /*min_accepted=*/200, ModelFamily::kLlama);
}

// A Qwen3-MoE target (sparse and dense layers) under the planted drafter.
TEST(SamplingExactnessTest, Qwen3MoeTargetWithDFlashAtTemperatureOne) {
  ExpectExactSampling("dflash", {.temperature = 1.0f}, 6, 3, "0.5", Proposer::kPlanted,
                      kSamples / 10, ModelFamily::kQwen3Moe);
}

// A Qwen3.5 hybrid target (Gated DeltaNet layers whose recurrent state each commit replays to the
// accepted rows) under the planted drafter: whole blocks, and DScale's half budget. A state left
// at a rejected draft would bias the next token's law.
TEST(SamplingExactnessTest, Qwen3_5HybridTargetWithDFlashAtTemperatureOne) {
  ExpectExactSampling("dflash", {.temperature = 1.0f}, 6, 3, "0.5", Proposer::kPlanted,
                      kSamples / 10, ModelFamily::kQwen3_5);
}

TEST(SamplingExactnessTest, Qwen3_5HybridTargetWithDScaleAtTemperatureOne) {
  ExpectExactSampling("dscale", {.temperature = 1.0f}, /*vocab=*/16, /*length=*/2, "0.5",
                      Proposer::kPlanted, kSamples / 10, ModelFamily::kQwen3_5);
}

// A Qwen3.5 mixture of experts (the hybrid's layers, experts and a shared expert in every MLP).
TEST(SamplingExactnessTest, Qwen3_5MoeHybridTargetWithDScaleAtTemperatureOne) {
  ExpectExactSampling("dscale", {.temperature = 1.0f}, /*vocab=*/16, /*length=*/2, "0.5",
                      Proposer::kPlanted, kSamples / 10, ModelFamily::kQwen3_5Moe);
}

TEST(SamplingExactnessTest, DFlashWithTopKAndTopP) {
  ExpectExactSampling("dflash", {.temperature = 0.8f, .top_k = 4, .top_p = 0.9f});
}

// --draft-sampling distribution on the same pairs as argmax drafting, at temperature 1: both
// exact, and the drafts drawn from the drafter's distribution are accepted more often (Σ min(P, Q)
// per draft against P(argmax Q)). The counts are printed for the record.
// `run`'s draft_sampling and min_accepted are the distribution run's; the argmax run need accept
// none.
void ExpectDistributionAcceptsMore(ExactRun run) {
  run.draft_sampling = DraftSampling::kDistribution;
  const int64_t distribution = ExpectExact(run);
  run.draft_sampling = DraftSampling::kArgmax;
  run.min_accepted = -1;
  const int64_t argmax = ExpectExact(run);
  std::printf("accepted drafts in %d requests, %s, vocab %lld: argmax %lld, distribution %lld\n",
              kSamples, run.mode.c_str(), static_cast<long long>(run.vocab),
              static_cast<long long>(argmax), static_cast<long long>(distribution));
  EXPECT_GT(distribution, argmax);
}

TEST(SamplingExactnessTest, DistributionDraftingWithDFlashAcceptsMoreThanArgmax) {
  ExpectDistributionAcceptsMore({.mode = "dflash", .proposer = Proposer::kDFlash});
}

TEST(SamplingExactnessTest, DistributionDraftingWithADominoHeadAcceptsMoreThanArgmax) {
  ExpectDistributionAcceptsMore({.mode = "dflash", .proposer = Proposer::kDomino});
}

// The DSpark drafter's walk draws each proposal and feeds it to the next row's Markov bias. Its
// argmax walk accepts more at the first two positions (19,600 against 18,400 drafts), its draws
// more over the whole six-row block, which the requests' tail lets the first step verify.
TEST(SamplingExactnessTest, DistributionDraftingWithADSparkDrafterAcceptsMoreThanArgmax) {
  ExpectDistributionAcceptsMore({.mode = "fixed:6", .tail = 4, .proposer = Proposer::kDSpark});
}

// DSpark as published: its drafter's walk draws the proposals, its confidence head (reading the
// draws before each draft) ranks them, and DSpark's walk with early stop takes them (about 1,800
// of the second tokens are accepted drafts).
TEST(SamplingExactnessTest, DistributionDraftingWithDSparksDrafterUnderItsScheduler) {
  ExpectExact({.mode = "dspark",
               .vocab = 16,
               .length = 2,
               .proposer = Proposer::kDSpark,
               .min_accepted = kSamples / 20,
               .draft_sampling = DraftSampling::kDistribution});
}

// (about 1,700 drafts accepted in 20,000 requests)
TEST(SamplingExactnessTest, DSparksDrafterUnderItsSchedulerWithArgmaxDrafts) {
  ExpectExact({.mode = "dspark",
               .vocab = 16,
               .length = 2,
               .proposer = Proposer::kDSpark,
               .min_accepted = kSamples / 20});
}

// Q is zero outside the subset: ids 5 and 11 come out through residual and bonus draws only.
// The random drafter's argmax is a token the target rarely samples at temperature 1 (above);
// its distribution overlaps the target's far more.
TEST(SamplingExactnessTest, DistributionDraftingOverAReducedVocabularyAcceptsMoreThanArgmax) {
  ExpectDistributionAcceptsMore({.mode = "dflash",
                                 .vocab = 18,
                                 .length = 2,
                                 .proposer = Proposer::kSubset,
                                 .min_accepted = kSamples / 20});
}

// dscale's lengths read a plain DFlash drafter's rows, which its draws do not change.
TEST(SamplingExactnessTest, DistributionDraftingWithDScale) {
  ExpectExact({.mode = "dscale",
               .vocab = 16,
               .length = 2,
               .proposer = Proposer::kDFlash,
               .draft_sampling = DraftSampling::kDistribution});
}

TEST(SamplingExactnessTest, DistributionDraftingOverAReducedVocabularyWithADominoHead) {
  ExpectExact({.mode = "fixed:4",
               .vocab = 18,
               .length = 2,
               .proposer = Proposer::kDominoSubset,
               .min_accepted = kSamples / 20,
               .draft_sampling = DraftSampling::kDistribution});
}

// The logit rules and min_p: P after a bias and the three penalties, each row counting the drafts
// before it as output; drafts argmax (the planted drafter) or drawn from the drafter's
// unpenalised Q.
const SamplingParams kRuled{.temperature = 1.0f,
                            .min_p = 0.05f,
                            .rules = {.logit_bias = {{2, 1.0f}},
                                      .presence_penalty = 0.7f,
                                      .frequency_penalty = 0.4f,
                                      .repetition_penalty = 1.5f}};

TEST(SamplingExactnessTest, DFlashWithLogitRulesAndMinP) { ExpectExactSampling("dflash", kRuled); }

TEST(SamplingExactnessTest, DistributionDraftingWithLogitRulesAndMinP) {
  ExpectExact({.mode = "dflash",
               .base = kRuled,
               .proposer = Proposer::kDFlash,
               .min_accepted = kSamples / 20,
               .draft_sampling = DraftSampling::kDistribution});
}

// P with top-k and top-p, Q unfiltered: drafts outside P's support are always rejected.
TEST(SamplingExactnessTest, DistributionDraftingWithTopKAndTopP) {
  ExpectExact({.mode = "dflash",
               .base = {.temperature = 0.8f, .top_k = 4, .top_p = 0.9f},
               .proposer = Proposer::kDFlash,
               .min_accepted = kSamples / 20,
               .draft_sampling = DraftSampling::kDistribution});
}

}  // namespace
}  // namespace dscale
