#pragma once
// DFlash drafter `config.json`: a Qwen3-style transformer config (its RoPE its own, with an
// optional llama3 rope_scaling) plus the drafting fields.
// Newer drafters declare per-layer attention as HF does: `layer_types` ("full_attention" or
// "sliding_attention" per layer; absent: sliding from layer max_window_layers on when a window
// is set), `sliding_window` (in force only with `use_sliding_window` true, as HF's Qwen3 config
// reads it), and `is_causal` (absent: a sliding layer is causal, a full one is not); and an
// `input_embedding_scale` that multiplies the block's embeddings. Each is read from
// `dflash_config` or the top level.
// `block_size` may sit at the top level or inside `dflash_config`; `mask_token_id` and
// `target_layer_ids` inside `dflash_config` or at the top level. Absent layer ids are derived
// from the target's depth by the documented rule (DeriveTargetLayerIds).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/decoder_config.h"
#include "io/domino_config.h"

namespace dscale {

enum class DraftLayerType { kFull, kSliding };

// How one draft layer's block query at position p attends. Context keys are at positions
// j < s (s = the block's first position), block keys at s .. s + W − 1:
//   causal: only j ≤ p;  window > 0: only p − j < window, and when not causal also
//   j − p < window (a symmetric window inside the block). Neither: every key (the original
//   DFlash layers).
struct DraftAttention {
  bool causal = false;
  int32_t window = 0;  // 0: no window
  bool operator==(const DraftAttention&) const = default;
};

struct DFlashConfig {
  DecoderConfig draft;  // the draft transformer (its vocab_size is informational)
  int32_t block_size = 16;
  int64_t mask_token_id = -1;
  std::vector<int32_t> target_layer_ids;   // residual streams fed to fc, in this order
  int64_t num_target_layers = 0;           // 0 when the config does not say
  std::optional<DominoHeadConfig> domino;  // "domino_config": the drafter ships a Domino head
  // Per-layer attention as declared (empty: every layer full attention, as the released Qwen3
  // drafters), HF's `is_causal` override, and the window in force (0: none).
  std::vector<DraftLayerType> layer_types;
  std::optional<bool> is_causal;
  int32_t sliding_window = 0;
  double input_embedding_scale = 1.0;  // the block's embeddings are multiplied by this

  // How draft layer `layer` attends (above).
  DraftAttention LayerAttention(int64_t layer) const;
  // Whether every layer attends as the original drafters (non-causal, no window) over
  // unscaled embeddings.
  bool IsPlainLayout() const;
};

// One draft layer: the middle target layer. Otherwise `num_draft_layers` ids spread evenly
// from 1 to num_target_layers − 3, rounded half to even (36 target, 5 draft → 1 9 17 25 33).
std::vector<int32_t> DeriveTargetLayerIds(int64_t num_target_layers, int64_t num_draft_layers);

// Parses the drafter's config. `target` supplies the depth when layer ids must be derived and
// is what the result is validated against: drafter hidden = target hidden, mask id inside the
// target's vocabulary, layer ids inside the target's depth, block size in [2, 64].
Result<DFlashConfig> ParseDFlashConfig(const std::string& json_text, const std::string& path,
                                       const DecoderConfig& target);
Result<DFlashConfig> LoadDFlashConfig(const std::string& path, const DecoderConfig& target);

// The JSON a z-lab DFlash checkpoint carries (architectures DFlashDraftModel, dflash_config).
std::string DFlashConfigToJson(const DFlashConfig& config);

}  // namespace dscale
