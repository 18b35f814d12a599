#pragma once
// Plain, obviously-correct versions of every CPU kernel: the specification the optimised CPU
// kernels (and, later, the CUDA kernels) are tested against. Accumulate in double; no tiling,
// no BLAS. Same contracts as the kernels in kernels/cpu.

#include <cstdint>

#include "core/rope_spec.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/linear_attention.h"
#include "kernels/cpu/softmax.h"

namespace dscale::ref {

void Linear(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out,
            bool accumulate = false);
// Linear with 8-bit weights in cpu::LinearInt8's layout (w [out, in] int8, scales [out,
// ⌈in / group⌉] as f32 values, which cpu::LinearInt8 stores as BF16; weight (o, i) =
// w[o, i] · scales[o, i / group]), dequantised exactly in double.
void LinearInt8(const float* x, const int8_t* w, const float* scales, float* y, int64_t rows,
                int64_t in, int64_t out, int64_t group, bool accumulate = false);
// cpu::LinearInt8 with Int8Activations::kInt8, whose specification is an f32 order rather than
// a double sum: each row's activations quantised per group (QuantizeActivationsInt8), per group
// an exact integer dot product, and acc = fma(fl(d_x · d_w), dot, acc) over the groups in order
// from acc = 0; y = acc, or fl(y + acc) with `accumulate`.
void LinearInt8Int8(const float* x, const int8_t* w, const float* scales, float* y, int64_t rows,
                    int64_t in, int64_t out, int64_t group, bool accumulate = false);
// cpu::LinearBf16: w holds BF16 bits [out, in], widened exactly; with `bf16_activations` each
// x rounded to BF16 first (nearest even, cpu::Bf16Activations::kBf16), else taken as it is.
void LinearBf16(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in, int64_t out,
                bool bf16_activations, bool accumulate = false);
// cpu::LinearInt4: w4 packed as gemm_int4.h states ([out, ⌈in/32⌉ · 16] bytes, input 32g + j in
// the low nibble of byte j of group g and input 32g + 16 + j in its high one, each q + 8), scales
// [out, ⌈in/32⌉] as f32 values. The values q are unpacked here and multiplied as LinearInt8
// (f32 activations) or LinearInt8Int8 (`int8_activations`) multiplies them, groups of 32.
void LinearInt4(const float* x, const uint8_t* w4, const float* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool int8_activations, bool accumulate = false);
// x[0, n) quantised per group of `group` values (the last may be shorter): d = max|x| / 127,
// q = x / d rounded to nearest even and clamped to ±127; a zero d (an all-zero group) gives
// q = 0; a group holding a NaN or an infinity gets d = NaN and q = 0. q [n], scales [⌈n/group⌉].
void QuantizeActivationsInt8(const float* x, int64_t n, int64_t group, int8_t* q, float* scales);
// cpu::QuantizeInt8Weights for one row w[0, n): per group of `group` values (the last may be
// shorter) s = the smallest BF16 value ≥ max|w| / 127 (its f32 value in scales[g]) and q = w / s
// rounded to nearest even, clamped to ±127; s = 0 gives q = 0. q [n], scales [⌈n/group⌉].
void QuantizeWeightsInt8(const float* w, int64_t n, int64_t group, int8_t* q, float* scales);
void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps);
void HeadRmsNorm(float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim,
                 int64_t row_stride, float eps);
void ApplyRope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
               int64_t row_stride, const RopeSpec& rope);
void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter);
void SiluInPlace(float* x, int64_t n);
// cpu::GruUpdate: one bias-free GRU step's elementwise half, gates in the order r, z, n.
void GruUpdate(const float* gates_x, const float* gates_h, float* h, int64_t rows, int64_t hidden);
void EmbeddingGather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t rows, float* out);
void SoftmaxRows(float* x, int64_t rows, int64_t n);
void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out);
// cpu::RouteTopK's function in double: per row the softmax over `experts` logits, the k most
// probable in descending order (an exact tie to the lower index), their probabilities as
// weights, divided by the k's sum when `normalize`. ids, weights: [rows, k].
void RouteTopK(const float* logits, int64_t rows, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights);
void MatMul(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out);
cpu::ExpMoments ShiftedExpMoments(const float* x, int64_t n, float shift);
// cpu::LargestValues by a full sort.
void LargestValues(const float* x, int64_t n, int count, float* out);
// Row by row: scores over the visible keys, full softmax, weighted sum of values (BF16 K/V
// widened exactly).
void PagedAttention(const cpu::AttentionParams& params);

// The Gated DeltaNet pieces and the attention output gate (cpu/linear_attention.h's contracts),
// accumulated in double; the delta rule keeps its state in double within the span and rounds it
// to f32 at the end.
void CausalConv1d(const float* in, int64_t in_stride, int64_t rows, int64_t channels,
                  int64_t kernel, const float* taps, float* window, float* out, int64_t out_stride);
void GatedDeltaRule(const cpu::GatedDeltaSpan& span);
void GatedRmsNorm(float* x, const float* z, int64_t z_stride, const float* gain, int64_t rows,
                  int64_t heads, int64_t head_dim, float eps);
void SigmoidGate(float* x, const float* gate, int64_t gate_stride, int64_t rows, int64_t dim);

}  // namespace dscale::ref
