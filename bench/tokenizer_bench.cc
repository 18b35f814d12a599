// Tokenizer throughput on real text: every GSM8K question and answer (test and train,
// about 4.5 MB), encoded and decoded with the Qwen3 tokenizer. Reports bytes/s of text.
//
//   build/tokenizer_bench --benchmark_filter=Encode

#include <benchmark/benchmark.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/tokenizer/pretokenizer.h"
#include "io/tokenizer/stream_decoder.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale {
namespace {

const char kTokenizerDir[] = DSCALE_TEST_DATA_DIR "/tokenizer/qwen3";

const std::string& Gsm8kText() {
  static const std::string text = [] {
    std::string out;
    for (const char* file : {"/gsm8k/test.jsonl", "/gsm8k/train.jsonl"}) {
      std::ifstream in(std::string(DSCALE_DATA_DIR) + file);
      DSCALE_CHECK_MSG(in.good(), file);
      for (std::string line; std::getline(in, line);) {
        const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
        if (!row.is_object()) continue;
        out += row.value("question", "") + "\n" + row.value("answer", "") + "\n\n";
      }
    }
    return out;
  }();
  return text;
}

Tokenizer LoadOrDie() {
  Result<Tokenizer> tokenizer = Tokenizer::Load(kTokenizerDir);
  DSCALE_CHECK_MSG(tokenizer.ok(), tokenizer.status().ToString().c_str());
  return std::move(tokenizer).value();
}

const Tokenizer& SharedTokenizer() {
  static const Tokenizer tokenizer = LoadOrDie();
  return tokenizer;
}

// Steady state: the word cache is warm after the first iteration, as in a running server.
void BM_Encode(benchmark::State& state) {
  const std::string& text = Gsm8kText();
  size_t ids = 0;
  for (auto _ : state) {
    Result<std::vector<int32_t>> encoded = SharedTokenizer().Encode(text);
    DSCALE_CHECK(encoded.ok());
    ids = encoded->size();
    benchmark::DoNotOptimize(encoded->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_id"] = static_cast<double>(text.size()) / static_cast<double>(ids);
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);

// A fresh tokenizer each time: every distinct word goes through BPE once.
void BM_EncodeColdCache(benchmark::State& state) {
  const std::string& text = Gsm8kText();
  for (auto _ : state) {
    state.PauseTiming();
    Tokenizer tokenizer = LoadOrDie();
    state.ResumeTiming();
    benchmark::DoNotOptimize(tokenizer.Encode(text));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_PreTokenize(benchmark::State& state) {
  const std::string& text = Gsm8kText();
  Result<PreTokenizer> pre = PreTokenizer::CreateQwen2();
  DSCALE_CHECK(pre.ok());
  std::vector<std::string_view> pieces;
  for (auto _ : state) {
    pieces.clear();
    DSCALE_CHECK(pre->Split(text, &pieces).ok());
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["jit"] = pre->jit_compiled() ? 1 : 0;
}
BENCHMARK(BM_PreTokenize)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const std::string& text = Gsm8kText();
  const std::vector<int32_t> ids = SharedTokenizer().Encode(text).value();
  for (auto _ : state) benchmark::DoNotOptimize(SharedTokenizer().Decode(ids));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

void BM_StreamDecode(benchmark::State& state) {
  const std::string& text = Gsm8kText();
  const std::vector<int32_t> ids = SharedTokenizer().Encode(text).value();
  for (auto _ : state) {
    StreamDecoder decoder(SharedTokenizer());
    std::string out;
    for (int32_t id : ids) DSCALE_CHECK(decoder.Push(id, &out).ok());
    decoder.Finish(&out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_StreamDecode)->Unit(benchmark::kMillisecond);

void BM_Load(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(LoadOrDie());
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace dscale

BENCHMARK_MAIN();
