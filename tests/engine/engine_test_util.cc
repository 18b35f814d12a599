#include "engine_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "model/random_checkpoint.h"

namespace dscale::testing {

DecoderModel RandomTarget(const DecoderConfig& c, WeightsMode weights) {
  DecoderWeights w = RandomDecoderWeights(c, 5, DType::kBF16);
  ActivationModes activations;
  if (IsQuantized(weights)) {
    QuantizeProjections(&w, weights);
    activations.int8 = cpu::Int8Activations::kInt8;
  }
  DecoderModel target(c, std::move(w));
  target.set_activations(activations);
  return target;
}

EngineFixture::EngineFixture()
    : target_(EngineTestTargetConfig(),
              RandomDecoderWeights(EngineTestTargetConfig(), 5, DType::kF32)),
      predictor_(RandomPredictor(target_.config().hidden_size, target_.config().vocab_size, 3)) {}

std::vector<std::vector<int32_t>> RandomPrompts(int count, int64_t vocab, uint32_t seed,
                                                int32_t max_length) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> length(3, max_length);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 3));
  std::vector<std::vector<int32_t>> prompts(count);
  for (auto& p : prompts) {
    p.resize(length(rng));
    for (int32_t& t : p) t = token(rng);
  }
  return prompts;
}

namespace {

EngineRun RunOnEngine(Result<std::unique_ptr<Engine>> engine,
                      const std::vector<std::vector<int32_t>>& prompts,
                      const GenerationParams& params) {
  EngineRun run;
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return run;
  std::map<RequestId, size_t> order;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Result<RequestId> id = (*engine)->Submit(prompts[i], params);
    EXPECT_TRUE(id.ok()) << id.status().message();
    if (id.ok()) order[*id] = i;
  }
  const Status status = (*engine)->RunToCompletion();
  EXPECT_TRUE(status.ok()) << status.message();
  run.outputs.resize(prompts.size());
  run.results.resize(prompts.size());
  for (RequestResult& r : (*engine)->TakeFinished()) {
    const size_t i = order.at(r.id);
    run.outputs[i] = r.output_ids;
    run.results[i] = std::move(r);
  }
  run.stats = (*engine)->stats();
  run.free_pages_after = (*engine)->free_kv_pages();
  run.total_pages = (*engine)->total_kv_pages();
  run.prefix_cache_states_after = (*engine)->prefix_cache_states();
  return run;
}

}  // namespace

EngineRun RunPrompts(TargetModel& target, Drafter* drafter, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const GenerationParams& params, const budget::StepTimeSource* step_times) {
  return RunOnEngine(Engine::Create(target, drafter, config, step_times), prompts, params);
}

EngineRun RunPrompts(StepBackend& backend, const EngineConfig& config,
                     const std::vector<std::vector<int32_t>>& prompts,
                     const GenerationParams& params, const budget::StepTimeSource* step_times) {
  return RunOnEngine(Engine::Create(backend, config, step_times), prompts, params);
}

std::string FirstDifference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  const size_t n = std::min(got.size(), want.size());
  const size_t at = std::mismatch(got.begin(), got.begin() + n, want.begin()).first - got.begin();
  if (at < n) {
    return "token " + std::to_string(at) + ": " + std::to_string(got[at]) +
           " where plain decoding has " + std::to_string(want[at]);
  }
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " tokens where plain decoding has " +
           std::to_string(want.size());
  }
  return "";
}

std::string FirstDifference(const std::vector<std::vector<int32_t>>& got,
                            const std::vector<std::vector<int32_t>>& want) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " outputs for " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string diff = FirstDifference(got[i], want[i]);
    if (!diff.empty()) return "prompt " + std::to_string(i) + ", " + diff;
  }
  return "";
}

std::vector<float> NextTokenLogits(TargetModel& target, const std::vector<int32_t>& context,
                                   KvDtype kv) {
  const auto n = static_cast<int32_t>(context.size());
  PagedKvCache cache(target.KvShape(16, (n + 15) / 16).WithDtype(kv));
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, context, cache, /*all_logits=*/false);
  ForwardOutput out;
  EXPECT_TRUE(target.Forward(batch, cache, &out).ok());
  return out.logits;
}

bool IsNearTie(TargetModel& target, const std::vector<int32_t>& context, float tolerance,
               KvDtype kv) {
  std::vector<float> row = NextTokenLogits(target, context, kv);
  std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
  return row[0] - row[1] <= tolerance;
}

bool SameGreedyOutputUpToTies(TargetModel& target, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                              int* ties, float tie_tolerance, KvDtype kv) {
  const size_t n = std::min(got.size(), want.size());
  const auto diff = std::mismatch(got.begin(), got.begin() + n, want.begin());
  if (diff.first == got.begin() + n) {
    EXPECT_EQ(got.size(), want.size());
    return got.size() == want.size();
  }
  std::vector<int32_t> context = prompt;
  context.insert(context.end(), want.begin(), diff.second);
  EXPECT_TRUE(IsNearTie(target, context, tie_tolerance, kv))
      << "outputs differ at token " << (diff.second - want.begin())
      << " where the target's top two logits are not tied";
  ++*ties;
  return false;
}

}  // namespace dscale::testing
