#pragma once
// `--weights int8|int4`: projection matrices quantised at load to cpu::LinearInt8's format —
// int8 values with a BF16 scale per 32 consecutive inputs of each output row (kernels/cpu/
// gemm_int8.h says why that granularity and why BF16 scales) — or to cpu::LinearInt4's, the same
// with 4-bit values (gemm_int4.h).
//
// The rounding: cpu::QuantizeInt8Weights, cpu::QuantizeInt4Weights.

#include <cstdint>

#include "model/decoder_weights.h"
#include "model/weight_matrix.h"

namespace dscale {

// `w` (any storage) as one owned int8 block, in the layout this CPU's products read fastest with
// `activations` (cpu::PreferredInt8Layout), or in `layout`; rows are quantised on the threads.
// The values and the products' bits are the same in either layout.
WeightMatrix QuantizeInt8(const WeightMatrix& w, cpu::Int8Activations activations);
WeightMatrix QuantizeInt8(const WeightMatrix& w, cpu::QuantLayout layout);
// The same as one owned int4 block, in the layout this CPU's products read fastest
// (cpu::PreferredInt4Layout), or in `layout`. The values and the products' bits are the same in
// either.
WeightMatrix QuantizeInt4(const WeightMatrix& w);
WeightMatrix QuantizeInt4(const WeightMatrix& w, cpu::QuantLayout layout);

// The layer's projections (qkv, o_proj, gate_up, down, or a sparse layer's experts' gate_up and
// down) replaced by int8 copies, or int4 ones for WeightsMode::kInt4 (`mode` is quantised);
// the norm gains stay f32, and a sparse layer's router as stored: it is small (num_experts rows)
// and its logits choose the experts, so its rounding would move rows between experts. Int8 ones
// in the layout for `activations` (QuantizeInt8).
void QuantizeLayer(DecoderLayerWeights* layer, WeightsMode mode,
                   cpu::Int8Activations activations = cpu::Int8Activations::kInt8);

// Every decoder layer's projections as QuantizeLayer makes them, and the LM head as int8 in
// either mode: the logits, which the acceptance and the reported log-probabilities read, keep
// 8 bits (llama.cpp's 4-bit files keep their output matrix at 6 bits or more for the same
// reason). The embedding stays as it is (lookups read it as stored), so a tied LM head becomes
// an int8 copy of the embedding.
void QuantizeProjections(DecoderWeights* weights, WeightsMode mode,
                         cpu::Int8Activations activations = cpu::Int8Activations::kInt8);

}  // namespace dscale
