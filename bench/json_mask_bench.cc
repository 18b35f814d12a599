// JSON mode's cost on Qwen3's vocabulary (151,669 tokens): making the vocabulary walk, a grammar
// state's mask (computed once per state, then kept: an output visits few), compiling a string's
// pattern, and holding one row of logits to a kept mask (every verified row of a JSON-mode
// request pays it).
//
//   build/json_mask_bench        (docs/BENCHMARKS.md, "JSON mode")

#include <benchmark/benchmark.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/tokenizer/tokenizer.h"
#include "spec/json_schema.h"
#include "spec/json_token_mask.h"
#include "spec/pattern_dfa.h"

namespace dscale {
namespace {

const char kTokenizerDir[] = DSCALE_TEST_DATA_DIR "/tokenizer/qwen3";

const Tokenizer& SharedTokenizer() {
  static const Tokenizer tokenizer = [] {
    Result<Tokenizer> loaded = Tokenizer::Load(kTokenizerDir);
    DSCALE_CHECK_MSG(loaded.ok(), loaded.status().ToString().c_str());
    return std::move(loaded).value();
  }();
  return tokenizer;
}

int64_t Vocab() { return SharedTokenizer().id_limit(); }

std::string_view TokenText(int32_t id) {
  const std::string* bytes = SharedTokenizer().TokenBytes(id);
  return bytes != nullptr ? std::string_view(*bytes) : std::string_view();
}

// `count` distinct states, nested 1 to 16 deep, inside a string value (`in_string`) or between
// tokens after a ":" (where any value may start).
std::vector<JsonGrammar> States(int count, bool in_string) {
  std::mt19937 rng(1);
  std::vector<JsonGrammar> states;
  std::set<std::string> keys;
  while (static_cast<int>(states.size()) < count) {
    std::string text = "{\"k\":";
    const int depth = 1 + static_cast<int>(rng() % 16);
    for (int d = 0; d < depth; ++d) text += rng() % 2 ? "[" : "{\"k\":";
    if (in_string) text += "\"";
    JsonGrammar state(*JsonSchema::AnyObject());
    DSCALE_CHECK(state.Feed(text));
    if (keys.insert(state.key()).second) states.push_back(state);
  }
  return states;
}

void BM_MakeVocabularyWalk(benchmark::State& state) {
  for (auto _ : state) {
    JsonTokenMasks masks(Vocab(), TokenText);
    benchmark::DoNotOptimize(&masks);
  }
}
BENCHMARK(BM_MakeVocabularyWalk)->Unit(benchmark::kMillisecond);

// A state's first mask: more states than the cache keeps, visited in turn, so every one is new.
void BM_MaskOfANewState(benchmark::State& state) {
  JsonTokenMasks masks(Vocab(), TokenText);
  const std::vector<JsonGrammar> states = States(600, state.range(0) == 1);
  size_t i = 0, allowed = 0;
  for (auto _ : state) {
    const std::span<const uint64_t> bits = masks.Allowed(states[i++ % states.size()]);
    allowed = 0;
    for (const uint64_t word : bits) allowed += static_cast<size_t>(__builtin_popcountll(word));
  }
  state.counters["allowed_tokens"] = static_cast<double>(allowed);
  state.SetLabel(state.range(0) == 1 ? "in a string" : "a value due");
}
BENCHMARK(BM_MaskOfANewState)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);

// Thinking on: a state in the reasoning, where any text may come, walks the whole vocabulary
// (at most nine such states: how much of "</think>" the text ends with).
void BM_MaskOfAReasoningState(benchmark::State& state) {
  JsonGrammar reasoning = JsonGrammar::Start(*JsonSchema::AnyObject(), "</think>");
  DSCALE_CHECK(reasoning.Feed("<think>\nLet me see."));
  std::unique_ptr<JsonTokenMasks> masks;
  for (auto _ : state) {
    state.PauseTiming();
    masks = std::make_unique<JsonTokenMasks>(Vocab(), TokenText);  // the last one freed untimed
    state.ResumeTiming();
    benchmark::DoNotOptimize(masks->Allowed(reasoning).data());
  }
}
BENCHMARK(BM_MaskOfAReasoningState)->Unit(benchmark::kMillisecond)->Iterations(5);

// The mask of the state `at`, computed anew each time (the masks made afresh, untimed), and the
// tokens it allows.
void TimeFirstMask(benchmark::State& state, const JsonGrammar& at, const char* label) {
  size_t allowed = 0;
  std::unique_ptr<JsonTokenMasks> masks;
  for (auto _ : state) {
    state.PauseTiming();
    masks = std::make_unique<JsonTokenMasks>(Vocab(), TokenText);  // the last one freed untimed
    state.ResumeTiming();
    const std::span<const uint64_t> bits = masks->Allowed(at);
    allowed = 0;
    for (const uint64_t word : bits) allowed += static_cast<size_t>(__builtin_popcountll(word));
  }
  state.counters["allowed_tokens"] = static_cast<double>(allowed);
  state.SetLabel(label);
}

// A schema's states (response_format json_schema), each mask computed anew: where a key of a
// declared object is due (one of its property names), a value of a property (an integer), inside
// an enum value (a string one of three), inside a string of at most 40 characters, inside strings
// held to a narrow pattern and a wide one (an e-mail address), and after a bounded number's point.
void BM_MaskOfASchemaState(benchmark::State& state) {
  const auto schema = JsonSchema::Compile(nlohmann::ordered_json::parse(R"({"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
      "unit": {"enum": ["metric", "imperial", "nautical"]},
      "note": {"type": "string", "maxLength": 40},
      "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
      "email": {"type": "string", "pattern": "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$"},
      "score": {"type": "number", "minimum": 0, "maximum": 1}}, "required": ["name", "age"]})"),
                                          "schema")
                          .value();
  const char* prefixes[] = {"{",
                            "{\"name\": \"Ann\", \"age\": ",
                            "{\"name\": \"A\", \"age\": 3, \"unit\": \"m",
                            "{\"name\": \"A\", \"age\": 3, \"note\": \"Hel",
                            "{\"name\": \"A\", \"age\": 3, \"code\": \"AB",
                            "{\"name\": \"A\", \"age\": 3, \"email\": \"ann",
                            "{\"name\": \"A\", \"age\": 3, \"score\": 0."};
  const char* labels[] = {"a key due",
                          "an integer due",
                          "in an enum value",
                          "in a string of at most 40 characters",
                          "in a narrow pattern",
                          "in an e-mail address's pattern",
                          "after a bounded number's point"};
  JsonGrammar at(*schema);
  DSCALE_CHECK(at.Feed(prefixes[state.range(0)]));
  TimeFirstMask(state, at, labels[state.range(0)]);
}
BENCHMARK(BM_MaskOfASchemaState)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond)->Iterations(20);

// Strict tools under tool_choice "auto" (JsonSchema::Calls in Qwen3's and Qwen3.5's syntax),
// each mask computed anew: in the free text (any token: those holding a "<" walked), in it after
// a prefix of the open marker (the whole vocabulary walked), where a call's value is due after
// "<tool_call>", where its close is due, in a JSON string of a call (plain text holding a "<"
// walked), and in Qwen3.5's form where a parameter's tag is due and in a string argument's text.
void BM_MaskOfACallsState(benchmark::State& state) {
  const auto call = nlohmann::ordered_json::parse(R"({"anyOf": [
      {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type":
        "integer"}}, "required": ["city"]}}, "required": ["name", "arguments"]},
      {"type": "object", "properties": {"name": {"const": "now"}, "arguments": {
        "type": "object"}}, "required": ["name", "arguments"]}]})");
  const bool xml = state.range(0) >= 5;
  const auto schema =
      JsonSchema::Calls(
          call, {.open = "<tool_call>", .close = "</tool_call>", .xml_parameters = xml}, "tools")
          .value();
  const char* prefixes[] = {
      "Let me see.",
      "Let me see. <tool",
      "<tool_call>",
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}",
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os",
      "<tool_call>\n<function=get_weather>\n",
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs"};
  const char* labels[] = {"in free text",
                          "after a prefix of the marker",
                          "a call due",
                          "its close due",
                          "in a call's string",
                          "XML: a parameter's tag due",
                          "XML: in a string argument"};
  JsonGrammar at(*schema);
  DSCALE_CHECK(at.Feed(prefixes[state.range(0)]));
  TimeFirstMask(state, at, labels[state.range(0)]);
}
BENCHMARK(BM_MaskOfACallsState)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond)->Iterations(10);

// A pattern compiled to its automaton (once per schema text): an e-mail address, a date, a
// hundred words, and the unanchored (a|b)*a(a|b){12} whose subsets grow fastest.
void BM_CompilePattern(benchmark::State& state) {
  const char* patterns[] = {"^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$", "^\\d{4}-\\d{2}-\\d{2}$",
                            "^(?:\\w+\\s?){1,100}$", "(a|b)*a(a|b){12}"};
  const char* pattern = patterns[state.range(0)];
  size_t states = 0;
  for (auto _ : state) {
    const Result<PatternDfa> dfa = CompilePattern(pattern);
    DSCALE_CHECK(dfa.ok());
    states = dfa->next.size();
  }
  state.counters["states"] = static_cast<double>(states);
  state.SetLabel(pattern);
}
BENCHMARK(BM_CompilePattern)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// One row held to a kept mask.
void BM_HoldARow(benchmark::State& state) {
  JsonTokenMasks masks(Vocab(), TokenText);
  const JsonGrammar in_string = States(1, true)[0];
  std::vector<float> row(static_cast<size_t>(Vocab()), 0.5f);
  const std::vector<int64_t> stops = {151645, 151643};
  masks.Mask(in_string, stops, row);
  for (auto _ : state) {
    masks.Mask(in_string, stops, row);
    benchmark::DoNotOptimize(row.data());
  }
}
BENCHMARK(BM_HoldARow)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dscale

BENCHMARK_MAIN();
