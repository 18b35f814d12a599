#pragma once
// Decoder target weights (Qwen3, Llama, Qwen3-MoE) laid out for the forward pass. Matrices are
// WeightMatrix: BF16 checkpoints are read from their memory mapping, and the matrices a step
// streams are then copied onto huge pages at load (LoadDecoderWeights, resident_weights.h); F32
// ones (and F16, widened at load) are held as f32. q/k/v projections are stacked into one matrix
// and gate/up into another, so a layer runs three projections plus the output and down projections.
// Norm gains are f32. A sparse MLP layer (Qwen3-MoE) holds its router and, per expert, gate/up
// stacked and down, the same way. A hybrid family's (Qwen3.5) linear-attention layer holds its
// Gated DeltaNet in place of q/k/v/o; its zero-centred norm gains are held as 1 + w, so every
// norm computes x̂ · gain whatever the family.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/decoder_config.h"
#include "io/safetensors.h"
#include "model/weight_matrix.h"

namespace dscale {

// One expert of a sparse MLP layer.
struct ExpertWeights {
  WeightMatrix gate_up;  // [2·expert_intermediate, hidden]: gate_proj rows, then up_proj rows
  WeightMatrix down;     // [hidden, expert_intermediate]
};

// A sparse MLP layer's weights (`mlp.gate`, `mlp.experts.{e}.*` or the fused
// `mlp.experts.{gate_up,down}_proj`, and Qwen3.5-MoE's `mlp.shared_expert.*` and
// `mlp.shared_expert_gate`); empty in a dense layer.
struct SparseMlpWeights {
  WeightMatrix router;                 // [num_experts, hidden]; held as stored in every mode
  std::vector<ExpertWeights> experts;  // [num_experts]
  ExpertWeights shared;      // [2·shared_intermediate, hidden], [hidden, shared_intermediate]
  WeightMatrix shared_gate;  // [1, hidden]; held as stored in every mode

  bool empty() const { return experts.empty(); }
  bool has_shared() const { return !shared.down.empty(); }
};

// A Gated DeltaNet layer's token mixer (`linear_attn.*`); empty in an attention layer. Sizes from
// GatedDeltaNetConfig: key_dim, value_dim, conv_dim = 2·key_dim + value_dim, value_heads.
struct GatedDeltaNetWeights {
  // [conv_dim + value_dim + 2·value_heads, hidden]: in_proj_qkv rows (q, k, v), in_proj_z,
  // in_proj_b, in_proj_a
  WeightMatrix in_proj;
  // [conv_kernel, conv_dim] depthwise causal taps, oldest input first: conv1d.weight [conv_dim, 1,
  // conv_kernel] transposed at load (cpu::CausalConv1d reads a tap's channels as one stream)
  std::vector<float> conv;
  std::vector<float> a_log;    // [value_heads] A_log
  std::vector<float> dt_bias;  // [value_heads]
  std::vector<float> norm;     // [value_head_dim] the gated RMSNorm's gain (plain, not 1 + w)
  WeightMatrix out_proj;       // [hidden, value_dim]

  bool empty() const { return out_proj.empty(); }
};

struct DecoderLayerWeights {
  std::vector<float> input_norm;  // [hidden]
  // [q_rows + 2·kv_dim, hidden]: q_proj, k_proj, v_proj rows; q_rows is q_dim, or 2·q_dim with
  // an output gate (DecoderConfig::q_proj_rows), whose q_proj rows are held reordered as every
  // head's query, then every head's gate (the checkpoint has per head its query, then its gate)
  WeightMatrix qkv;
  std::vector<float> q_norm;     // [head_dim]; empty without qk_norm (Llama)
  std::vector<float> k_norm;     // [head_dim]; empty without qk_norm
  WeightMatrix o_proj;           // [hidden, q_dim]
  std::vector<float> post_norm;  // [hidden]
  WeightMatrix gate_up;          // [2·intermediate, hidden]: gate_proj rows, then up_proj rows
  WeightMatrix down;             // [hidden, intermediate]
  // Sparse layers (DecoderConfig::IsSparseLayer) only, where gate_up and down are empty.
  SparseMlpWeights moe;
  // Linear-attention layers (DecoderConfig::IsLinearAttentionLayer) only, where qkv, q_norm,
  // k_norm and o_proj are empty.
  GatedDeltaNetWeights linear;
};

// The layer's projections, each passed to `fn`: qkv and o_proj, or a linear-attention layer's
// in_proj and out_proj; gate_up and down, or a sparse layer's experts' and its shared expert's
// (not its router or shared-expert gate).
void ForEachProjection(DecoderLayerWeights& layer, const std::function<void(WeightMatrix&)>& fn);

struct DecoderWeights {
  WeightMatrix embed;  // [vocab, hidden]
  std::vector<DecoderLayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  WeightMatrix lm_head;           // [vocab, hidden]; empty when tied to the embedding

  const WeightMatrix& LmHead() const { return lm_head.empty() ? embed : lm_head; }
};

using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// Hugging Face tensor names of a Qwen3ForCausalLM, LlamaForCausalLM, Qwen3MoeForCausalLM,
// Qwen3.5 or Qwen3.5-MoE checkpoint (the same but for Llama's missing q_norm/k_norm, a sparse
// layer's "mlp.gate" and "mlp.experts.{e}.{gate,up,down}_proj" in place of the dense MLP — fused,
// "mlp.experts.gate_up_proj" [E, 2·I, hidden] and "mlp.experts.down_proj" [E, hidden, I] without
// ".weight", and the shared expert's "mlp.shared_expert.{gate,up,down}_proj" and
// "mlp.shared_expert_gate" in Qwen3.5-MoE — and a linear-attention
// layer's "linear_attn.{in_proj_qkv,in_proj_z,in_proj_b,in_proj_a,conv1d,norm,out_proj}.weight",
// "linear_attn.A_log" and "linear_attn.dt_bias" in place of "self_attn.*"): `prefix` +
// "layers.{layer}." + suffix + ".weight", e.g. suffix "self_attn.q_proj". The target's prefix is
// DecoderConfig::TensorPrefix() ("model.", or "model.language_model." in a multimodal Qwen3.5
// checkpoint, whose vision and multi-token-prediction tensors are not read); DFlash drafters store
// their layers without one.
inline constexpr const char* kTargetPrefix = "model.";
std::string LayerTensorName(const std::string& prefix, int64_t layer, const std::string& suffix);
inline constexpr const char* kTargetEmbedName = "model.embed_tokens.weight";
inline constexpr const char* kTargetFinalNormName = "model.norm.weight";
inline constexpr const char* kTargetLmHeadName = "lm_head.weight";
// The embedding's and the final norm's names under config.TensorPrefix().
std::string TargetEmbedName(const DecoderConfig& config);
std::string TargetFinalNormName(const DecoderConfig& config);

// (name, shape) of every tensor a checkpoint with `config` must hold, in a stable order.
TensorShapes DecoderTensorShapes(const DecoderConfig& config);
// (name, shape) of the tensors of one decoder layer: 11, or 9 without qk_norm; a sparse layer
// has 1 + 3 · num_experts MLP tensors in place of the dense 3 (fused: 3, and 4 more with a shared
// expert); a linear-attention layer 9 token-
// mixer tensors in place of the 6 attention ones (14 in all).
TensorShapes DecoderLayerShapes(const DecoderConfig& config, const std::string& prefix,
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

// How the CPU forward holds the projection matrices (q/k/v/o, gate/up, down, the experts' and the
// LM head): as the checkpoint stores them (BF16 copied onto huge pages at load, F32 and F16 as
// f32), the same with BF16 read in place from the checkpoint's mapping (`--weights mapped`: no
// copy at load, the page cache shared between processes, steps streaming the weights slower:
// resident_weights.h), or quantised at load (quantize_weights.h): to int8 (`--weights int8`), or
// the layers' projections to 4 bits and the LM head to int8 (`--weights int4`). Embeddings, norm
// gains and routers are held as stored either way.
enum class WeightsMode { kAsStored, kMapped, kInt8, kInt4 };
// kInt8 and kInt4.
bool IsQuantized(WeightsMode mode);
// "as-stored", "mapped", "int8", "int4": the spellings of `--weights`.
std::string_view WeightsModeName(WeightsMode mode);
// InvalidArgument naming `--weights` and the accepted spellings for anything else.
Result<WeightsMode> ParseWeightsMode(std::string_view name);

struct WeightsLoad {
  WeightsMode mode = WeightsMode::kAsStored;
  // How the model will take int8 weights' activations (`--int8-activations`): the layout their
  // int8 matrices load in follows it (quantize_weights.h).
  cpu::Int8Activations int8_activations = cpu::Int8Activations::kInt8;
  // Called with the name of every tensor the loader has made its own copy of (quantised, or BF16
  // copied onto huge pages: resident_weights.h), and of the embedding (whose lookups fault in
  // only the rows they read), so a memory-mapped checkpoint can drop those pages from the
  // process's resident memory (Checkpoint::DropResident). May be empty.
  std::function<void(const std::string& name)> drop_resident;
};

// Reads every tensor of DecoderTensorShapes(config) through `read` and lays them out: the LM head
// and then each layer's projections are quantised (WeightsMode::kInt8, kInt4) or their BF16
// copied onto huge pages (kAsStored: resident_weights.h) as soon as they are read, so a
// checkpoint's pages need not all be resident at once (kMapped reads them in place).
Result<DecoderWeights> LoadDecoderWeights(const DecoderConfig& config, const TensorReader& read,
                                          const WeightsLoad& how = {});
// Reads one decoder layer's tensors (DecoderLayerShapes) and lays them out.
Result<DecoderLayerWeights> LoadDecoderLayer(const DecoderConfig& config, const std::string& prefix,
                                             int64_t layer, const TensorReader& read);

}  // namespace dscale
