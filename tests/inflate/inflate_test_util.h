#pragma once
// Shared pieces of the inflation tests: source pairs written to disk, their inflation, one
// prefill's logits and one draft (the bounds their comparisons use are in pair_bounds.h).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../dvl/scoped_temp_dir.h"
#include "inflate/inflate_checkpoint.h"
#include "model/decoder_model.h"
#include "model/dflash_drafter.h"
#include "model/random_checkpoint.h"
#include "pair_bounds.h"
#include "support/tiny_models.h"

namespace dscale::testing {

struct PairDirs {
  std::string target;
  std::string drafter;
};

// A random target of `config` and a TestDrafterConfig drafter for it, in the real layout.
inline PairDirs WriteRandomPair(const std::string& dir, const DecoderConfig& config, uint64_t seed,
                                DType dtype) {
  const PairDirs pair{dir + "/target", dir + "/drafter"};
  EXPECT_TRUE(WriteRandomCheckpoint(pair.target, config, seed, dtype).ok());
  EXPECT_TRUE(WriteRandomDFlashCheckpoint(pair.drafter, TestDrafterConfig(config),
                                          config.hidden_size, seed + 1, dtype)
                  .ok());
  return pair;
}

// A random target of `config` and a random DSpark drafter `drafter` (made for it, e.g. by
// TestDSparkConfig) in DeepSpec's layout, whose embedding and LM head copies are the target's.
inline PairDirs WriteRandomDSparkPair(const std::string& dir, const DecoderConfig& config,
                                      const DFlashConfig& drafter, uint64_t seed, DType dtype) {
  const PairDirs pair{dir + "/target", dir + "/drafter"};
  EXPECT_TRUE(WriteRandomCheckpoint(pair.target, config, seed, dtype).ok());
  const Checkpoint written = Checkpoint::Open(pair.target).value();
  const std::vector<int64_t> shape{config.vocab_size, config.hidden_size};
  std::vector<float> embed = written.ReadF32(kTargetEmbedName, shape).value();
  std::vector<float> lm_head =
      config.tie_word_embeddings ? embed : written.ReadF32(kTargetLmHeadName, shape).value();
  EXPECT_TRUE(WriteRandomDSparkCheckpoint(pair.drafter, drafter, config.hidden_size, seed + 1,
                                          dtype, std::move(embed), std::move(lm_head))
                  .ok());
  return pair;
}

// Every kind of DSpark head at rank `rank`: each Markov head type with each confidence option
// (none, on h, on h and the Markov embedding), then a confidence head without a Markov head.
inline std::vector<DSparkHeadConfig> EveryDSparkHeadKind(int64_t rank) {
  std::vector<DSparkHeadConfig> kinds;
  for (const MarkovHeadType type :
       {MarkovHeadType::kVanilla, MarkovHeadType::kGated, MarkovHeadType::kRnn}) {
    for (const int confidence : {0, 1, 2}) {
      kinds.push_back({.markov_rank = rank,
                       .markov_head_type = type,
                       .confidence_head = confidence > 0,
                       .confidence_with_markov = confidence == 2});
    }
  }
  kinds.push_back({.markov_rank = 0, .confidence_head = true});
  return kinds;
}

// "gated, confidence on h and e", for messages.
inline std::string DescribeHeads(const DSparkHeadConfig& c) {
  std::string s = c.has_markov_head() ? std::string(MarkovHeadTypeName(c.markov_head_type))
                                      : std::string("no Markov head");
  if (!c.confidence_head) return s + ", no confidence head";
  return s + ", confidence on h" + (c.confidence_with_markov ? " and e" : "");
}

inline Result<InflateResult> InflatePair(const PairDirs& source, const PairDirs& out,
                                         const InflateShape& shape) {
  return Inflate({.target_dir = source.target,
                  .drafters = {{.source = source.drafter, .out = out.drafter}},
                  .shape = shape,
                  .out_target = out.target});
}

// Logits [n, vocab] of every position of one prefill of `tokens` with K/V cached as `kv`, and
// the captured residual streams of `capture` ([n, layers, hidden]).
struct Prefill {
  std::vector<float> logits;
  std::vector<float> features;
};

inline Prefill RunPrefill(DecoderModel& model, const std::vector<int32_t>& tokens, KvDtype kv,
                          const std::vector<int32_t>& capture = {}) {
  const auto n = static_cast<int32_t>(tokens.size());
  PagedKvCache cache(model.KvShape(16, (n + 15) / 16).WithDtype(kv));
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, tokens, cache, /*all_logits=*/true);
  ForwardOutput out;
  batch.capture_layers = capture;
  EXPECT_TRUE(model.Forward(batch, cache, &out).ok());
  return {std::move(out.logits), std::move(out.features)};
}

// The drafter's step after a prefill of `context`, anchored at `anchor`; both caches store `kv`.
inline DraftOutput RunDraft(DecoderModel& target, DFlashDrafter& drafter,
                            const std::vector<int32_t>& context, int32_t anchor, KvDtype kv) {
  const auto n = static_cast<int32_t>(context.size());
  const int32_t block = drafter.block_size();
  PagedKvCache cache(target.KvShape(16, (n + block + 15) / 16).WithDtype(kv));
  drafter.Bind(cache);
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n + block).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, context, cache, /*all_logits=*/false);
  ForwardOutput out;
  batch.capture_layers = drafter.feature_layers();
  EXPECT_TRUE(target.Forward(batch, cache, &out).ok());
  drafter.AppendContext(
      {.features = out.features, .positions = batch.positions(), .slots = batch.kv_slots()});
  DraftOutput draft;
  const DraftRequest request{.seq = seq, .ctx_len = n, .anchor = anchor, .committed = context};
  EXPECT_TRUE(drafter.Draft(std::span(&request, 1), cache, 16, &draft).ok());
  return draft;
}

}  // namespace dscale::testing
