#pragma once
// The model tests' way to read a forward: logits for every position of `tokens` from one prefill
// of the sequence alone, over an f32 KV cache of `page_size`-token pages.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kv/paged_kv_cache.h"
#include "model/decoder_model.h"

namespace dscale::testing {

inline std::vector<float> PrefillLogits(DecoderModel& model, const std::vector<int32_t>& tokens,
                                        int32_t page_size = 16) {
  const auto n = static_cast<int32_t>(tokens.size());
  PagedKvCache cache(
      model.KvShape(page_size, (n + page_size - 1) / page_size).WithDtype(KvDtype::kF32));
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, n).ok());
  StepBatch batch;
  AddRequestRows(batch, seq, 0, tokens, cache, /*all_logits=*/true);
  ForwardOutput out;
  EXPECT_TRUE(model.Forward(batch, cache, &out).ok());
  return out.logits;
}

}  // namespace dscale::testing
