// Logit rules (spec/logit_rules.h: logit_bias, presence, frequency and repetition penalties,
// min_tokens, JSON mode)
// through the engine: plain decoding with them equals a reference that applies them after one
// plain forward over the prompt and the output so far, and every length policy at c = 1 and 16
// commits plain decoding's tokens, greedy and sampled — the drafts a row follows count as its
// output, and the planted drafter, which drafts the target's unpenalised greedy continuation, has
// drafts both accepted and rejected.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "budget/sps_table.h"
#include "budget/verify_budget.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "planted_drafter.h"
#include "spec/json_token_mask.h"
#include "support/json_schema_check.h"

namespace dscale {
namespace {

using testing::EngineRun;
using testing::FirstDifference;
using testing::PlantedDrafter;
using testing::RandomPrompts;
using testing::RunPrompts;

using LogitRulesEngineTest = testing::EngineFixture;

constexpr int32_t kMaxTokens = 20;

// Every rule at once, strong enough to change most outputs of the tiny target.
LogitRules StrongRules(int64_t vocab) {
  return {.logit_bias = {{3, 1.5f}, {static_cast<int32_t>(vocab / 2), -100.0f}},
          .presence_penalty = 0.8f,
          .frequency_penalty = 0.6f,
          .repetition_penalty = 1.4f};
}

// Greedy decoding with `rules`, one plain forward over the whole context per token.
std::vector<int32_t> ReferenceGreedy(TargetModel& target, const std::vector<int32_t>& prompt,
                                     const LogitRules& rules, const std::vector<int64_t>& stops) {
  const int64_t vocab = target.config().vocab_size;
  std::vector<int32_t> context = prompt, output;
  while (static_cast<int32_t>(output.size()) < kMaxTokens) {
    std::vector<float> logits = testing::NextTokenLogits(target, context);
    ApplyLogitRules(rules, prompt, output, {}, logits, vocab);
    HoldBackStopIds(rules, static_cast<int64_t>(output.size()), stops, logits, vocab);
    CloseReasoningAtBudget(rules, output, {}, logits, vocab);
    // The lowest id among ties, as the engine's argmax.
    const auto next = static_cast<int32_t>(std::ranges::max_element(logits) - logits.begin());
    output.push_back(next);
    context.push_back(next);
    if (std::ranges::find(stops, next) != stops.end()) break;
  }
  return output;
}

struct Mode {
  const char* spec;
  const char* budget;
  bool drafts;
};

// Every policy's outputs at c = 1 and 16 for `params`, with the first (none at c = 1) returned
// for the caller to check; the others must equal it token for token.
std::vector<std::vector<int32_t>> ExpectEveryModeAgrees(
    DecoderModel& target, const dvl::Predictor& predictor, const GenerationParams& params,
    const std::vector<std::vector<int32_t>>& prompts,
    std::function<std::string_view(int32_t)> token_text = {}) {
  PlantedDrafter planted(target, 16, /*salt=*/31);
  const budget::SpsTable sps = {.tokens = {1, 16, 64, 512}, .steps_per_second = {500, 200, 60, 8}};
  const Mode modes[] = {{"none", "0.5", false},  {"dflash", "0.5", true},  {"fixed:4", "0.5", true},
                        {"dscale", "0.5", true}, {"dscale", "auto", true}, {"dspark", "0.5", true}};
  std::vector<std::vector<int32_t>> plain;
  int64_t accepted = 0;
  for (const Mode& mode : modes) {
    for (const int32_t concurrency : {1, 16}) {
      SCOPED_TRACE(::testing::Message() << mode.spec << " " << mode.budget << " c=" << concurrency);
      EngineConfig config{
          .policy = LengthPolicy::Parse(mode.spec).value(),
          .max_running = concurrency,
          .inputs = {.predictor = &predictor,
                     .verify_budget = budget::VerifyBudget::Parse(mode.budget).value()}};
      if (config.policy.UsesSpsTable()) config.inputs.sps_table = &sps;
      config.token_text = token_text;
      const EngineRun run =
          RunPrompts(target, mode.drafts ? &planted : nullptr, config, prompts, params);
      if (plain.empty()) {
        plain = run.outputs;
      } else {
        EXPECT_EQ(FirstDifference(run.outputs, plain), "");
      }
      for (const RequestResult& r : run.results) {
        for (const int32_t a : r.accepted) accepted += a;
      }
    }
  }
  EXPECT_GT(accepted, 0) << "some drafts are accepted under the rules";
  return plain;
}

TEST_F(LogitRulesEngineTest, GreedyOutputIsTheReferencesInEveryModeAndConcurrency) {
  const DecoderConfig& c = target_.config();
  const auto prompts = RandomPrompts(16, c.vocab_size, 41);
  const LogitRules rules = StrongRules(c.vocab_size);
  const GenerationParams params{
      .max_tokens = kMaxTokens, .sampling = {.rules = rules}, .stop_ids = c.eos_token_ids};
  const std::vector<std::vector<int32_t>> plain =
      ExpectEveryModeAgrees(target_, predictor_, params, prompts);
  int changed = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> want = ReferenceGreedy(target_, prompts[i], rules, c.eos_token_ids);
    EXPECT_EQ(FirstDifference(plain[i], want), "") << "prompt " << i;
    changed += ReferenceGreedy(target_, prompts[i], {}, c.eos_token_ids) != want;
    // The banned token never comes out; the biased one often does.
    EXPECT_EQ(std::ranges::count(plain[i], static_cast<int32_t>(c.vocab_size / 2)), 0);
  }
  EXPECT_GT(changed, static_cast<int>(prompts.size()) / 2) << "the rules change the outputs";
}

// min_tokens against a stop id the target often says early: no output ends before 8 tokens,
// some end at the stop after them, plain decoding is the reference's and every mode plain's.
TEST_F(LogitRulesEngineTest, MinTokensHoldsStopIdsBack) {
  const DecoderConfig& c = target_.config();
  const auto prompts = RandomPrompts(16, c.vocab_size, 47);
  // The token plain greedy decoding says most often in the first four positions.
  std::vector<int32_t> counts(c.vocab_size, 0);
  for (const auto& prompt : prompts) {
    const std::vector<int32_t> out = ReferenceGreedy(target_, prompt, {}, {});
    for (size_t i = 0; i < 4; ++i) ++counts[out[i]];
  }
  const auto stop = static_cast<int64_t>(std::ranges::max_element(counts) - counts.begin());
  const GenerationParams params{
      .max_tokens = kMaxTokens, .sampling = {.rules = {.min_tokens = 8}}, .stop_ids = {stop}};
  const std::vector<std::vector<int32_t>> plain =
      ExpectEveryModeAgrees(target_, predictor_, params, prompts);
  int ended_at_stop = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(FirstDifference(plain[i], ReferenceGreedy(target_, prompts[i], params.sampling.rules,
                                                        params.stop_ids)),
              "")
        << "prompt " << i;
    EXPECT_GE(plain[i].size(), 8u);
    ended_at_stop += plain[i].size() < static_cast<size_t>(kMaxTokens);
  }
  EXPECT_GT(ended_at_stop, 0) << "the stop id still ends outputs after min_tokens";
}

// A thinking budget of 6 (token 7 standing for "</think>"): plain decoding is the reference's,
// every mode plain's, greedy and sampled, the closing token comes by position 6 in every output
// that long, and the rule forced it there in some.
TEST_F(LogitRulesEngineTest, AThinkingBudgetClosesTheBlockInEveryMode) {
  const DecoderConfig& c = target_.config();
  const auto prompts = RandomPrompts(16, c.vocab_size, 53);
  constexpr int32_t kClose = 7, kBudget = 6;
  GenerationParams params{
      .max_tokens = kMaxTokens,
      .sampling = {.rules = {.reasoning_budget = kBudget, .reasoning_close_token = kClose}},
      .stop_ids = c.eos_token_ids};
  int forced = 0;
  for (const bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    if (sampled) {
      params.sampling.temperature = 0.9f;
      params.sampling.seed = 29;
    }
    const std::vector<std::vector<int32_t>> plain =
        ExpectEveryModeAgrees(target_, predictor_, params, prompts);
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (!sampled) {
        EXPECT_EQ(
            FirstDifference(plain[i], ReferenceGreedy(target_, prompts[i], params.sampling.rules,
                                                      params.stop_ids)),
            "")
            << "prompt " << i;
      }
      if (plain[i].size() <= kBudget) continue;
      const auto at = std::ranges::find(plain[i], kClose) - plain[i].begin();
      EXPECT_LE(at, kBudget) << "prompt " << i;
      forced += at == kBudget;
    }
  }
  EXPECT_GT(forced, 0) << "the budget closed some blocks";
}

TEST_F(LogitRulesEngineTest, SampledOutputIsPlainSamplingsInEveryModeAndConcurrency) {
  const DecoderConfig& c = target_.config();
  const auto prompts = RandomPrompts(16, c.vocab_size, 43);
  GenerationParams params{.max_tokens = kMaxTokens,
                          .sampling = {.temperature = 0.8f,
                                       .top_p = 0.95f,
                                       .min_p = 0.02f,
                                       .seed = 17,
                                       .rules = StrongRules(c.vocab_size)},
                          .stop_ids = c.eos_token_ids};
  const std::vector<std::vector<int32_t>> with_rules =
      ExpectEveryModeAgrees(target_, predictor_, params, prompts);
  params.sampling.rules = {};
  const EngineRun without = RunPrompts(
      target_, nullptr, {.policy = LengthPolicy::Parse("none").value()}, prompts, params);
  EXPECT_NE(FirstDifference(with_rules, without.outputs), "");
}

// ... and the log-probabilities reported are those of the biased rows, the distribution the
// token was chosen from (the unbiased model gives token 7 far less than probability 1).
TEST_F(LogitRulesEngineTest, ABiasOfAHundredChoosesItsTokenEveryStep) {
  const DecoderConfig& c = target_.config();
  PlantedDrafter planted(target_, 16, /*salt=*/5);
  const GenerationParams params{.max_tokens = 12,
                                .sampling = {.rules = {.logit_bias = {{7, 100.0f}}}},
                                .logprobs = {.enabled = true}};
  const EngineRun run =
      RunPrompts(target_, &planted, {.policy = LengthPolicy::Parse("dflash").value()},
                 RandomPrompts(4, c.vocab_size, 3), params);
  for (size_t i = 0; i < run.outputs.size(); ++i) {
    EXPECT_EQ(run.outputs[i], std::vector<int32_t>(12, 7));
    for (const TokenLogprobs& lp : run.results[i].logprobs) EXPECT_GT(lp.logprob, -1e-6f);
  }
}

// JSON mode's test vocabulary: JSON pieces of one to five bytes for the tiny target's ids, the
// EOS ids without text.
class JsonVocabulary {
 public:
  explicit JsonVocabulary(const DecoderConfig& c) : texts_(c.vocab_size) {
    const std::vector<std::string> pieces = {
        "{",  "}", "[",  "]",  "\"", ":",    ",",    " ",   "{\"", "\"}", "\": ",     "\",\"", "x",
        "yz", "1", "-2", ".5", "e3", "true", "null", "\\n", "]}",  "}}",  "</think>", "\n"};
    std::mt19937 rng(3);
    for (int64_t id = 0; id < c.vocab_size; ++id) {
      if (id < static_cast<int64_t>(pieces.size())) {
        texts_[id] = pieces[id];
        continue;
      }
      const std::string chars = "{}[]\":, xy1-.e";
      const int length = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < length; ++i) texts_[id] += chars[rng() % chars.size()];
    }
    for (const int64_t eos : c.eos_token_ids) texts_[eos].clear();
  }
  std::function<std::string_view(int32_t)> TokenText() const {
    return [this](int32_t id) { return std::string_view(texts_[id]); };
  }
  std::string Text(const std::vector<int32_t>& ids) const {
    std::string text;
    for (const int32_t id : ids) text += texts_[id];
    return text;
  }

 private:
  std::vector<std::string> texts_;
};

// Greedy JSON mode, one plain forward per token, the rows held by the masks.
std::vector<int32_t> ReferenceJsonGreedy(TargetModel& target, const std::vector<int32_t>& prompt,
                                         JsonTokenMasks& masks, const GenerationParams& params) {
  const LogitRules& rules = params.sampling.rules;
  const std::vector<int64_t>& stops = params.stop_ids;
  const JsonSchema& schema = *rules.json_schema;
  const JsonGrammar start = JsonGrammar::Start(schema, rules.reasoning_end);
  std::vector<int32_t> context = prompt, output;
  while (static_cast<int32_t>(output.size()) < params.max_tokens) {
    std::vector<float> logits = testing::NextTokenLogits(target, context);
    ApplyLogitRules(rules, prompt, output, {}, logits, target.config().vocab_size);
    masks.Mask(masks.StateAfter(start, output), stops, logits);
    const auto next = static_cast<int32_t>(std::ranges::max_element(logits) - logits.begin());
    output.push_back(next);
    context.push_back(next);
    if (std::ranges::find(stops, next) != stops.end()) break;
  }
  return output;
}

// Held outputs (JSON mode, a pattern): every mode at c = 1 and 16 commits plain decoding's
// tokens, and greedy plain decoding is the one-forward reference's. Plain decoding's outputs.
std::vector<std::vector<int32_t>> ExpectHeldOutputsAgree(
    DecoderModel& target, const dvl::Predictor& predictor, const GenerationParams& params,
    const std::vector<std::vector<int32_t>>& prompts, const JsonVocabulary& vocabulary,
    JsonTokenMasks& masks) {
  std::vector<std::vector<int32_t>> plain =
      ExpectEveryModeAgrees(target, predictor, params, prompts, vocabulary.TokenText());
  for (size_t i = 0; i < prompts.size() && params.sampling.temperature == 0.0f; ++i) {
    EXPECT_EQ(FirstDifference(plain[i], ReferenceJsonGreedy(target, prompts[i], masks, params)), "")
        << "prompt " << i;
  }
  return plain;
}

// One output of plain decoding held by the rules' schema: its text and tokens, whether a stop id
// ended it, and the grammar after its text (expected to take it all).
struct HeldOutput {
  std::string text;
  size_t tokens = 0;
  bool stopped = false;
  JsonGrammar grammar;
};

// ExpectHeldOutputsAgree greedy and then sampled at temperature 0.9 (seed `seed`): plain
// decoding's outputs of both.
std::vector<HeldOutput> HeldOutputsGreedyAndSampled(
    DecoderModel& target, const dvl::Predictor& predictor, GenerationParams params, uint64_t seed,
    const std::vector<std::vector<int32_t>>& prompts, const JsonVocabulary& vocabulary,
    JsonTokenMasks& masks) {
  std::vector<HeldOutput> outputs;
  const std::vector<int64_t>& stops = params.stop_ids;
  for (const float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << temperature);
    params.sampling.temperature = temperature;
    params.sampling.seed = seed;
    for (const std::vector<int32_t>& plain :
         ExpectHeldOutputsAgree(target, predictor, params, prompts, vocabulary, masks)) {
      HeldOutput out{.text = vocabulary.Text(plain),
                     .tokens = plain.size(),
                     .stopped = std::ranges::find(stops, int64_t{plain.back()}) != stops.end(),
                     .grammar = JsonGrammar::Start(*params.sampling.rules.json_schema,
                                                   params.sampling.rules.reasoning_end)};
      EXPECT_TRUE(out.grammar.Feed(out.text)) << out.text;
      outputs.push_back(std::move(out));
    }
  }
  return outputs;
}

// JSON mode: plain decoding is the reference's, every mode at c = 1 and 16 commits it, greedy
// and sampled, and every output is text the schema's grammar admits so far: whole where a stop id
// ended it, and then a value the schema validates. Any object (json_object), a schema with
// required and optional properties, a bounded integer, an enum array and a string, and one with a
// bounded number, a string's pattern and lengths. After reasoning
// (thinking on), the value follows the first "</think>" (biased up here, so that the tiny target
// ends its reasoning).
TEST_F(LogitRulesEngineTest, JsonModeHoldsEveryModeToJsonObjectText) {
  const DecoderConfig& c = target_.config();
  const JsonVocabulary vocabulary(c);
  JsonTokenMasks masks(c.vocab_size, vocabulary.TokenText());
  const auto prompts = RandomPrompts(16, c.vocab_size, 53);
  constexpr int32_t kThinkEnd = 23;  // "</think>" in JsonVocabulary
  const std::string any_object = R"({"type": "object"})";
  const std::string keyed = R"({"type": "object", "properties": {"x": {"type": "integer",
      "minimum": -5, "maximum": 120},
      "yz": {"type": "array", "items": {"enum": ["x", 1, true, null]}, "maxItems": 3,
             "uniqueItems": true},
      "y": {"type": "string"}}, "required": ["x"]})";
  const std::string shaped = R"({"type": "object", "properties": {"x": {"type": "number",
      "exclusiveMinimum": -3, "maximum": 1.5},
      "y": {"type": "string", "pattern": "^(xy|1-)+$", "maxLength": 6},
      "1": {"type": "string", "minLength": 1, "maxLength": 3}}, "required": ["x", "y"]})";
  for (const auto& [schema_text, after_reasoning] : {std::pair{any_object, false},
                                                     {any_object, true},
                                                     {keyed, false},
                                                     {keyed, true},
                                                     {shaped, false}}) {
    const nlohmann::json schema_json = nlohmann::json::parse(schema_text);
    GenerationParams params{
        .max_tokens = 40,
        .sampling = {.rules = {.json_schema =
                                   schema_text == any_object
                                       ? JsonSchema::AnyObject()
                                       : *JsonSchema::Compile(
                                             nlohmann::ordered_json::parse(schema_text), "schema"),
                               .reasoning_end = after_reasoning ? "</think>" : ""}},
        .stop_ids = c.eos_token_ids};
    if (after_reasoning) params.sampling.rules.logit_bias = {{kThinkEnd, 6.0f}};
    SCOPED_TRACE(::testing::Message()
                 << "after reasoning " << after_reasoning << " schema " << schema_text);
    int whole = 0;
    for (const HeldOutput& out :
         HeldOutputsGreedyAndSampled(target_, predictor_, params, 23, prompts, vocabulary, masks)) {
      // Whole exactly where a stop id ended it, or at the last token max_tokens allows.
      EXPECT_TRUE(out.stopped ? out.grammar.complete()
                              : !out.grammar.complete() ||
                                    static_cast<int32_t>(out.tokens) == params.max_tokens)
          << out.text;
      if (out.grammar.complete()) {
        const size_t answer = after_reasoning ? out.text.find("</think>") + 8 : 0;
        const nlohmann::json value = nlohmann::json::parse(out.text.substr(answer));
        EXPECT_TRUE(value.is_object()) << out.text;
        EXPECT_TRUE(testing::SchemaAdmits(value, schema_json)) << out.text;
        ++whole;
      }
    }
    EXPECT_GT(whole, 0) << "some outputs close their object and stop";
  }
}

// A pattern holding the whole text (structured_outputs regex and choice): every mode at c = 1
// and 16, greedy and sampled, commits plain decoding's tokens and the reference's, and every
// output a stop id ended matches the pattern whole.
TEST_F(LogitRulesEngineTest, APatternHoldsEveryModeToTheWholeText) {
  const DecoderConfig& c = target_.config();
  const JsonVocabulary vocabulary(c);
  JsonTokenMasks masks(c.vocab_size, vocabulary.TokenText());
  const auto prompts = RandomPrompts(16, c.vocab_size, 59);
  // Spelled by the test vocabulary's one-byte tokens and pieces, so that no state the pattern
  // allows is a dead end for its tokens.
  const std::string regex = R"([x1]+( [x1]+){0,5}( null)?)";
  GenerationParams params{.max_tokens = 24,
                          .sampling = {.rules = {.json_schema = *JsonSchema::Pattern(regex, "R")}},
                          .stop_ids = c.eos_token_ids};
  int whole = 0;
  for (const HeldOutput& out :
       HeldOutputsGreedyAndSampled(target_, predictor_, params, 29, prompts, vocabulary, masks)) {
    if (out.stopped) {
      EXPECT_TRUE(std::regex_match(out.text, std::regex(regex))) << out.text;
      ++whole;
    }
  }
  EXPECT_GT(whole, 0) << "some outputs end by a stop id";
}

// Calls held in free text (strict tools under tool_choice "auto"), between markers anywhere
// (Qwen3's form) or as the whole answer (Llama 3.1's): every mode at c = 1 and 16, greedy and
// sampled, commits plain decoding's tokens and the reference's, and every call an output closes
// is a value the call's schema admits. The markers and keys are spelled by the test vocabulary.
TEST_F(LogitRulesEngineTest, CallsInFreeTextHoldEveryMode) {
  const DecoderConfig& c = target_.config();
  const JsonVocabulary vocabulary(c);
  JsonTokenMasks masks(c.vocab_size, vocabulary.TokenText());
  const auto prompts = RandomPrompts(16, c.vocab_size, 61);
  const nlohmann::ordered_json call = nlohmann::ordered_json::parse(R"({"anyOf": [
      {"type": "object", "properties": {"x": {"const": "xx"},
          "1": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["x", "1"]},
      {"type": "object", "properties": {"x": {"const": "x"},
          "xx": {"type": "array", "items": {"enum": [1, true, null]}}}, "required": ["x"]}]})");
  const nlohmann::json reference = call;
  // Every byte after a prefix of a marker, a key or a literal is some token's first: no state is
  // a dead end. The close marker's "y" is a byte JSON writes only in strings (none of the
  // call's holds one).
  const CallSyntax between = {.open = "yz", .close = "y"};
  const CallSyntax whole = {.open = R"({")", .close = "", .whole_answer = true};
  for (const CallSyntax& syntax : {between, whole}) {
    SCOPED_TRACE(syntax.open);
    int calls = 0;
    // Biased to open calls ("yz", '{"') and not to pad them with whitespace.
    GenerationParams params{
        .max_tokens = 40,
        .sampling = {.rules = {.logit_bias = {{7, -5.0f}, {8, 3.0f}, {13, 3.0f}, {24, -5.0f}},
                               .json_schema = *JsonSchema::Calls(call, syntax, "tools")}},
        .stop_ids = c.eos_token_ids};
    for (const HeldOutput& out :
         HeldOutputsGreedyAndSampled(target_, predictor_, params, 31, prompts, vocabulary, masks)) {
      const std::string& text = out.text;
      EXPECT_TRUE(!out.stopped || out.grammar.complete()) << text;
      // The closed calls' bodies: after each open marker, up to the close marker (the whole
      // answer's: to the end, where it is whole).
      for (size_t at = text.find(syntax.open); at != std::string::npos;
           at = syntax.whole_answer ? std::string::npos : text.find(syntax.open, at)) {
        const size_t body = syntax.whole_answer ? at : at + syntax.open.size();
        const size_t end = syntax.whole_answer ? (out.grammar.complete() ? text.size() : body)
                                               : text.find(syntax.close, body);
        if (end == std::string::npos || end == body) break;
        const nlohmann::json value = nlohmann::json::parse(text.substr(body, end - body), nullptr,
                                                           /*allow_exceptions=*/false);
        if (syntax.whole_answer && !value.is_object()) break;  // free text, not a call
        EXPECT_TRUE(testing::SchemaAdmits(value, reference)) << text;
        ++calls;
        at = end + syntax.close.size();
      }
    }
    EXPECT_GT(calls, 5) << "outputs write calls";
  }
}

TEST_F(LogitRulesEngineTest, RulesOutOfRangeAreRefusedNamingTheField) {
  auto engine = Engine::Create(target_, nullptr, {}).value();
  const auto refusal = [&](const SamplingParams& sampling) {
    const Result<RequestId> id = engine->Submit({1, 2, 3}, {.max_tokens = 4, .sampling = sampling});
    return id.ok() ? std::string("accepted") : id.status().message();
  };
  const int32_t vocab = static_cast<int32_t>(target_.config().vocab_size);
  EXPECT_TRUE(refusal({.rules = {.logit_bias = {{vocab, 1.0f}}}}).starts_with("logit_bias: "));
  EXPECT_TRUE(refusal({.rules = {.presence_penalty = 3.0f}}).starts_with("presence_penalty: "));
  EXPECT_TRUE(refusal({.rules = {.repetition_penalty = -1.0f}}).starts_with("repetition_penalty"));
  EXPECT_TRUE(refusal({.temperature = 1.0f, .min_p = 2.0f}).starts_with("min_p: "));
  EXPECT_TRUE(refusal({.rules = {.min_tokens = 5}}).starts_with("min_tokens: "));
  EXPECT_TRUE(refusal({.rules = {.json_schema = JsonSchema::AnyObject()}})
                  .starts_with("response_format: "));
  // With a tokenizer: JSON mode needs a stop id to end on, and no min_tokens past the object.
  const JsonVocabulary vocabulary(target_.config());
  auto with_text = Engine::Create(target_, nullptr, {.token_text = vocabulary.TokenText()}).value();
  const auto json_refusal = [&](GenerationParams params) {
    params.max_tokens = 4;
    params.sampling.rules.json_schema = JsonSchema::AnyObject();
    const Result<RequestId> id = with_text->Submit({1, 2, 3}, params);
    return id.ok() ? std::string("accepted") : id.status().message();
  };
  EXPECT_EQ(json_refusal({.stop_ids = {1}}), "accepted");
  EXPECT_TRUE(json_refusal({}).starts_with("response_format: "));
  EXPECT_TRUE(json_refusal({.sampling = {.rules = {.min_tokens = 2}}, .stop_ids = {1}})
                  .starts_with("response_format: "));
}

}  // namespace
}  // namespace dscale
