#pragma once
// The CPU backend's operations for the model templates (decoder_layer.h, decoder_forward.h,
// dflash_forward.h): the kernels of kernels/cpu and WeightMatrix products on host memory, K/V
// in a KvStore. The reference the CUDA backend (model/cuda/cuda_ops.h) is tested against.
// Everything is inline, so a template instantiated with CpuOps is the plain CPU code.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/expert_occupancy.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/expert_router.h"
#include "kernels/cpu/linear_attention.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/softmax.h"
#include "kv/paged_kv_cache.h"
#include "model/batch_view.h"
#include "model/decoder_layer.h"
#include "model/decoder_weights.h"
#include "model/expert_products.h"
#include "model/weight_matrix.h"

namespace dscale {

// A forward's intermediates, grown on demand and reused across calls.
struct LayerScratch {
  std::vector<float> x;        // [rows, hidden] residual stream
  std::vector<float> normed;   // [rows, hidden]
  std::vector<float> qkv;      // [rows, q_dim + 2·kv_dim]
  std::vector<float> attn;     // [rows, q_dim] (linear layers: [rows, value_width])
  std::vector<float> conv;     // linear layers: [rows, conv_dim] the conv's outputs
  std::vector<float> gate_up;  // [rows, 2·intermediate]
  std::vector<float> act;      // [rows, intermediate]
  // Sparse MLP layers only.
  std::vector<float> router_logits;  // [rows, experts]
  std::vector<int32_t> route_ids;    // [rows, top_k]
  std::vector<float> route_weights;  // [rows, top_k]
  ExpertScratch experts;
  // The distinct experts the forward's sparse layers ran, summed over those layers, and the
  // experts its spans' first rows woke (reset by each forward; ForwardOutput::experts_run and
  // ::expert_occupancy).
  int64_t experts_run = 0;
  ExpertOccupancy occupancy;
  std::vector<uint64_t> expert_bits;  // one span's experts seen so far, a bit each
};

struct CpuOps {
  // The model template computes linear-attention layers and gated attention outputs here.
  static constexpr bool kLinearAttention = true;
  // How BF16 and int8 weight blocks take their activations (weight_matrix.h); the model's
  // setting.
  ActivationModes activations = {};
  // The sequences' linear-attention states (a hybrid target's forward); may be null otherwise.
  RecurrentStates* recurrent = nullptr;

  // `n` floats of `buffer`, grown if needed.
  static float* Buffer(std::vector<float>& buffer, int64_t n) {
    return GrowBuffer(buffer, static_cast<size_t>(n));
  }
  // `n` ints of `buffer`, grown if needed.
  static int32_t* IndexBuffer(std::vector<int32_t>& buffer, int64_t n) {
    return GrowBuffer(buffer, static_cast<size_t>(n));
  }
  // out[rows, out_dim] (+)= in[rows, in_dim] · wᵀ (the dims are w's).
  void Gemm(const float* in, int64_t /*in_dim*/, const WeightMatrix& w, float* out,
            int64_t /*out_dim*/, int64_t rows, bool accumulate) const {
    Project(in, w, out, rows, accumulate, activations);
  }
  static void RmsNorm(const float* x, const float* gain, float* y, int64_t rows, int64_t dim,
                      float eps) {
    cpu::RmsNorm(x, gain, y, rows, dim, eps);
  }
  static void HeadRmsNorm(float* x, const float* gain, int64_t rows, int64_t heads,
                          int64_t head_dim, int64_t row_stride, float eps) {
    cpu::HeadRmsNorm(x, gain, rows, heads, head_dim, row_stride, eps);
  }
  static void Rope(float* x, const int32_t* positions, int64_t rows, int64_t heads,
                   int64_t head_dim, int64_t row_stride, const RopeSpec& rope) {
    cpu::ApplyRope(x, positions, rows, heads, head_dim, row_stride, rope);
  }
  static void SwiGlu(const float* gate_up, float* out, int64_t rows, int64_t inter) {
    cpu::SwiGlu(gate_up, out, rows, inter);
  }
  // ids, weights [rows, top_k]: each row's experts and weights from its router logits
  // [rows, experts], which it overwrites (kernels/cpu/expert_router.h).
  static void RouteTopK(float* logits, int32_t rows, const MoeDims& m, int32_t* ids,
                        float* weights) {
    cpu::RouteTopK(logits, rows, m.experts, m.top_k, m.normalize, ids, weights);
  }
  // Adds to s.occupancy the distinct experts among the first 1, 2, 4, … 256 rows of every span
  // of `batch` that long (core/expert_occupancy.h; ids [rows, top_k]: each row's experts).
  static void CountSpanExperts(const BatchView& batch, const int32_t* ids, const MoeDims& m,
                               LayerScratch& s) {
    s.expert_bits.resize(static_cast<size_t>((m.experts + 63) / 64));
    for (int32_t i = 0; i < batch.num_spans; ++i) {
      const StepSpan& span = batch.spans[i];
      std::fill(s.expert_bits.begin(), s.expert_bits.end(), uint64_t{0});
      int32_t distinct = 0;
      for (int p = 0, r = 0; p < ExpertOccupancy::kPoints; ++p) {
        const int32_t upto = ExpertOccupancy::kRows[static_cast<size_t>(p)];
        if (span.q_len < upto) break;
        for (; r < upto; ++r) {
          for (int32_t j = 0; j < m.top_k; ++j) {
            const int32_t e = ids[int64_t{span.q_start + r} * m.top_k + j];
            uint64_t& word = s.expert_bits[static_cast<size_t>(e / 64)];
            const uint64_t bit = uint64_t{1} << (e % 64);
            distinct += (word & bit) == 0;
            word |= bit;
          }
        }
        s.occupancy.distinct[static_cast<size_t>(p)] += distinct;
        ++s.occupancy.count[static_cast<size_t>(p)];
      }
    }
  }
  // x[rows, hidden] += each row's routed experts' outputs, weighted (expert_products.h).
  void ExpertProducts(const float* normed, const SparseMlpWeights& moe, const LayerDims& d,
                      int32_t rows, const int32_t* ids, const float* weights, LayerScratch& s,
                      float* x) const {
    s.experts_run += dscale::ExpertProducts(normed, moe, d.hidden, rows,
                                            {.ids = ids, .weights = weights, .k = d.moe.top_k},
                                            activations, s.experts, x);
  }
  // Per span of `batch`, in order: the causal conv of its in_proj rows' qkv part (proj, row
  // stride proj_stride) into mixed [rows, conv_dim], then the delta rule into o [rows,
  // value_width], on the span's working state of layer `layer` (kv/recurrent_state.h), keeping
  // the replay inputs (the rows' qkv, b and a) of rows that may be rejected.
  void RecurrentSpans(const BatchView& batch, int32_t layer, const GatedDeltaNetWeights& w,
                      const LinearDims& l, const float* proj, int64_t proj_stride, float* mixed,
                      float* o) const {
    DSCALE_CHECK(recurrent != nullptr);
    const int64_t conv_dim = l.conv_dim(), ba_offset = conv_dim + l.value_width();
    const int64_t width = recurrent->shape().input_values;
    for (int32_t i = 0; i < batch.num_spans; ++i) {
      const StepSpan& span = batch.spans[i];
      const int64_t r0 = span.q_start;
      // Rows that may be rejected keep their inputs for the commit's replay.
      float* inputs = recurrent->in_place(span.seq) ? nullptr : recurrent->Inputs(span.seq, layer);
      for (int32_t r = 0; inputs != nullptr && r < span.q_len; ++r, inputs += width) {
        const float* row = proj + (r0 + r) * proj_stride;
        std::memcpy(inputs, row, static_cast<size_t>(conv_dim) * sizeof(float));
        std::memcpy(inputs + conv_dim, row + ba_offset,
                    static_cast<size_t>(2 * l.value_heads) * sizeof(float));
      }
      // The rows in segments ending at the span's capture positions, whose states are copied
      // (RecurrentStates::CaptureAfter): a row's step depends only on the state before it, so
      // the segments give the bits of one call.
      const std::span<const int32_t> captures = recurrent->capture_positions(span.seq);
      float* conv_window = recurrent->WorkingConv(span.seq, layer);
      float* delta = recurrent->WorkingDelta(span.seq, layer);
      // The working copy starts as the committed state: the conv's window copied (K − 1 rows),
      // the delta state read by the first segment's delta rule as it writes the copy (a pass
      // over tens of MB a request saved). In place the working state is the committed one.
      const float* committed_conv = recurrent->Conv(span.seq, layer);
      if (committed_conv != conv_window) {
        std::copy_n(committed_conv, recurrent->shape().conv_values, conv_window);
      }
      const float* delta_in = recurrent->Delta(span.seq, layer);
      int64_t done = 0;
      for (size_t c = 0; c <= captures.size(); ++c) {
        if (c == captures.size() && done == span.q_len) break;  // captured at the span's end
        const int64_t end = c < captures.size() ? captures[c] - span.ctx_len : span.q_len;
        DSCALE_CHECK_MSG(end > done && end <= span.q_len,
                         "a capture position lies within its span, past its first row");
        const int64_t r = r0 + done;
        RecurrentRows(w, l, proj + r * proj_stride, proj_stride, proj + r * proj_stride + ba_offset,
                      end - done, conv_window, delta_in, delta, mixed + r * conv_dim,
                      o + r * l.value_width());
        delta_in = delta;
        done = end;
        if (c < captures.size()) {
          const int64_t values = recurrent->shape().conv_values + recurrent->shape().delta_values;
          std::copy_n(conv_window, values, recurrent->Capture(span.seq, c, layer));
        }
      }
    }
  }
  // `rows` rows of one request through the conv and the delta rule: the conv from and into
  // conv_window, the delta rule from delta_in (may be delta) into delta; qkv rows and their b, a
  // rows (stride `stride` both) in, mixed [rows, conv_dim] and o [rows, value_width] out. The
  // one path of a forward's span and a replay.
  static void RecurrentRows(const GatedDeltaNetWeights& w, const LinearDims& l, const float* qkv,
                            int64_t stride, const float* ba, int64_t rows, float* conv_window,
                            const float* delta_in, float* delta, float* mixed, float* o) {
    const int64_t conv_dim = l.conv_dim();
    cpu::CausalConv1d(qkv, stride, rows, conv_dim, l.conv_kernel, w.conv.data(), conv_window, mixed,
                      conv_dim);
    cpu::GatedDeltaRule({.qk = mixed,
                         .qk_stride = conv_dim,
                         .v = mixed + 2 * l.key_width(),
                         .v_stride = conv_dim,
                         .ba = ba,
                         .ba_stride = stride,
                         .a_log = w.a_log.data(),
                         .dt_bias = w.dt_bias.data(),
                         .state = delta,
                         .state_in = delta_in,
                         .out = o,
                         .out_stride = l.value_width(),
                         .rows = rows,
                         .key_heads = l.key_heads,
                         .value_heads = l.value_heads,
                         .key_dim = l.key_dim,
                         .value_dim = l.value_dim});
  }
  static void GatedRmsNorm(float* x, const float* z, int64_t z_stride, const float* gain,
                           int64_t rows, int64_t heads, int64_t head_dim, float eps) {
    cpu::GatedRmsNorm(x, z, z_stride, gain, rows, heads, head_dim, eps);
  }
  static void SigmoidGate(float* x, const float* gate, int64_t gate_stride, int64_t rows,
                          int64_t dim) {
    cpu::SigmoidGate(x, gate, gate_stride, rows, dim);
  }
  // x[i] *= scale for i < n.
  static void Scale(float* x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; ++i) x[i] *= scale;
  }
  // x[r, :] = table[tokens[r], :] for the batch's rows.
  static void Embed(const WeightMatrix& table, int64_t /*vocab*/, int64_t /*dim*/,
                    const int32_t* tokens, int32_t rows, float* x) {
    dscale::GatherRows(table, tokens, rows, x);
  }
  // Row r's k and v (row_stride apart) into layer `layer` at batch.kv_slots[r] (all rows live).
  static void StoreKv(KvStore& kv, int32_t layer, const BatchView& batch, const float* k,
                      const float* v, int64_t row_stride) {
    for (int32_t r = 0; r < batch.rows; ++r) {
      kv.Store(layer, batch.kv_slots[r], k + r * row_stride, v + r * row_stride);
    }
  }
  // out [rows, q_dim] = paged attention of q (row stride q_stride) over the batch's spans.
  static void Attention(const KvStore& kv, int32_t layer, const BatchView& batch,
                        const LayerDims& d, const float* q, int64_t q_stride, float* out) {
    const cpu::AttentionParams params{
        .q = q,
        .q_row_stride = q_stride,
        .out = out,
        .heads = d.heads,
        .kv_heads = d.kv_heads,
        .head_dim = d.head_dim,
        .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim))),
        .causal = batch.causal,
        .spans = batch.spans,
        .num_spans = batch.num_spans,
        .kv = kv.Layer(layer),
        .window = batch.window};
    cpu::PagedAttention(params, batch.tile_rows);
  }
  // Attention writes every row of a CPU batch (each lies in a span): nothing to clear.
  static void ClearAttentionRows(LayerScratch& /*s*/, int32_t /*rows*/, int64_t /*q_dim*/) {}
  // features[r, slot, :] = x[r, :] (features [rows, num_slots, dim]).
  static void CaptureRows(const float* x, int32_t rows, int64_t dim, int32_t slot,
                          int32_t num_slots, float* features) {
    for (int32_t r = 0; r < rows; ++r) {
      std::memcpy(features + (int64_t{r} * num_slots + slot) * dim, x + r * dim,
                  static_cast<size_t>(dim) * sizeof(float));
    }
  }
  // out[i, :] = x[rows[i], :] for i < n.
  static void GatherRows(const float* x, int32_t /*x_rows*/, int64_t dim, const int32_t* rows,
                         int32_t n, float* out) {
    for (int32_t i = 0; i < n; ++i) {
      std::memcpy(out + i * dim, x + rows[i] * dim, static_cast<size_t>(dim) * sizeof(float));
    }
  }
  // out = rows first .. first + count − 1 of each of `blocks` blocks of `block` rows of x, back
  // to back.
  static void GatherBlockTails(const float* x, int32_t blocks, int32_t block, int32_t first,
                               int32_t count, int64_t dim, float* out) {
    DSCALE_CHECK(first + count <= block);
    const int64_t tail = int64_t{count} * dim;
    for (int32_t i = 0; i < blocks; ++i) {
      std::memcpy(out + i * tail, x + (int64_t{i} * block + first) * dim,
                  static_cast<size_t>(tail) * sizeof(float));
    }
  }
  static void Argmax(const float* x, int64_t rows, int64_t n, int32_t* out) {
    cpu::ArgmaxRows(x, rows, n, out);
  }
};

}  // namespace dscale
