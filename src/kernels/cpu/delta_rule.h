#pragma once
// The gated delta rule's state update over blocks of value columns (module-private; the rule is
// linear_attention.h's GatedDeltaRule). Each column of a value head's state evolves on its own:
// column j of S meets only v[j], its own (Sᵀk̂)[j] and its own output, so a block of columns runs
// every row of a span while it stays in L1, where a row-by-row loop over the whole state streamed
// it from memory twice a row. Each element's arithmetic is the same in every blocking and vector
// width: per row, S[i][j] ← S[i][j]·e^g, then (Sᵀk̂)[j] summed over i in order (a multiply-add
// each); then δ[j] = (v[j] − (Sᵀk̂)[j])·β, S[i][j] ← k̂[i]·δ[j] + S[i][j] and out[j] =
// Σ_i S[i][j]·q̂[i] in order. So a span's bits never depend on how its rows were split, and both
// widths give the same bits where both fuse the multiply-adds (the build's x86-64-v3 vectors, as
// AVX-512's; a build for plain x86-64 rounds them in two steps).

#include <cstdint>

#include "kernels/cpu/linear_attention.h"

namespace dscale::cpu {

// The vectors a span's column blocks run in: the build's (simd.h) or 16-lane AVX-512 ones (CPUs
// with AVX-512 F and BW). Both give the same bits.
enum class DeltaRuleVectors { kBuild, kAvx512 };

// GatedDeltaRule in `vectors` (what it dispatches to: kAvx512 where CpuFeaturesInUse() has it).
void GatedDeltaRuleIn(const GatedDeltaSpan& span, DeltaRuleVectors vectors);

// One span's rows as the column blocks read them, prepared once per row and head.
struct DeltaRuleRows {
  const float* qk_hat = nullptr;  // [rows, key_heads, 2, key_dim]: q̂ (scaled by 1/√key_dim), k̂
  const float* gates = nullptr;   // [rows, value_heads, 2]: e^g, then β
  const float* v = nullptr;       // row r's value head h at v + r · v_stride + h · value_dim
  int64_t v_stride = 0;
  float* out = nullptr;  // the same layout as v, at out_stride
  int64_t out_stride = 0;
  int64_t rows = 0;
  int64_t key_heads = 0;
  int64_t value_heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
};

// Columns [first, first + count) of value head `head`'s state [key_dim, value_dim] through every
// row, from `state_in` (the same layout; may be `state`) into `state`, in the build's vectors
// (linear_attention.cc) or in 16-lane AVX-512 ones (linear_attention_avx512.cc, for CPUs with
// AVX-512 F and BW). count ≤ DeltaRuleBlock(...).
void DeltaRuleColumnsBuild(const DeltaRuleRows& rows, const float* state_in, float* state,
                           int64_t head, int64_t first, int64_t count);
void DeltaRuleColumnsAvx512(const DeltaRuleRows& rows, const float* state_in, float* state,
                            int64_t head, int64_t first, int64_t count);
// The columns a block of each variant holds.
int64_t DeltaRuleBlockBuild();
int64_t DeltaRuleBlockAvx512();

}  // namespace dscale::cpu
