#pragma once
// Qwen3 target weights in f32 (BF16/F16 checkpoints are converted at load), laid out for the
// forward pass: q/k/v projections stacked into one matrix, gate/up stacked into another, so a
// layer runs three projection GEMMs plus the output and down projections.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "io/qwen3_config.h"

namespace dscale {

struct Qwen3LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> qkv;         // [q_dim + 2·kv_dim, hidden]: q_proj, k_proj, v_proj rows
  std::vector<float> q_norm;      // [head_dim]
  std::vector<float> k_norm;      // [head_dim]
  std::vector<float> o_proj;      // [hidden, q_dim]
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> gate_up;     // [2·intermediate, hidden]: gate_proj rows, then up_proj rows
  std::vector<float> down;        // [hidden, intermediate]
};

struct Qwen3Weights {
  std::vector<float> embed;  // [vocab, hidden]
  std::vector<Qwen3LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to the embedding

  const float* LmHead() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
};

using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// Hugging Face tensor names of a Qwen3ForCausalLM checkpoint: `prefix` + "layers.{layer}." +
// suffix + ".weight", e.g. suffix "self_attn.q_proj". The target's prefix is "model."; DFlash
// drafters store their layers without one.
inline constexpr const char* kQwen3Prefix = "model.";
std::string LayerTensorName(const std::string& prefix, int64_t layer, const std::string& suffix);
inline constexpr const char* kQwen3EmbedName = "model.embed_tokens.weight";
inline constexpr const char* kQwen3FinalNormName = "model.norm.weight";
inline constexpr const char* kQwen3LmHeadName = "lm_head.weight";

// (name, shape) of every tensor a checkpoint with `config` must hold, in a stable order.
TensorShapes Qwen3TensorShapes(const Qwen3Config& config);
// (name, shape) of the 11 tensors of one decoder layer.
TensorShapes DecoderLayerShapes(const Qwen3Config& config, const std::string& prefix,
                                int64_t layer);

// Reads one tensor as f32, checking its shape (Checkpoint::ReadF32 has this signature).
using TensorReader = std::function<Result<std::vector<float>>(const std::string& name,
                                                              const std::vector<int64_t>& shape)>;

// Reads every tensor of Qwen3TensorShapes(config) through `read` and lays them out.
Result<Qwen3Weights> LoadQwen3Weights(const Qwen3Config& config, const TensorReader& read);
// Reads one decoder layer's tensors (DecoderLayerShapes) and lays them out.
Result<Qwen3LayerWeights> LoadDecoderLayer(const Qwen3Config& config, const std::string& prefix,
                                           int64_t layer, const TensorReader& read);

}  // namespace dscale
