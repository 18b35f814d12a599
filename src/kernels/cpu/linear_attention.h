#pragma once
// The Gated DeltaNet pieces of a hybrid target's linear-attention layers (Qwen3.5), and the
// gated attention output of its full-attention layers. Each kernel runs one request's span of
// rows in order against that request's state, so a row's bits depend only on the state before
// it and its own inputs: a one-row decode and a 16-row verify give the same bits for the same
// row, and no row depends on the other requests of a batch.

#include <cstdint>

namespace dscale::cpu {

// The depthwise causal conv of one span, then SiLU: for row r and channel c,
//   out[r, c] = silu(Σ_{j<K} taps[j, c] · u_{r−K+1+j}[c])
// where u is the window (the K − 1 inputs before the span, `window` [K − 1, channels], oldest
// first) followed by the span's rows in[r, :] (row stride in_stride), and taps [K, channels] are
// tap-major (a checkpoint's [channels, 1, K] transposed: a tap's channels are one stream). The
// sum runs j = 0 .. K − 1 in that order. `window` ends holding the last K − 1 inputs. out rows
// are out_stride apart and lie apart from in and window.
void CausalConv1d(const float* in, int64_t in_stride, int64_t rows, int64_t channels,
                  int64_t kernel, const float* taps, float* window, float* out, int64_t out_stride);

// One span of the gated delta rule. Row r's q and k ([key_heads · key_dim] each) lie at
// qk + r · qk_stride (q, then k at + key_heads · key_dim), its v [value_heads · value_dim] at
// v + r · v_stride, its b and a [value_heads] at ba + r · ba_stride (b, then a at + value_heads).
// Per value head h (key head h / (value_heads / key_heads)), state [value_heads, key_dim,
// value_dim] is carried:
//   q̂ = q / sqrt(Σq² + 1e−6) / sqrt(key_dim),  k̂ = k / sqrt(Σk² + 1e−6)
//   g = −exp(a_log[h]) · softplus(a + dt_bias[h]),  β = sigmoid(b)
//   S ← exp(g) · S;  S ← S + k̂ (β (v − Sᵀ k̂))ᵀ;  out = Sᵀ q̂
// out [rows, value_heads · value_dim] (row stride out_stride).
struct GatedDeltaSpan {
  const float* qk = nullptr;
  int64_t qk_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* ba = nullptr;
  int64_t ba_stride = 0;
  const float* a_log = nullptr;    // [value_heads]
  const float* dt_bias = nullptr;  // [value_heads]
  float* state = nullptr;          // [value_heads, key_dim, value_dim]: the state after the span
  // The state before the span, the same layout: `state` itself where null, else read once and
  // never written (a verify reads its request's committed state and writes its working copy).
  const float* state_in = nullptr;
  float* out = nullptr;
  int64_t out_stride = 0;
  int64_t rows = 0;
  int64_t key_heads = 0;
  int64_t value_heads = 0;
  int64_t key_dim = 0;
  int64_t value_dim = 0;
};
void GatedDeltaRule(const GatedDeltaSpan& span);

// In place over x [rows, heads · head_dim] (contiguous): per row and head
//   x ← x / sqrt(mean(x²) + eps) · gain · silu(z)
// with z [rows, heads · head_dim] at row stride z_stride and gain [head_dim] (plain, not 1 + w).
void GatedRmsNorm(float* x, const float* z, int64_t z_stride, const float* gain, int64_t rows,
                  int64_t heads, int64_t head_dim, float eps);

// In place over x [rows, dim] (contiguous): x ← x · sigmoid(gate), gate rows gate_stride apart.
void SigmoidGate(float* x, const float* gate, int64_t gate_stride, int64_t rows, int64_t dim);

}  // namespace dscale::cpu
