#pragma once
// A plain Qwen3 forward pass for one sequence, built from the reference kernels with a dense
// contiguous KV and no batching: the specification DecoderModel::Forward is checked against.

#include <cstdint>
#include <vector>

#include "io/decoder_config.h"
#include "model/decoder_weights.h"

namespace dscale::testing {

struct ReferenceOutput {
  std::vector<float> logits;                  // [n, vocab]
  std::vector<std::vector<float>> residuals;  // per layer: [n, hidden] after the layer
};

ReferenceOutput ReferenceForward(const DecoderConfig& config, const DecoderWeights& weights,
                                 const std::vector<int32_t>& tokens);

}  // namespace dscale::testing
