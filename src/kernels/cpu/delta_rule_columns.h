#pragma once
// The delta rule's column blocks (delta_rule.h), compiled once per vector width:
// linear_attention.cc includes this file with the build's vectors (simd.h) and
// linear_attention_avx512.cc with 16-lane AVX-512 vectors; the including file names its copy's
// namespace with DSCALE_DELTA_VARIANT.

#include <cstdint>
#include <cstring>

#include "kernels/cpu/delta_rule.h"
#include "kernels/cpu/simd.h"

#ifndef DSCALE_DELTA_VARIANT
#error "define DSCALE_DELTA_VARIANT (the namespace of this copy of the blocks) first"
#endif

namespace dscale::cpu::DSCALE_DELTA_VARIANT {
namespace {

// A lane type for the blocks: the vectors, or single floats for the columns past the last
// whole vector.
struct VectorLanes {
  using T = simd::Floats;
  static constexpr int64_t kWidth = simd::kLanes;
  static T Load(const float* p) { return simd::Load(p); }
  static void Store(float* p, T v) { simd::Store(p, v); }
  static T Splat(float x) { return simd::Splat(x); }
};
struct ScalarLanes {
  using T = float;
  static constexpr int64_t kWidth = 1;
  static T Load(const float* p) { return *p; }
  static void Store(float* p, T v) { *p = v; }
  static T Splat(float x) { return x; }
};

// Vectors a whole block holds: enough independent sums (two per vector) to keep the multiply-add
// units busy, few enough that the block's sums and deltas stay in registers (16 of AVX2's, 32 of
// AVX-512's).
constexpr int kBlockVectors = simd::kLanes == 16 ? 4 : 2;

// Where a row's pieces lie for one value head (delta_rule.h's layouts).
struct HeadRows {
  const DeltaRuleRows& p;
  int64_t head, key_head;

  const float* QHat(int64_t r) const {
    return p.qk_hat + (r * p.key_heads + key_head) * 2 * p.key_dim;
  }
  const float* KHat(int64_t r) const { return QHat(r) + p.key_dim; }
  float Decay(int64_t r) const { return p.gates[(r * p.value_heads + head) * 2]; }
  float Beta(int64_t r) const { return p.gates[(r * p.value_heads + head) * 2 + 1]; }
};

// The block's state from `from` decayed by e^g into s and its Sᵀk̂ into recall (the span's first
// row; later rows' ride in UpdateBlock). `from` may be s; both have row stride `stride`. The sums
// are locals the unrolled lane loops keep in registers.
template <typename L, int NV>
void DecayBlock(const float* from, float* s, int64_t stride, int64_t key_dim, const float* k,
                float decay, typename L::T* recall) {
  using T = typename L::T;
  T sums[NV];
  const T d = L::Splat(decay);
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) sums[j] = L::Splat(0.0f);
  for (int64_t i = 0; i < key_dim; ++i) {
    const float* in = from + i * stride;
    float* row = s + i * stride;
    const T ki = L::Splat(k[i]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      const T x = L::Load(in + j * L::kWidth) * d;
      L::Store(row + j * L::kWidth, x);
      sums[j] = x * ki + sums[j];
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) recall[j] = sums[j];
}

// One row's update of the block (δ given) and its output; with kNext, the next row's decay (e^g
// decay_next) and Sᵀk̂ (k_next) in the same pass, into recall.
template <typename L, int NV, bool kNext>
void UpdateBlock(float* s, int64_t stride, int64_t key_dim, const float* q, const float* k,
                 const typename L::T* delta, float* out, const float* k_next, float decay_next,
                 typename L::T* recall) {
  using T = typename L::T;
  T dl[NV], outs[NV], sums[NV];
  const T d = L::Splat(decay_next);
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    dl[j] = delta[j];
    outs[j] = L::Splat(0.0f);
    sums[j] = L::Splat(0.0f);
  }
  for (int64_t i = 0; i < key_dim; ++i) {
    float* row = s + i * stride;
    const T ki = L::Splat(k[i]), qi = L::Splat(q[i]);
    const T kn = L::Splat(kNext ? k_next[i] : 0.0f);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      T x = ki * dl[j] + L::Load(row + j * L::kWidth);
      outs[j] = x * qi + outs[j];
      if constexpr (kNext) {
        x = x * d;
        sums[j] = x * kn + sums[j];
      }
      L::Store(row + j * L::kWidth, x);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    L::Store(out + j * L::kWidth, outs[j]);
    if constexpr (kNext) recall[j] = sums[j];
  }
}

// A span's rows on NV vectors of columns of one value head's state, from `from` into s (row
// stride `stride` both; `from` may be s): the state decayed by the first row's e^g and its Sᵀk̂,
// then per row its update and output fused with the next row's decay and Sᵀk̂, so the block is
// read and written once a row.
template <typename L, int NV>
void RunRows(const DeltaRuleRows& p, const HeadRows& at, const float* from, float* s,
             int64_t stride, int64_t first) {
  using T = typename L::T;
  const int64_t dk = p.key_dim, dv = p.value_dim;
  T recall[NV], delta[NV];
  DecayBlock<L, NV>(from, s, stride, dk, at.KHat(0), at.Decay(0), recall);
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* v = p.v + r * p.v_stride + at.head * dv + first;
    float* out = p.out + r * p.out_stride + at.head * dv + first;
    const T beta = L::Splat(at.Beta(r));
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) delta[j] = (L::Load(v + j * L::kWidth) - recall[j]) * beta;
    if (r + 1 < p.rows) {
      UpdateBlock<L, NV, true>(s, stride, dk, at.QHat(r), at.KHat(r), delta, out, at.KHat(r + 1),
                               at.Decay(r + 1), recall);
    } else {
      UpdateBlock<L, NV, false>(s, stride, dk, at.QHat(r), at.KHat(r), delta, out, nullptr, 0.0f,
                                recall);
    }
  }
}

// The key dims up to which a block's state is copied into a contiguous buffer for a span of
// several rows. In place, its rows lie value_dim floats apart, and at 128 columns that stride
// maps them onto an eighth of L1's sets, so a 32 KB block would not stay there.
constexpr int64_t kMaxCopiedKeyDim = 256;

template <typename L, int NV>
void RunBlock(const DeltaRuleRows& p, const float* state_in, float* state, int64_t head,
              int64_t first) {
  const HeadRows at{p, head, head / (p.value_heads / p.key_heads)};
  const int64_t dk = p.key_dim, dv = p.value_dim, width = NV * L::kWidth;
  const int64_t offset = head * dk * dv + first;
  if (dk > kMaxCopiedKeyDim || p.rows == 1) {
    return RunRows<L, NV>(p, at, state_in + offset, state + offset, dv, first);
  }
  // Rows past key_dim are never read; GCC cannot tell that the copy below fills the rest.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  alignas(64) float block[kMaxCopiedKeyDim * NV * L::kWidth];
  for (int64_t i = 0; i < dk; ++i) {
    std::memcpy(block + i * width, state_in + offset + i * dv,
                static_cast<size_t>(width) * sizeof(float));
  }
  RunRows<L, NV>(p, at, block, block, width, first);
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  for (int64_t i = 0; i < dk; ++i) {
    std::memcpy(state + offset + i * dv, block + i * width,
                static_cast<size_t>(width) * sizeof(float));
  }
}

}  // namespace

inline constexpr int64_t kBlockColumns = kBlockVectors * simd::kLanes;

// Whole blocks in kBlockVectors vectors, a shorter one a vector at a time, the rest a column at
// a time (each column's arithmetic the same either way).
inline void DeltaRuleColumns(const DeltaRuleRows& p, const float* state_in, float* state,
                             int64_t head, int64_t first, int64_t count) {
  if (count == kBlockColumns) {
    return RunBlock<VectorLanes, kBlockVectors>(p, state_in, state, head, first);
  }
  int64_t c = 0;
  for (; c + simd::kLanes <= count; c += simd::kLanes) {
    RunBlock<VectorLanes, 1>(p, state_in, state, head, first + c);
  }
  for (; c < count; ++c) RunBlock<ScalarLanes, 1>(p, state_in, state, head, first + c);
}

}  // namespace dscale::cpu::DSCALE_DELTA_VARIANT
