#include "kernels/reference/reference_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace dscale::ref {

void Linear(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out,
            bool accumulate) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = accumulate ? static_cast<double>(y[r * out + o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        sum += static_cast<double>(x[r * in + i]) * static_cast<double>(w[o * in + i]);
      }
      y[r * out + o] = static_cast<float>(sum);
    }
  }
}

void LinearInt8(const float* x, const int8_t* w, const float* scales, float* y, int64_t rows,
                int64_t in, int64_t out, int64_t group, bool accumulate) {
  DSCALE_CHECK(group > 0);
  const int64_t groups = (in + group - 1) / group;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = accumulate ? static_cast<double>(y[r * out + o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) {
        const double weight = static_cast<double>(w[o * in + i]) * scales[o * groups + i / group];
        sum += static_cast<double>(x[r * in + i]) * weight;
      }
      y[r * out + o] = static_cast<float>(sum);
    }
  }
}

void LinearBf16(const float* x, const uint16_t* w, float* y, int64_t rows, int64_t in, int64_t out,
                bool bf16_activations, bool accumulate) {
  std::vector<float> xs(x, x + rows * in), ws(static_cast<size_t>(out * in));
  if (bf16_activations) {
    for (float& v : xs) v = Bf16ToF32(F32ToBf16(v));
  }
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = Bf16ToF32(w[i]);
  Linear(xs.data(), ws.data(), y, rows, in, out, accumulate);
}

void LinearInt4(const float* x, const uint8_t* w4, const float* scales, float* y, int64_t rows,
                int64_t in, int64_t out, bool int8_activations, bool accumulate) {
  constexpr int64_t kGroup = 32;
  const int64_t groups = (in + kGroup - 1) / kGroup;
  std::vector<int8_t> q(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      const int64_t g = i / kGroup, j = i % kGroup;
      const uint8_t byte = w4[(o * groups + g) * (kGroup / 2) + j % (kGroup / 2)];
      const int nibble = j < kGroup / 2 ? byte & 0xf : byte >> 4;
      q[o * in + i] = static_cast<int8_t>(nibble - 8);
    }
  }
  if (int8_activations) {
    LinearInt8Int8(x, q.data(), scales, y, rows, in, out, kGroup, accumulate);
  } else {
    LinearInt8(x, q.data(), scales, y, rows, in, out, kGroup, accumulate);
  }
}

void QuantizeActivationsInt8(const float* x, int64_t n, int64_t group, int8_t* q, float* scales) {
  DSCALE_CHECK(group > 0);
  for (int64_t g = 0; g * group < n; ++g) {
    const int64_t begin = g * group, end = std::min(n, begin + group);
    float largest = 0.0f;
    bool finite = true;
    for (int64_t i = begin; i < end; ++i) {
      finite = finite && std::isfinite(x[i]);
      largest = std::max(largest, std::fabs(x[i]));
    }
    const float d = finite ? largest / 127.0f : std::numeric_limits<float>::quiet_NaN();
    scales[g] = d;
    for (int64_t i = begin; i < end; ++i) {
      float v = 0.0f;
      if (finite && d != 0.0f) v = std::clamp(std::nearbyint(x[i] / d), -127.0f, 127.0f);
      q[i] = static_cast<int8_t>(v);
    }
  }
}

void QuantizeWeightsInt8(const float* w, int64_t n, int64_t group, int8_t* q, float* scales) {
  DSCALE_CHECK(group > 0);
  for (int64_t g = 0; g * group < n; ++g) {
    const int64_t begin = g * group, end = std::min(n, begin + group);
    float largest = 0.0f;
    for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(w[i]));
    // BF16 keeps an f32's top 16 bits: cut the rest off, and step up one BF16 value if that
    // lost anything.
    const float exact = largest / 127.0f;
    float s = std::bit_cast<float>(std::bit_cast<uint32_t>(exact) & 0xffff0000u);
    if (s < exact) s = std::bit_cast<float>(std::bit_cast<uint32_t>(s) + 0x10000u);
    scales[g] = s;
    for (int64_t i = begin; i < end; ++i) {
      const float v = s == 0.0f ? 0.0f : std::clamp(std::nearbyint(w[i] / s), -127.0f, 127.0f);
      q[i] = static_cast<int8_t>(v);
    }
  }
}

void LinearInt8Int8(const float* x, const int8_t* w, const float* scales, float* y, int64_t rows,
                    int64_t in, int64_t out, int64_t group, bool accumulate) {
  DSCALE_CHECK(group > 0);
  const int64_t groups = (in + group - 1) / group;
  std::vector<int8_t> q(static_cast<size_t>(in));
  std::vector<float> dx(static_cast<size_t>(groups));
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeActivationsInt8(x + r * in, in, group, q.data(), dx.data());
    for (int64_t o = 0; o < out; ++o) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t dot = 0;
        for (int64_t i = g * group; i < std::min(in, (g + 1) * group); ++i) {
          dot += int64_t{q[i]} * int64_t{w[o * in + i]};
        }
        const float p = dx[g] * scales[o * groups + g];
        acc = std::fma(p, static_cast<float>(dot), acc);
      }
      float& dst = y[r * out + o];
      dst = accumulate ? dst + acc : acc;
    }
  }
}

namespace {

// x[i] · weight[i] / sqrt(mean(x²) + eps) over n values, in double; y may alias x.
void NormalizeVector(const float* x, const float* weight, float* y, int64_t n, float eps) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>(static_cast<double>(x[i]) * inv_rms * weight[i]);
  }
}

}  // namespace

void RmsNorm(const float* x, const float* weight, float* y, int64_t rows, int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) NormalizeVector(x + r * dim, weight, y + r * dim, dim, eps);
}

void HeadRmsNorm(float* x, const float* weight, int64_t rows, int64_t heads, int64_t head_dim,
                 int64_t row_stride, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + r * row_stride + h * head_dim;
      NormalizeVector(xh, weight, xh, head_dim, eps);
    }
  }
}

void ApplyRope(float* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim,
               int64_t row_stride, const RopeSpec& rope) {
  const int64_t rotated = rope.rotary_dim > 0 ? rope.rotary_dim : head_dim;
  DSCALE_CHECK(head_dim % 2 == 0 && rotated % 2 == 0 && rotated <= head_dim);
  const int64_t half = rotated / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * row_stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = positions[r] * RopeInvFreq(rope, i, rotated);
        const double a = v[i];
        const double b = v[i + half];
        v[i] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
        v[i + half] = static_cast<float>(b * std::cos(angle) + a * std::sin(angle));
      }
    }
  }
}

void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gate_up[r * 2 * inter + i];
      const double u = gate_up[r * 2 * inter + inter + i];
      out[r * inter + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
}

void SiluInPlace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    x[i] = static_cast<float>(v / (1.0 + std::exp(-v)));
  }
}

void GruUpdate(const float* gates_x, const float* gates_h, float* h, int64_t rows, int64_t hidden) {
  const auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int64_t row = 0; row < rows; ++row) {
    const float* gx = gates_x + row * 3 * hidden;
    const float* gh = gates_h + row * 3 * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      const double r = sigmoid(double{gx[i]} + gh[i]);
      const double z = sigmoid(double{gx[hidden + i]} + gh[hidden + i]);
      const double n = std::tanh(double{gx[2 * hidden + i]} + r * gh[2 * hidden + i]);
      float& state = h[row * hidden + i];
      state = static_cast<float>((1.0 - z) * n + z * state);
    }
  }
}

void EmbeddingGather(const float* table, int64_t vocab, int64_t dim, const int32_t* ids,
                     int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    DSCALE_CHECK(ids[r] >= 0 && ids[r] < vocab);
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = table[ids[r] * dim + i];
  }
}

void SoftmaxRows(float* x, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * n;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(row[i]));
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
    for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(std::exp(row[i] - max) / sum);
  }
}

void RouteTopK(const float* logits, int64_t rows, int64_t experts, int64_t k, bool normalize,
               int32_t* ids, float* weights) {
  std::vector<double> p(static_cast<size_t>(experts));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * experts;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t e = 0; e < experts; ++e) max = std::max(max, static_cast<double>(row[e]));
    double sum = 0.0;
    for (int64_t e = 0; e < experts; ++e) sum += p[e] = std::exp(row[e] - max);
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double chosen = 0.0;
    for (int64_t j = 0; j < k; ++j) chosen += p[order[j]] / sum;
    for (int64_t j = 0; j < k; ++j) {
      ids[r * k + j] = static_cast<int32_t>(order[j]);
      weights[r * k + j] = static_cast<float>(p[order[j]] / sum / (normalize ? chosen : 1.0));
    }
  }
}

void ArgmaxRows(const float* x, int64_t rows, int64_t n, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (x[r * n + i] > x[r * n + best]) best = i;
    }
    out[r] = static_cast<int32_t>(best);
  }
}

void MatMul(const float* x, const float* w, float* y, int64_t rows, int64_t in, int64_t out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        sum += static_cast<double>(x[r * in + i]) * static_cast<double>(w[i * out + o]);
      }
      y[r * out + o] = static_cast<float>(sum);
    }
  }
}

cpu::ExpMoments ShiftedExpMoments(const float* x, int64_t n, float shift) {
  cpu::ExpMoments m;
  for (int64_t i = 0; i < n; ++i) {
    const double shifted = static_cast<double>(x[i]) - shift;
    const double e = std::exp(shifted);
    m.sum += e;
    m.weighted += e * shifted;
  }
  return m;
}

void LargestValues(const float* x, int64_t n, int count, float* out) {
  std::vector<float> sorted(x, x + n);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::copy_n(sorted.begin(), count, out);
}

namespace {

// Element i of one layer's K or V rows: f32 as stored, or BF16 widened.
double KvElement(const float* f32, const uint16_t* bf16, int64_t i) {
  return f32 != nullptr ? f32[i] : Bf16ToF32(bf16[i]);
}

// Row `row` of the span, head `head`: softmax over the visible keys, then the weighted sum.
void AttendRow(const cpu::AttentionParams& p, const StepSpan& span, int32_t row, int32_t head) {
  const int64_t hd = p.head_dim;
  const int32_t kv_head = head / (p.heads / p.kv_heads);
  int32_t visible = p.causal ? span.ctx_len + row + 1 : span.ctx_len + span.q_len;
  int32_t first = 0;
  if (p.window > 0) {
    first = std::max(0, span.ctx_len + row - p.window + 1);
    visible = std::min(visible, span.ctx_len + row + p.window);
  }
  const float* q = p.q + (span.q_start + row) * p.q_row_stride + head * hd;
  auto slot_offset = [&](int64_t pos) {
    const int64_t slot =
        static_cast<int64_t>(span.page_table[pos / p.kv.page_size]) * p.kv.page_size +
        pos % p.kv.page_size;
    return (slot * p.kv_heads + kv_head) * hd;
  };
  std::vector<double> scores(static_cast<size_t>(visible - first));
  double max = -std::numeric_limits<double>::infinity();
  for (int32_t pos = first; pos < visible; ++pos) {
    const int64_t k = slot_offset(pos);
    double dot = 0.0;
    for (int64_t d = 0; d < hd; ++d) dot += q[d] * KvElement(p.kv.k, p.kv.k_bf16, k + d);
    scores[pos - first] = dot * p.scale;
    max = std::max(max, scores[pos - first]);
  }
  double sum = 0.0;
  for (double& s : scores) {
    s = std::exp(s - max);
    sum += s;
  }
  std::vector<double> acc(static_cast<size_t>(hd), 0.0);
  for (int32_t pos = first; pos < visible; ++pos) {
    const int64_t v = slot_offset(pos);
    for (int64_t d = 0; d < hd; ++d) {
      acc[d] += scores[pos - first] / sum * KvElement(p.kv.v, p.kv.v_bf16, v + d);
    }
  }
  float* out = p.out + static_cast<int64_t>(span.q_start + row) * p.heads * hd + head * hd;
  for (int64_t d = 0; d < hd; ++d) out[d] = static_cast<float>(acc[d]);
}

}  // namespace

void PagedAttention(const cpu::AttentionParams& params) {
  DSCALE_CHECK(params.heads > 0 && params.kv_heads > 0 && params.heads % params.kv_heads == 0);
  DSCALE_CHECK(params.kv.page_size > 0);
  for (int32_t s = 0; s < params.num_spans; ++s) {
    const StepSpan& span = params.spans[s];
    for (int32_t row = 0; row < span.q_len; ++row) {
      for (int32_t h = 0; h < params.heads; ++h) AttendRow(params, span, row, h);
    }
  }
}

// ---- The Gated DeltaNet pieces (cpu/linear_attention.h), in double.

namespace {
double SiluD(double x) { return x / (1.0 + std::exp(-x)); }
double SigmoidD(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double SoftplusD(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
}  // namespace

void CausalConv1d(const float* in, int64_t in_stride, int64_t rows, int64_t channels,
                  int64_t kernel, const float* taps, float* window, float* out,
                  int64_t out_stride) {
  const int64_t past = kernel - 1;
  // u: the window's rows, then the span's.
  std::vector<float> u(static_cast<size_t>((past + rows) * channels));
  std::copy(window, window + past * channels, u.begin());
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(in + r * in_stride, in + r * in_stride + channels, u.begin() + (past + r) * channels);
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < channels; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        acc += static_cast<double>(taps[j * channels + c]) * u[(r + j) * channels + c];
      }
      out[r * out_stride + c] = static_cast<float>(SiluD(acc));
    }
  }
  std::copy(u.end() - past * channels, u.end(), window);
}

void GatedDeltaRule(const cpu::GatedDeltaSpan& p) {
  const int64_t dk = p.key_dim, dv = p.value_dim, group = p.value_heads / p.key_heads;
  std::vector<double> s(static_cast<size_t>(dk * dv)), q(dk), k(dk), delta(dv);
  for (int64_t h = 0; h < p.value_heads; ++h) {
    float* state = p.state + h * dk * dv;
    std::copy(state, state + dk * dv, s.begin());
    for (int64_t r = 0; r < p.rows; ++r) {
      const float* qr = p.qk + r * p.qk_stride + (h / group) * dk;
      const float* kr = qr + p.key_heads * dk;
      double qq = 0, kk = 0;
      for (int64_t i = 0; i < dk; ++i) {
        qq += static_cast<double>(qr[i]) * qr[i];
        kk += static_cast<double>(kr[i]) * kr[i];
      }
      for (int64_t i = 0; i < dk; ++i) {
        q[i] = qr[i] / std::sqrt(qq + 1e-6) / std::sqrt(static_cast<double>(dk));
        k[i] = kr[i] / std::sqrt(kk + 1e-6);
      }
      const float* ba = p.ba + r * p.ba_stride;
      const double g = -std::exp(static_cast<double>(p.a_log[h])) *
                       SoftplusD(static_cast<double>(ba[p.value_heads + h]) + p.dt_bias[h]);
      const double beta = SigmoidD(ba[h]);
      const float* v = p.v + r * p.v_stride + h * dv;
      for (double& e : s) e *= std::exp(g);
      for (int64_t j = 0; j < dv; ++j) {
        double mem = 0;
        for (int64_t i = 0; i < dk; ++i) mem += s[i * dv + j] * k[i];
        delta[j] = (v[j] - mem) * beta;
      }
      for (int64_t i = 0; i < dk; ++i) {
        for (int64_t j = 0; j < dv; ++j) s[i * dv + j] += k[i] * delta[j];
      }
      for (int64_t j = 0; j < dv; ++j) {
        double o = 0;
        for (int64_t i = 0; i < dk; ++i) o += s[i * dv + j] * q[i];
        p.out[r * p.out_stride + h * dv + j] = static_cast<float>(o);
      }
    }
    for (int64_t e = 0; e < dk * dv; ++e) state[e] = static_cast<float>(s[e]);
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
      const double inv = 1.0 / std::sqrt(sum / static_cast<double>(head_dim) + eps);
      for (int64_t i = 0; i < head_dim; ++i) {
        xh[i] = static_cast<float>(xh[i] * inv * gain[i] * SiluD(zh[i]));
      }
    }
  }
}

void SigmoidGate(float* x, const float* gate, int64_t gate_stride, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) {
      x[r * dim + i] = static_cast<float>(x[r * dim + i] * SigmoidD(gate[r * gate_stride + i]));
    }
  }
}

}  // namespace dscale::ref
