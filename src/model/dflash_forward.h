#pragma once
// The DFlash drafter's two forwards, written once over a backend's operations (`Ops`:
// model/cpu_ops.h, model/cuda/cuda_ops.h):
//
//   context: target features [rows, K·H_target] → fc → hidden_norm → per draft layer the k/v
//   rows of its stacked qkv matrix (no input norm) → k_norm → RoPE at the rows' positions →
//   stored at the rows' slots in the drafter's KV
//
//   draft: blocks [anchor, MASK × (rows−1)] → the target's embedding (× the drafter's
//   input_embedding_scale) → the draft layers (RunDecoderLayer over each request's context plus
//   its block: non-causal, or as the layer's DraftAttention says) → each block's prediction rows
//   (DraftBlock, io/dflash_config.h: rows 1 .. W−1 of a DFlash block, all B rows of a DSpark one)
//   → final norm → the target's LM head (or its rows of the drafter's reduced vocabulary,
//   model/draft_vocab.h) → argmax

#include <cstdint>
#include <span>

#include "core/check.h"
#include "io/dflash_config.h"
#include "model/batch_view.h"
#include "model/decoder_layer.h"

namespace dscale {

// How the draft layers attend and the block's embeddings are scaled (io/dflash_config.h).
// Empty `layers`: every layer non-causal without a window, the original drafters.
struct DraftLayout {
  std::span<const DraftAttention> layers;
  float embedding_scale = 1.0f;
};

// Where a draft writes, in the backend's memory, for n blocks of C candidates each (DraftOutput's
// layout, model/drafter.h).
struct DraftOutputs {
  int32_t* tokens = nullptr;  // [n · C] greedy candidates (draft-vocab columns); null: none
  float* logits = nullptr;    // [n · C, draft_vocab] draft logits
  float* hidden = nullptr;    // [n · C, hidden] after the final norm (the LM head's input)
  // C: each block's first `candidates` (1 … DraftBlock::candidates()) are scored, the LM head's
  // rows; 0: all of them. The block's other rows still run through the layers (its attention is
  // bidirectional), so a scored candidate has the bits it has in a whole block's scoring.
  int32_t candidates = 0;
};

// Projects the context rows' `features` [rows.rows, feature_width] into `kv` at rows.kv_slots,
// roped at rows.positions (rows.live_rows as in BatchView; no spans read). `w` is the backend's
// drafter weights (fc, hidden_norm, layers), `context_kv[l]` the k/v rows of layer l's stacked
// qkv matrix; `s` the scratch (x holds the fc output, qkv the k/v rows).
template <class Ops>
void RunDFlashContext(Ops& ops, const auto& w, const auto& context_kv, const LayerDims& d,
                      int64_t feature_width, const BatchView& rows, const float* features, auto& kv,
                      auto& s) {
  const int32_t n = rows.rows;
  if (n == 0) return;
  const int64_t h = d.hidden, kv_cols = 2 * d.kv_dim();
  // c = hidden_norm(fc(features)), computed once and shared by every layer.
  float* c = ops.Buffer(s.x, n * h);
  ops.Gemm(features, feature_width, w.fc, c, h, n, /*accumulate=*/false);
  ops.RmsNorm(c, w.hidden_norm.data(), c, n, h, d.eps);
  float* k = ops.Buffer(s.qkv, n * kv_cols);  // [n, 2·kv_dim]: [k heads | v heads]
  const auto num_layers = static_cast<int32_t>(w.layers.size());
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    const auto i = static_cast<size_t>(layer);
    ops.Gemm(c, h, context_kv[i], k, kv_cols, n, /*accumulate=*/false);
    if (d.qk_norm) {
      ops.HeadRmsNorm(k, w.layers[i].k_norm.data(), n, d.kv_heads, d.head_dim, kv_cols, d.eps);
    }
    ops.Rope(k, rows.positions, n, d.kv_heads, d.head_dim, kv_cols, d.rope);
    ops.StoreKv(kv, layer, rows, k, k + d.kv_dim(), kv_cols);
  }
}

// One draft over `blocks`: blocks.num_spans requests, request i's block of R = block.input_rows
// rows at rows i·R .. (i+1)·R − 1 (blocks.causal false; `layout` sets each layer's causality and
// window); rows block.first_prediction_row .. R − 1 of each block give its candidates. The
// block's transient K/V are stored at its slots.
// `embed` [vocab, hidden] is the target's; `lm_head` [draft_vocab, hidden] the target's LM head
// or the rows of it a reduced draft vocabulary keeps; `s` the scratch of blocks.rows rows.
template <class Ops>
void RunDFlashDraft(Ops& ops, const auto& w, const auto& embed, const auto& lm_head, int64_t vocab,
                    int64_t draft_vocab, const LayerDims& d, const DraftBlock& block,
                    const BatchView& blocks, const DraftLayout& layout, auto& kv, auto& s,
                    const DraftOutputs& out) {
  const int32_t n = blocks.num_spans;
  if (n == 0) return;
  const int32_t rows = blocks.rows;
  const int64_t h = d.hidden;
  float* x = ops.Buffer(s.x, rows * h);
  ops.Embed(embed, vocab, h, blocks.tokens, rows, x);
  if (layout.embedding_scale != 1.0f) ops.Scale(x, rows * h, layout.embedding_scale);
  ops.ClearAttentionRows(s, rows, d.q_dim());
  const auto num_layers = static_cast<int32_t>(w.layers.size());
  for (int32_t layer = 0; layer < num_layers; ++layer) {
    BatchView view = blocks;
    if (!layout.layers.empty()) {
      const DraftAttention& a = layout.layers[static_cast<size_t>(layer)];
      view.causal = a.causal;
      view.window = a.window;
    }
    RunDecoderLayer(ops, w.layers[static_cast<size_t>(layer)], d, view, layer, kv, s, x);
  }
  const int32_t per_block = out.candidates > 0 ? out.candidates : block.candidates();
  DSCALE_CHECK(per_block <= block.candidates());
  const int32_t candidates = n * per_block;
  ops.GatherBlockTails(x, n, block.input_rows, block.first_prediction_row, per_block, h,
                       out.hidden);
  ops.RmsNorm(out.hidden, w.final_norm.data(), out.hidden, candidates, h, d.eps);
  ops.Gemm(out.hidden, h, lm_head, out.logits, draft_vocab, candidates, /*accumulate=*/false);
  if (out.tokens != nullptr) ops.Argmax(out.logits, candidates, draft_vocab, out.tokens);
}

}  // namespace dscale
