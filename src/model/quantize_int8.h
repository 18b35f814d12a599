#pragma once
// `--weights int8`: projection matrices quantised at load to cpu::LinearInt8's format — int8
// values with a BF16 scale per 32 consecutive inputs of each output row (kernels/cpu/gemm_int8.h
// says why that granularity and why BF16 scales).
//
// The rounding: cpu::QuantizeInt8Weights.

#include <cstdint>

#include "model/decoder_weights.h"
#include "model/weight_matrix.h"

namespace dscale {

// `w` (any storage) as one owned int8 block; rows are quantised on the threads.
WeightMatrix QuantizeInt8(const WeightMatrix& w);

// The layer's projections (qkv, o_proj, gate_up, down) replaced by int8 copies; the norm gains
// stay f32.
void QuantizeLayerInt8(DecoderLayerWeights* layer);

// Every decoder layer's projections and the LM head as int8. The embedding stays as it is
// (lookups read it as stored), so a tied LM head becomes an int8 copy of the embedding.
void QuantizeProjectionsInt8(DecoderWeights* weights);

}  // namespace dscale
