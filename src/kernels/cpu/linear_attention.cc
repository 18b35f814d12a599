#include "kernels/cpu/linear_attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/activation.h"

namespace dscale::cpu {
namespace {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }
// torch's softplus (threshold 20: linear above it).
float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// 1 / sqrt(Σ x² + eps) over n values, summed in double (one rounding).
float InverseL2(const float* x, int64_t n, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(sum + eps));
}

// One row's update of one value head's state s [key_dim, value_dim] and its output.
void DeltaStep(float* s, const float* k, const float* q, const float* v, float decay, float beta,
               int64_t dk, int64_t dv, float* kv_mem, float* out) {
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = s + i * dv;
#pragma omp simd
    for (int64_t j = 0; j < dv; ++j) {
      row[j] *= decay;
      kv_mem[j] += row[j] * k[i];
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = (v[j] - kv_mem[j]) * beta;  // now the delta
  for (int64_t j = 0; j < dv; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = s + i * dv;
#pragma omp simd
    for (int64_t j = 0; j < dv; ++j) {
      row[j] += k[i] * kv_mem[j];
      out[j] += row[j] * q[i];
    }
  }
}

}  // namespace

void CausalConv1d(const float* in, int64_t in_stride, int64_t rows, int64_t channels,
                  int64_t kernel, const float* taps, float* window, float* out,
                  int64_t out_stride) {
  const int64_t past = kernel - 1;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * in_stride;
    float* y = out + r * out_stride;
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) {
      float acc = 0.0f;
      for (int64_t j = 0; j < past; ++j) acc += taps[c * kernel + j] * window[j * channels + c];
      acc += taps[c * kernel + past] * x[c];
      y[c] = Silu(acc);
    }
    if (past == 0) continue;
    std::memmove(window, window + channels,
                 static_cast<size_t>((past - 1) * channels) * sizeof(float));
    std::memcpy(window + (past - 1) * channels, x, static_cast<size_t>(channels) * sizeof(float));
  }
}

void GatedDeltaRule(const GatedDeltaSpan& p) {
  const int64_t dk = p.key_dim, dv = p.value_dim, group = p.value_heads / p.key_heads;
  const int64_t key_width = p.key_heads * dk;
  const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  // Heads are independent: each runs its rows in order on one thread.
#pragma omp parallel if (p.value_heads * dk * dv * p.rows >= (int64_t{1} << 18))
  {
    std::vector<float> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk));
    std::vector<float> scratch(static_cast<size_t>(dv));
#pragma omp for schedule(static)
    for (int64_t h = 0; h < p.value_heads; ++h) {
      float* s = p.state + h * dk * dv;
      const int64_t kh = h / group;
      for (int64_t r = 0; r < p.rows; ++r) {
        const float* qr = p.qk + r * p.qk_stride + kh * dk;
        const float* kr = qr + key_width;
        const float qn = InverseL2(qr, dk, 1e-6) * q_scale, kn = InverseL2(kr, dk, 1e-6);
        for (int64_t i = 0; i < dk; ++i) {
          q[static_cast<size_t>(i)] = qr[i] * qn;
          k[static_cast<size_t>(i)] = kr[i] * kn;
        }
        const float* ba = p.ba + r * p.ba_stride;
        const float g = -std::exp(p.a_log[h]) * Softplus(ba[p.value_heads + h] + p.dt_bias[h]);
        DeltaStep(s, k.data(), q.data(), p.v + r * p.v_stride + h * dv, std::exp(g), Sigmoid(ba[h]),
                  dk, dv, scratch.data(), p.out + r * p.out_stride + h * dv);
      }
    }
  }
}

void GatedRmsNorm(float* x, const float* z, int64_t z_stride, const float* gain, int64_t rows,
                  int64_t heads, int64_t head_dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + (r * heads + h) * head_dim;
      const float* zh = z + r * z_stride + h * head_dim;
      double sum = 0;
      for (int64_t i = 0; i < head_dim; ++i) sum += static_cast<double>(xh[i]) * xh[i];
      const auto inv =
          static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(head_dim) + eps));
      for (int64_t i = 0; i < head_dim; ++i) xh[i] = xh[i] * inv * gain[i] * Silu(zh[i]);
    }
  }
}

void SigmoidGate(float* x, const float* gate, int64_t gate_stride, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate + r * gate_stride;
    float* xr = x + r * dim;
    for (int64_t i = 0; i < dim; ++i) xr[i] *= Sigmoid(g[i]);
  }
}

}  // namespace dscale::cpu
