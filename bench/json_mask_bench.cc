// JSON mode's cost on Qwen3's vocabulary (151,669 tokens): making the vocabulary walk, a grammar
// state's mask (computed once per state, then kept: an output visits few), and holding one row
// of logits to a kept mask (every verified row of a JSON-mode request pays it).
//
//   build/json_mask_bench        (docs/BENCHMARKS.md, "JSON mode")

#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/tokenizer/tokenizer.h"
#include "spec/json_token_mask.h"

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
std::vector<JsonObjectGrammar> States(int count, bool in_string) {
  std::mt19937 rng(1);
  std::vector<JsonObjectGrammar> states;
  while (static_cast<int>(states.size()) < count) {
    std::string text = "{\"k\":";
    const int depth = 1 + static_cast<int>(rng() % 16);
    for (int d = 0; d < depth; ++d) text += rng() % 2 ? "[" : "{\"k\":";
    if (in_string) text += "\"";
    JsonObjectGrammar state;
    DSCALE_CHECK(state.Feed(text));
    states.push_back(state);
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
  const std::vector<JsonObjectGrammar> states = States(600, state.range(0) == 1);
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
  JsonObjectGrammar reasoning = JsonObjectGrammar::AfterReasoning();
  DSCALE_CHECK(reasoning.Feed("<think>\nLet me see."));
  for (auto _ : state) {
    state.PauseTiming();
    JsonTokenMasks masks(Vocab(), TokenText);
    state.ResumeTiming();
    benchmark::DoNotOptimize(masks.Allowed(reasoning).data());
  }
}
BENCHMARK(BM_MaskOfAReasoningState)->Unit(benchmark::kMillisecond)->Iterations(5);

// One row held to a kept mask.
void BM_HoldARow(benchmark::State& state) {
  JsonTokenMasks masks(Vocab(), TokenText);
  const JsonObjectGrammar in_string = States(1, true)[0];
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
