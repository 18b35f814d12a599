#pragma once
// `--weights int8`: projection matrices quantised at load to cpu::LinearInt8's format — int8
// values with a BF16 scale per 32 consecutive inputs of each output row (kernels/cpu/gemm_int8.h
// says why that granularity and why BF16 scales).
//
// Per group: s = max|w| / 127 rounded up to a BF16 value (cpu::Int8ScaleAtLeast) and q = w / s
// rounded to nearest (ties to even), so every weight is within s/2 (plus float rounding) of its
// dequantised value q · s (exact in f32: 8 significant bits times 8) and the group's largest
// weight maps to ±127 or, where rounding s up took it below 126.5 steps, ±126; an all-zero group
// gets s = 0 and q = 0. A row whose length is not a multiple of 32 ends in a shorter group with
// a scale of its own.

#include <cstdint>

#include "model/decoder_weights.h"
#include "model/weight_matrix.h"

namespace dscale {

// q[rows, cols] and scales[rows, cpu::Int8Groups(cols)] from w[rows, cols] (finite values).
void QuantizeInt8Rows(const float* w, int64_t rows, int64_t cols, int8_t* q,
                      cpu::Int8Scale* scales);

// `w` (any storage) as one owned int8 block; rows are quantised on the threads.
WeightMatrix QuantizeInt8(const WeightMatrix& w);

// The layer's projections (qkv, o_proj, gate_up, down) replaced by int8 copies; the norm gains
// stay f32.
void QuantizeLayerInt8(DecoderLayerWeights* layer);

// Every decoder layer's projections and the LM head as int8. The embedding stays as it is
// (lookups read it as stored), so a tied LM head becomes an int8 copy of the embedding.
void QuantizeProjectionsInt8(DecoderWeights* weights);

}  // namespace dscale
