#pragma once
// Drafter `config.json`: a Qwen3-style transformer config (its RoPE its own, with an optional
// llama3 rope_scaling) plus the drafting fields, in one of two layouts chosen by `architectures`:
//   "DFlashDraftModel" (z-lab's DFlash drafters; also a config without `architectures`, as every
//   drafter this engine has read), the rest of this comment;
//   "Qwen3DSparkModel" (DeepSpec's DSpark drafters): `block_size`, `mask_token_id` and
//   `target_layer_ids` required at the top level (no `dflash_config` object), `num_target_layers`
//   optional, every layer full attention, and the heads of io/dspark_config.h.
// Any other architecture is refused, naming the field and the supported ones.
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
#include "io/dspark_config.h"

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

// The rows of one drafting pass and what they predict. The pass stages `input_rows` rows per
// request, [anchor, MASK × (input_rows − 1)] at positions ctx_len .. ctx_len + input_rows − 1;
// its outputs from row `first_prediction_row` on (after the final norm) go through the LM head,
// candidate k (k = 0, 1, …) from row first_prediction_row + k, proposing the token at
// ctx_len + 1 + k. The verify block W is the anchor plus the candidates.
//   DFlash: input_rows = W (block_size), first_prediction_row 1 (row j stands for position
//     ctx_len + j itself, and the anchor's is known): W − 1 candidates.
//   DSpark: input_rows = B (block_size), first_prediction_row 0 (row j predicts the token after
//     its position): B candidates, W = B + 1.
struct DraftBlock {
  int32_t input_rows = 16;
  int32_t first_prediction_row = 1;

  int32_t candidates() const { return input_rows - first_prediction_row; }
  int32_t verify_rows() const { return candidates() + 1; }  // W: Drafter::block_size()
};

struct DFlashConfig {
  DecoderConfig draft;  // the draft transformer (its vocab_size is informational)
  // The config's `block_size`: the rows a drafting pass stages (DraftBlock::input_rows), which is
  // W for a DFlash drafter and W − 1 for a DSpark one. Block() says what they mean.
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
  // Set for a DSpark drafter ("Qwen3DSparkModel"): its heads (model/dspark_head.h).
  std::optional<DSparkHeadConfig> dspark;

  bool is_dspark() const { return dspark.has_value(); }
  // The drafting pass's rows (above), by the layout.
  DraftBlock Block() const;
  // How draft layer `layer` attends (above).
  DraftAttention LayerAttention(int64_t layer) const;
  // Whether every layer attends as the original drafters (non-causal, no window) over
  // unscaled embeddings.
  bool IsPlainLayout() const;
};

// One draft layer: the middle target layer. Otherwise `num_draft_layers` ids spread evenly
// from 1 to num_target_layers − 3, rounded half to even (36 target, 5 draft → 1 9 17 25 33).
std::vector<int32_t> DeriveTargetLayerIds(int64_t num_target_layers, int64_t num_draft_layers);

// The `architectures` names a drafter config may carry, and the one a DSpark drafter carries.
inline constexpr const char* kDFlashArchitecture = "DFlashDraftModel";
inline constexpr const char* kDSparkArchitecture = "Qwen3DSparkModel";

// Parses the drafter's config in the layout its `architectures` names. `target` supplies the
// depth when layer ids must be derived and is what the result is validated against: drafter
// hidden = target hidden, mask id inside the target's vocabulary, layer ids inside the target's
// depth, a verify block W of 2 to 64 rows (block_size in [2, 64] for DFlash, [1, 63] for DSpark).
Result<DFlashConfig> ParseDFlashConfig(const std::string& json_text, const std::string& path,
                                       const DecoderConfig& target);
Result<DFlashConfig> LoadDFlashConfig(const std::string& path, const DecoderConfig& target);

// The JSON the layout carries: z-lab's (architectures DFlashDraftModel, dflash_config), or for
// config.dspark DeepSpec's (architectures Qwen3DSparkModel, the fields at the top level).
std::string DFlashConfigToJson(const DFlashConfig& config);

}  // namespace dscale
