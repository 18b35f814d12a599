#include "kernels/cpu/linear_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/delta_rule.h"

#define DSCALE_DELTA_VARIANT build_vectors
#include "kernels/cpu/delta_rule_columns.h"

namespace dscale::cpu {

void DeltaRuleColumnsBuild(const DeltaRuleRows& rows, const float* state_in, float* state,
                           int64_t head, int64_t first, int64_t count) {
  build_vectors::DeltaRuleColumns(rows, state_in, state, head, first, count);
}
int64_t DeltaRuleBlockBuild() { return build_vectors::kBlockColumns; }

namespace {

using simd::kLanes;

// torch's softplus (threshold 20: linear above it).
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// 1 / sqrt(Σ x² + eps) over n values, summed in double (simd::SumSquares' order, one rounding).
float InverseL2(const float* x, int64_t n, double eps) {
  return static_cast<float>(1.0 / std::sqrt(simd::SumSquares(x, n) + eps));
}

// Work below this many state values a span (value heads · key_dim · value_dim · rows) runs on
// one thread.
constexpr int64_t kDeltaParallelMin = int64_t{1} << 18;
// Rows whose q̂, k̂ and gates are prepared at once (at Qwen3.5's 16 key heads of 128, 1 MB).
constexpr int64_t kDeltaChunkRows = 64;

// Row r's q̂ and k̂ for key head kh (GatedDeltaRule's contract).
void PrepareKeyHead(const GatedDeltaSpan& p, int64_t r, int64_t kh, float* qk_hat) {
  const int64_t dk = p.key_dim;
  const float* q = p.qk + r * p.qk_stride + kh * dk;
  const float* k = q + p.key_heads * dk;
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  const float qn = InverseL2(q, dk, 1e-6) * q_scale, kn = InverseL2(k, dk, 1e-6);
  for (int64_t i = 0; i < dk; ++i) {
    qk_hat[i] = q[i] * qn;
    qk_hat[dk + i] = k[i] * kn;
  }
}
// Row r's e^g and β for value head h.
void PrepareGates(const GatedDeltaSpan& p, int64_t r, int64_t h, float* gates) {
  const float* ba = p.ba + r * p.ba_stride;
  const float g = -std::exp(p.a_log[h]) * Softplus(ba[p.value_heads + h] + p.dt_bias[h]);
  gates[0] = std::exp(g);
  gates[1] = Sigmoid(ba[h]);
}

// One row of the conv over channels [begin, end) (whole vectors) and [end, tail_end) (single
// channels): u[j] is input u_{r−K+1+j}, taps [kKernel, channels]. kKernel 0: `kernel` at run time.
template <int64_t kKernel>
void ConvRow(const float* const* u, const float* taps, int64_t channels, int64_t kernel,
             int64_t begin, int64_t end, int64_t tail_end, float* y) {
  const int64_t k = kKernel > 0 ? kKernel : kernel;
  for (int64_t c = begin; c < end; c += kLanes) {
    simd::Floats acc{};
#pragma GCC unroll 8
    for (int64_t j = 0; j < k; ++j) {
      acc = simd::Load(taps + j * channels + c) * simd::Load(u[j] + c) + acc;
    }
    simd::Store(y + c, simd::Silu(acc));
  }
  for (int64_t c = end; c < tail_end; ++c) {
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) acc = taps[j * channels + c] * u[j][c] + acc;
    y[c] = Silu(acc);
  }
}

}  // namespace

void CausalConv1d(const float* in, int64_t in_stride, int64_t rows, int64_t channels,
                  int64_t kernel, const float* taps, float* window, float* out,
                  int64_t out_stride) {
  const int64_t past = kernel - 1;
  // Input u_m of the sequence the window's rows begin (m < past: window row m; else span row
  // m − past).
  const auto input = [&](int64_t m) {
    return m < past ? window + m * channels : in + (m - past) * in_stride;
  };
  // Channels are independent: each thread takes a run of whole vectors (the tail's channels go to
  // the last) and walks the rows in order, so the K inputs a row reads were read by the rows just
  // before it.
  const int64_t vectors = channels / kLanes;
#pragma omp parallel if (rows * channels >= (int64_t{1} << 16))
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = vectors * t / threads * kLanes,
                  end = vectors * (t + 1) / threads * kLanes;
    const int64_t tail_end = t + 1 == threads ? channels : end;
    std::vector<const float*> u(static_cast<size_t>(kernel));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < kernel; ++j) u[static_cast<size_t>(j)] = input(r + j);
      float* y = out + r * out_stride;
      // Qwen3.5's width compiled fixed; any other at run time, the same arithmetic.
      if (kernel == 4) {
        ConvRow<4>(u.data(), taps, channels, kernel, begin, end, tail_end, y);
      } else {
        ConvRow<0>(u.data(), taps, channels, kernel, begin, end, tail_end, y);
      }
    }
  }
  // The window keeps the sequence's last `past` inputs; row m moves to m (m ascending reads only
  // rows at or after the one it writes).
  for (int64_t m = 0; m < past; ++m) {
    const float* from = input(rows + m);
    if (from != window + m * channels) {
      std::memmove(window + m * channels, from, static_cast<size_t>(channels) * sizeof(float));
    }
  }
}

void GatedDeltaRule(const GatedDeltaSpan& span) {
  GatedDeltaRuleIn(
      span, CpuFeaturesInUse().Avx512() ? DeltaRuleVectors::kAvx512 : DeltaRuleVectors::kBuild);
}

void GatedDeltaRuleIn(const GatedDeltaSpan& p, DeltaRuleVectors vectors) {
  const int64_t dk = p.key_dim, dv = p.value_dim;
  const bool avx512 = vectors == DeltaRuleVectors::kAvx512;
  DSCALE_CHECK_MSG(!avx512 || CpuFeaturesInUse().Avx512(), "AVX-512 blocks on a CPU without it");
  const int64_t block = avx512 ? DeltaRuleBlockAvx512() : DeltaRuleBlockBuild();
  const auto columns = avx512 ? DeltaRuleColumnsAvx512 : DeltaRuleColumnsBuild;
  const int64_t blocks = (dv + block - 1) / block;
  const int64_t chunk = std::min(p.rows, kDeltaChunkRows);
  std::vector<float> qk_hat(static_cast<size_t>(chunk * p.key_heads * 2 * dk));
  std::vector<float> gates(static_cast<size_t>(chunk * p.value_heads * 2));
#pragma omp parallel if (p.value_heads * dk * dv * p.rows >= kDeltaParallelMin)
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const int64_t n = std::min(chunk, p.rows - r0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n * p.key_heads; ++i) {
      PrepareKeyHead(p, r0 + i / p.key_heads, i % p.key_heads, qk_hat.data() + i * 2 * dk);
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n * p.value_heads; ++i) {
      PrepareGates(p, r0 + i / p.value_heads, i % p.value_heads, gates.data() + i * 2);
    }
    const DeltaRuleRows rows{.qk_hat = qk_hat.data(),
                             .gates = gates.data(),
                             .v = p.v + r0 * p.v_stride,
                             .v_stride = p.v_stride,
                             .out = p.out + r0 * p.out_stride,
                             .out_stride = p.out_stride,
                             .rows = n,
                             .key_heads = p.key_heads,
                             .value_heads = p.value_heads,
                             .key_dim = dk,
                             .value_dim = dv};
    // Heads and their column blocks are independent: each runs the chunk's rows in order.
#pragma omp for schedule(static)
    for (int64_t item = 0; item < p.value_heads * blocks; ++item) {
      const int64_t head = item / blocks, first = item % blocks * block;
      // The first chunk reads the state before the span; later ones the state it left.
      const float* from = r0 == 0 && p.state_in != nullptr ? p.state_in : p.state;
      columns(rows, from, p.state, head, first, std::min(block, dv - first));
    }
  }
}

void GatedRmsNorm(float* x, const float* z, int64_t z_stride, const float* gain, int64_t rows,
                  int64_t heads, int64_t head_dim, float eps) {
  const int64_t whole = head_dim / kLanes * kLanes;
#pragma omp parallel for schedule(static) if (rows * heads * head_dim >= (int64_t{1} << 16))
  for (int64_t rh = 0; rh < rows * heads; ++rh) {
    float* xh = x + rh * head_dim;
    const float* zh = z + rh / heads * z_stride + rh % heads * head_dim;
    const double mean = simd::SumSquares(xh, head_dim) / static_cast<double>(head_dim);
    const auto inv = static_cast<float>(1.0 / std::sqrt(mean + eps));
    const simd::Floats inv_lanes = simd::Splat(inv);
    for (int64_t i = 0; i < whole; i += kLanes) {
      simd::Store(xh + i, simd::Load(xh + i) * inv_lanes * simd::Load(gain + i) *
                              simd::Silu(simd::Load(zh + i)));
    }
    for (int64_t i = whole; i < head_dim; ++i) xh[i] = xh[i] * inv * gain[i] * Silu(zh[i]);
  }
}

void SigmoidGate(float* x, const float* gate, int64_t gate_stride, int64_t rows, int64_t dim) {
  const int64_t whole = dim / kLanes * kLanes;
#pragma omp parallel for schedule(static) if (rows * dim >= (int64_t{1} << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate + r * gate_stride;
    float* xr = x + r * dim;
    for (int64_t i = 0; i < whole; i += kLanes) {
      simd::Store(xr + i, simd::Load(xr + i) * simd::Sigmoid(simd::Load(g + i)));
    }
    for (int64_t i = whole; i < dim; ++i) xr[i] *= Sigmoid(g[i]);
  }
}

}  // namespace dscale::cpu
