#pragma once
// The dense decoder target forward, written once over a backend's operations (`Ops`:
// model/cpu_ops.h, model/cuda/cuda_ops.h):
//
//   embedding → per layer RunDecoderLayer (decoder_layer.h), the residual stream copied out
//   after each capture layer → final RMSNorm → LM head, on the requested rows only

#include <cstdint>
#include <span>

#include "model/batch_view.h"
#include "model/decoder_layer.h"

namespace dscale {

// Where the target forward writes, in the backend's memory.
struct TargetOutputs {
  float* logits = nullptr;    // [rows, vocab], or [num_logit_rows, vocab] with logit_rows
  float* features = nullptr;  // [rows, capture_layers.size() · hidden]; may be null without
                              // capture layers
  // Array or null. When set, logits are computed only for these rows, in this order
  // (StepBatch::logit_rows()); each must lie in [0, rows). Null: every row.
  const int32_t* logit_rows = nullptr;
  int32_t num_logit_rows = 0;
};

// Stores every live row's K/V into `kv` at its slot, writes out.logits and, for each layer in
// `capture` (0-based, in list order), the residual stream after it into out.features. `w` is
// the backend's decoder weights (embed, layers, final_norm, LmHead()); `s` its scratch (x and the
// layer's buffers).
template <class Ops>
void RunDecoderForward(Ops& ops, const auto& w, const LayerDims& d, int64_t vocab,
                       const BatchView& batch, std::span<const int32_t> capture, auto& kv, auto& s,
                       const TargetOutputs& out) {
  const int32_t rows = batch.rows;
  if (rows == 0) return;
  float* x = ops.Buffer(s.x, rows * d.hidden);
  ops.Embed(w.embed, vocab, d.hidden, batch.tokens, rows, x);
  ops.ClearAttentionRows(s, rows, d.q_dim());
  const auto num_layers = static_cast<int32_t>(w.layers.size());
  const auto num_capture = static_cast<int32_t>(capture.size());
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    RunDecoderLayer(ops, w.layers[static_cast<size_t>(layer)], d, batch, layer, kv, s, x);
    for (int32_t slot = 0; slot < num_capture; ++slot) {
      if (capture[static_cast<size_t>(slot)] == layer) {
        ops.CaptureRows(x, rows, d.hidden, slot, num_capture, out.features);
      }
    }
  }
  // The final norm and the LM head on the requested rows, gathered first when not all.
  int32_t n = rows;
  float* normed = ops.Buffer(s.normed, rows * d.hidden);
  const float* head_in = x;
  if (out.logit_rows != nullptr) {
    n = out.num_logit_rows;
    if (n == 0) return;
    ops.GatherRows(x, rows, d.hidden, out.logit_rows, n, normed);
    head_in = normed;
  }
  ops.RmsNorm(head_in, w.final_norm.data(), normed, n, d.hidden, d.eps);
  ops.Gemm(normed, d.hidden, w.LmHead(), out.logits, vocab, n, /*accumulate=*/false);
}

}  // namespace dscale
