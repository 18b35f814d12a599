#pragma once
// Qwen3 target weights laid out for the forward pass. Matrices are WeightMatrix: BF16 checkpoints
// are used in place from their memory mapping; F32 ones (and F16, widened at load) are held as
// f32. q/k/v projections are stacked into one matrix and gate/up into another, without copying,
// so a layer runs three projections plus the output and down projections. Norm gains are f32.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/qwen3_config.h"
#include "io/safetensors.h"
#include "model/weight_matrix.h"

namespace dscale {

struct Qwen3LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  WeightMatrix qkv;               // [q_dim + 2·kv_dim, hidden]: q_proj, k_proj, v_proj rows
  std::vector<float> q_norm;      // [head_dim]
  std::vector<float> k_norm;      // [head_dim]
  WeightMatrix o_proj;            // [hidden, q_dim]
  std::vector<float> post_norm;   // [hidden]
  WeightMatrix gate_up;           // [2·intermediate, hidden]: gate_proj rows, then up_proj rows
  WeightMatrix down;              // [hidden, intermediate]
};

struct Qwen3Weights {
  WeightMatrix embed;  // [vocab, hidden]
  std::vector<Qwen3LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  WeightMatrix lm_head;           // [vocab, hidden]; empty when tied to the embedding

  const WeightMatrix& LmHead() const { return lm_head.empty() ? embed : lm_head; }
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

// Reads one tensor, checking its shape, as a matrix of shape[0] rows (a vector is one column).
using TensorReader =
    std::function<Result<WeightMatrix>(const std::string& name, const std::vector<int64_t>& shape)>;
// A TensorReader over f32 values by name (in-memory weights, tests).
using F32TensorReader = std::function<Result<std::vector<float>>(
    const std::string& name, const std::vector<int64_t>& shape)>;
TensorReader FromF32Reader(F32TensorReader read);

// Reads `prefix` + name from `checkpoint`, which the matrices keep alive: BF16 tensors in place
// in its mapping; F32 and F16 ones as owned f32. Every tensor is checked by Checkpoint::Tensor
// (present, shaped as expected, finite).
TensorReader CheckpointTensorReader(std::shared_ptr<const Checkpoint> checkpoint,
                                    std::string prefix = "");

// How the CPU forward holds the projection matrices (q/k/v/o, gate/up, down and the LM head): as
// the checkpoint stores them (BF16 in place, F32 and F16 as f32), or quantised to int8 at load
// (`--weights int8`, quantize_int8.h). Embeddings and norm gains are held as stored either way.
enum class WeightsMode { kAsStored, kInt8 };
// "as-stored", "int8": the spellings of `--weights`.
std::string_view WeightsModeName(WeightsMode mode);
// InvalidArgument naming `--weights` and the accepted spellings for anything else.
Result<WeightsMode> ParseWeightsMode(std::string_view name);

struct WeightsLoad {
  WeightsMode mode = WeightsMode::kAsStored;
  // kInt8: called with the name of every tensor the loader has made its own copy of, and of the
  // embedding (whose lookups fault in only the rows they read), so a memory-mapped checkpoint
  // can drop those pages from the process's resident memory (Checkpoint::DropResident). May be
  // empty.
  std::function<void(const std::string& name)> drop_resident;
};

// Reads every tensor of Qwen3TensorShapes(config) through `read` and lays them out; with
// WeightsMode::kInt8 the LM head and then each layer's projections are quantised as soon as they
// are read, so a checkpoint's pages need not all be resident at once.
Result<Qwen3Weights> LoadQwen3Weights(const Qwen3Config& config, const TensorReader& read,
                                      const WeightsLoad& how = {});
// Reads one decoder layer's tensors (DecoderLayerShapes) and lays them out.
Result<Qwen3LayerWeights> LoadDecoderLayer(const Qwen3Config& config, const std::string& prefix,
                                           int64_t layer, const TensorReader& read);

}  // namespace dscale
