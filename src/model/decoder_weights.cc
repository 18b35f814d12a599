#include "model/decoder_weights.h"

#include <utility>

#include "model/quantize_weights.h"
#include "model/resident_weights.h"

namespace dscale {
namespace {

using ShapeList = TensorShapes;

// A Gated DeltaNet's tensors under `at` ("…layers.{layer}.linear_attn."), in the order
// LoadDecoderLayer reads them. A_log and dt_bias are parameters without ".weight".
void AddLinearAttentionShapes(const DecoderConfig& c, const std::string& at, ShapeList* shapes) {
  const GatedDeltaNetConfig& l = c.hybrid.linear;
  const int64_t h = c.hidden_size;
  shapes->emplace_back(at + "in_proj_qkv.weight", std::vector<int64_t>{l.conv_dim(), h});
  shapes->emplace_back(at + "in_proj_z.weight", std::vector<int64_t>{l.value_dim(), h});
  shapes->emplace_back(at + "in_proj_b.weight", std::vector<int64_t>{l.value_heads, h});
  shapes->emplace_back(at + "in_proj_a.weight", std::vector<int64_t>{l.value_heads, h});
  shapes->emplace_back(at + "conv1d.weight", std::vector<int64_t>{l.conv_dim(), 1, l.conv_kernel});
  shapes->emplace_back(at + "A_log", std::vector<int64_t>{l.value_heads});
  shapes->emplace_back(at + "dt_bias", std::vector<int64_t>{l.value_heads});
  shapes->emplace_back(at + "norm.weight", std::vector<int64_t>{l.value_head_dim});
  shapes->emplace_back(at + "out_proj.weight", std::vector<int64_t>{h, l.value_dim()});
}

void AddLayerShapes(const DecoderConfig& c, const std::string& prefix, int64_t layer,
                    ShapeList* shapes) {
  const int64_t h = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  auto add = [&](const std::string& suffix, std::vector<int64_t> shape) {
    shapes->emplace_back(LayerTensorName(prefix, layer, suffix), std::move(shape));
  };
  add("input_layernorm", {h});
  if (c.IsLinearAttentionLayer(layer)) {
    AddLinearAttentionShapes(c, prefix + "layers." + std::to_string(layer) + ".linear_attn.",
                             shapes);
  } else {
    add("self_attn.q_proj", {c.q_proj_rows(), h});
    add("self_attn.k_proj", {c.kv_dim(), h});
    add("self_attn.v_proj", {c.kv_dim(), h});
    add("self_attn.o_proj", {h, c.q_dim()});
    if (c.qk_norm) {
      add("self_attn.q_norm", {c.head_dim});
      add("self_attn.k_norm", {c.head_dim});
    }
  }
  add("post_attention_layernorm", {h});
  if (!c.IsSparseLayer(layer)) {
    add("mlp.gate_proj", {inter, h});
    add("mlp.up_proj", {inter, h});
    add("mlp.down_proj", {h, inter});
    return;
  }
  const int64_t experts = c.moe.num_experts, expert_inter = c.moe.expert_intermediate_size;
  add("mlp.gate", {experts, h});
  if (c.moe.fused_experts) {
    // Parameters of the experts module, named without ".weight".
    const std::string at = prefix + "layers." + std::to_string(layer) + ".mlp.experts.";
    shapes->emplace_back(at + "gate_up_proj", std::vector<int64_t>{experts, 2 * expert_inter, h});
    shapes->emplace_back(at + "down_proj", std::vector<int64_t>{experts, h, expert_inter});
  } else {
    for (int64_t e = 0; e < experts; ++e) {
      const std::string expert = "mlp.experts." + std::to_string(e) + ".";
      add(expert + "gate_proj", {expert_inter, h});
      add(expert + "up_proj", {expert_inter, h});
      add(expert + "down_proj", {h, expert_inter});
    }
  }
  if (const int64_t shared = c.moe.shared_expert_intermediate_size; shared > 0) {
    add("mlp.shared_expert.gate_proj", {shared, h});
    add("mlp.shared_expert.up_proj", {shared, h});
    add("mlp.shared_expert.down_proj", {h, shared});
    add("mlp.shared_expert_gate", {1, h});
  }
}

// Reads the named tensors (in order) and stacks their rows.
Result<WeightMatrix> ReadStacked(const TensorReader& read, const ShapeList& parts) {
  std::vector<WeightMatrix> matrices;
  for (const auto& [name, shape] : parts) {
    DSCALE_ASSIGN_OR_RETURN(WeightMatrix part, read(name, shape));
    matrices.push_back(std::move(part));
  }
  return WeightMatrix::Stack(matrices);
}

// Reads one tensor (a norm's gains) as f32 values.
Result<std::vector<float>> ReadValues(const TensorReader& read, const ShapeList::value_type& part) {
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix m, read(part.first, part.second));
  return m.ToF32();
}

// A norm's gains as the kernels use them: 1 + w when the family stores them zero-centred.
Result<std::vector<float>> ReadGains(const DecoderConfig& c, const TensorReader& read,
                                     const ShapeList::value_type& part) {
  DSCALE_ASSIGN_OR_RETURN(std::vector<float> gains, ReadValues(read, part));
  if (c.hybrid.zero_centred_norms) {
    for (float& g : gains) g += 1.0f;
  }
  return gains;
}

// q_proj, k_proj and v_proj stacked. With an output gate, q_proj's rows (per head its query, then
// its gate) are reordered to all the queries, then all the gates, so the queries' heads lie
// together as the attention kernels read them.
Result<WeightMatrix> ReadAttentionInputs(const DecoderConfig& c, const TensorReader& read,
                                         const ShapeList& parts) {
  if (!c.hybrid.attention_output_gate) return ReadStacked(read, parts);
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix q_proj, read(parts[0].first, parts[0].second));
  std::vector<int32_t> order;
  for (const int64_t half : {0, 1}) {
    for (int64_t h = 0; h < c.num_attention_heads; ++h) {
      for (int64_t i = 0; i < c.head_dim; ++i) {
        order.push_back(static_cast<int32_t>((2 * h + half) * c.head_dim + i));
      }
    }
  }
  std::vector<WeightMatrix> matrices = {q_proj.SelectRows(order)};
  for (size_t i = 1; i < parts.size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(WeightMatrix part, read(parts[i].first, parts[i].second));
    matrices.push_back(std::move(part));
  }
  return WeightMatrix::Stack(matrices);
}

// The experts of a fused layer: gate_up [E, 2·I, hidden] and down [E, hidden, I], each
// expert's slice used in place.
Result<std::vector<ExpertWeights>> ReadFusedExperts(const TensorReader& read,
                                                    const ShapeList& parts) {
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix gate_up, read(parts[0].first, parts[0].second));
  DSCALE_ASSIGN_OR_RETURN(WeightMatrix down, read(parts[1].first, parts[1].second));
  const std::vector<int64_t>& g = parts[0].second;
  const std::vector<int64_t>& d = parts[1].second;
  std::vector<ExpertWeights> experts(static_cast<size_t>(g[0]));
  for (int64_t e = 0; e < g[0]; ++e) {
    experts[static_cast<size_t>(e)] = {.gate_up = gate_up.RowRange(e, 1).Reshaped(g[1]),
                                       .down = down.RowRange(e, 1).Reshaped(d[1])};
  }
  return experts;
}

Result<SparseMlpWeights> ReadSparseMlp(const DecoderConfig& c, const TensorReader& read,
                                       const auto& next) {
  SparseMlpWeights w;
  DSCALE_ASSIGN_OR_RETURN(w.router, ReadStacked(read, next(1)));
  if (c.moe.fused_experts) {
    DSCALE_ASSIGN_OR_RETURN(w.experts, ReadFusedExperts(read, next(2)));
  } else {
    w.experts.resize(static_cast<size_t>(c.moe.num_experts));
    for (ExpertWeights& expert : w.experts) {
      DSCALE_ASSIGN_OR_RETURN(expert.gate_up, ReadStacked(read, next(2)));
      DSCALE_ASSIGN_OR_RETURN(expert.down, ReadStacked(read, next(1)));
    }
  }
  if (c.moe.shared_expert_intermediate_size > 0) {
    DSCALE_ASSIGN_OR_RETURN(w.shared.gate_up, ReadStacked(read, next(2)));
    DSCALE_ASSIGN_OR_RETURN(w.shared.down, ReadStacked(read, next(1)));
    DSCALE_ASSIGN_OR_RETURN(w.shared_gate, ReadStacked(read, next(1)));
  }
  return w;
}

// A depthwise conv's taps [channels, kernel] (a checkpoint's [channels, 1, kernel]) as
// [kernel, channels].
std::vector<float> TapMajor(const std::vector<float>& by_channel, int64_t kernel) {
  const auto channels = static_cast<int64_t>(by_channel.size()) / kernel;
  std::vector<float> taps(by_channel.size());
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < kernel; ++j) taps[j * channels + c] = by_channel[c * kernel + j];
  }
  return taps;
}

Result<GatedDeltaNetWeights> ReadLinearAttention(const TensorReader& read, const auto& next) {
  GatedDeltaNetWeights w;
  DSCALE_ASSIGN_OR_RETURN(w.in_proj, ReadStacked(read, next(4)));
  const ShapeList conv = next(1);
  DSCALE_ASSIGN_OR_RETURN(const std::vector<float> by_channel, ReadValues(read, conv[0]));
  w.conv = TapMajor(by_channel, conv[0].second.back());
  DSCALE_ASSIGN_OR_RETURN(w.a_log, ReadValues(read, next(1)[0]));
  DSCALE_ASSIGN_OR_RETURN(w.dt_bias, ReadValues(read, next(1)[0]));
  DSCALE_ASSIGN_OR_RETURN(w.norm, ReadValues(read, next(1)[0]));
  DSCALE_ASSIGN_OR_RETURN(w.out_proj, ReadStacked(read, next(1)));
  return w;
}

}  // namespace

Result<DecoderLayerWeights> LoadDecoderLayer(const DecoderConfig& c, const std::string& prefix,
                                             int64_t layer, const TensorReader& read) {
  // In AddLayerShapes' order; q_norm and k_norm only where the family has them.
  const ShapeList shapes = DecoderLayerShapes(c, prefix, layer);
  size_t at = 0;
  const auto next = [&](size_t count) {
    const ShapeList parts(shapes.begin() + static_cast<ptrdiff_t>(at),
                          shapes.begin() + static_cast<ptrdiff_t>(at + count));
    at += count;
    return parts;
  };
  DecoderLayerWeights w;
  DSCALE_ASSIGN_OR_RETURN(w.input_norm, ReadGains(c, read, next(1)[0]));
  if (c.IsLinearAttentionLayer(layer)) {
    DSCALE_ASSIGN_OR_RETURN(w.linear, ReadLinearAttention(read, next));
  } else {
    DSCALE_ASSIGN_OR_RETURN(w.qkv, ReadAttentionInputs(c, read, next(3)));
    DSCALE_ASSIGN_OR_RETURN(w.o_proj, ReadStacked(read, next(1)));
    if (c.qk_norm) {
      DSCALE_ASSIGN_OR_RETURN(w.q_norm, ReadGains(c, read, next(1)[0]));
      DSCALE_ASSIGN_OR_RETURN(w.k_norm, ReadGains(c, read, next(1)[0]));
    }
  }
  DSCALE_ASSIGN_OR_RETURN(w.post_norm, ReadGains(c, read, next(1)[0]));
  if (c.IsSparseLayer(layer)) {
    DSCALE_ASSIGN_OR_RETURN(w.moe, ReadSparseMlp(c, read, next));
  } else {
    DSCALE_ASSIGN_OR_RETURN(w.gate_up, ReadStacked(read, next(2)));
    DSCALE_ASSIGN_OR_RETURN(w.down, ReadStacked(read, next(1)));
  }
  DSCALE_CHECK(at == shapes.size());
  return w;
}

void ForEachProjection(DecoderLayerWeights& layer, const std::function<void(WeightMatrix&)>& fn) {
  if (layer.linear.empty()) {
    fn(layer.qkv);
    fn(layer.o_proj);
  } else {
    fn(layer.linear.in_proj);
    fn(layer.linear.out_proj);
  }
  if (layer.moe.empty()) {
    fn(layer.gate_up);
    fn(layer.down);
  }
  for (ExpertWeights& expert : layer.moe.experts) {
    fn(expert.gate_up);
    fn(expert.down);
  }
  if (layer.moe.has_shared()) {
    fn(layer.moe.shared.gate_up);
    fn(layer.moe.shared.down);
  }
}

TensorReader FromF32Reader(F32TensorReader read) {
  return [read = std::move(read)](const std::string& name,
                                  const std::vector<int64_t>& shape) -> Result<WeightMatrix> {
    DSCALE_ASSIGN_OR_RETURN(std::vector<float> values, read(name, shape));
    return WeightMatrix::FromF32(std::move(values), shape);
  };
}

TensorReader CheckpointTensorReader(std::shared_ptr<const Checkpoint> checkpoint,
                                    std::string prefix) {
  return [checkpoint = std::move(checkpoint), prefix = std::move(prefix)](
             const std::string& name, const std::vector<int64_t>& shape) -> Result<WeightMatrix> {
    DSCALE_ASSIGN_OR_RETURN(const TensorInfo* info, checkpoint->Tensor(prefix + name, shape));
    const int64_t rows = shape.empty() ? 1 : shape[0];
    if (info->dtype == DType::kBF16 && rows > 0) {
      return WeightMatrix::View(DType::kBF16, info->data, rows, info->NumElements() / rows,
                                checkpoint);
    }
    // F32 (the file may not align it for float loads) and F16 (no F16 kernel): owned f32.
    std::vector<float> values(static_cast<size_t>(info->NumElements()));
    if (!values.empty()) ConvertToF32(info->dtype, info->data, values.size(), values.data());
    return WeightMatrix::FromF32(std::move(values), shape);
  };
}

std::string TargetEmbedName(const DecoderConfig& c) {
  return c.TensorPrefix() + "embed_tokens.weight";
}

std::string TargetFinalNormName(const DecoderConfig& c) { return c.TensorPrefix() + "norm.weight"; }

std::string LayerTensorName(const std::string& prefix, int64_t layer, const std::string& suffix) {
  return prefix + "layers." + std::to_string(layer) + "." + suffix + ".weight";
}

ShapeList DecoderLayerShapes(const DecoderConfig& c, const std::string& prefix, int64_t layer) {
  ShapeList shapes;
  AddLayerShapes(c, prefix, layer, &shapes);
  return shapes;
}

ShapeList DecoderTensorShapes(const DecoderConfig& c) {
  ShapeList shapes;
  shapes.emplace_back(TargetEmbedName(c), std::vector<int64_t>{c.vocab_size, c.hidden_size});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    AddLayerShapes(c, c.TensorPrefix(), layer, &shapes);
  }
  shapes.emplace_back(TargetFinalNormName(c), std::vector<int64_t>{c.hidden_size});
  if (!c.tie_word_embeddings) {
    shapes.emplace_back(kTargetLmHeadName, std::vector<int64_t>{c.vocab_size, c.hidden_size});
  }
  return shapes;
}

bool IsQuantized(WeightsMode mode) {
  return mode == WeightsMode::kInt8 || mode == WeightsMode::kInt4;
}

std::string_view WeightsModeName(WeightsMode mode) {
  switch (mode) {
    case WeightsMode::kMapped:
      return "mapped";
    case WeightsMode::kInt8:
      return "int8";
    case WeightsMode::kInt4:
      return "int4";
    case WeightsMode::kAsStored:
      break;
  }
  return "as-stored";
}

Result<WeightsMode> ParseWeightsMode(std::string_view name) {
  for (const WeightsMode mode :
       {WeightsMode::kAsStored, WeightsMode::kMapped, WeightsMode::kInt8, WeightsMode::kInt4}) {
    if (name == WeightsModeName(mode)) return mode;
  }
  return InvalidArgument("--weights: expected as-stored, mapped, int8 or int4, got \"" +
                         std::string(name) + "\"");
}

Result<DecoderWeights> LoadDecoderWeights(const DecoderConfig& c, const TensorReader& read,
                                          const WeightsLoad& how) {
  const bool quantized = IsQuantized(how.mode), copied = how.mode == WeightsMode::kAsStored;
  const auto drop = [&how](const std::string& name) {
    if (how.drop_resident) how.drop_resident(name);
  };
  DecoderWeights w;
  const std::string embed_name = TargetEmbedName(c), prefix = c.TensorPrefix();
  DSCALE_ASSIGN_OR_RETURN(w.embed, read(embed_name, {c.vocab_size, c.hidden_size}));
  if (quantized) {
    // The LM head first (int8 in both modes: quantize_weights.h), so that its source's pages leave
    // resident memory before the layers' copies arrive: the peak is the int8 model plus one layer's
    // source, not plus the head's.
    WeightMatrix head = w.embed;
    if (!c.tie_word_embeddings) {
      DSCALE_ASSIGN_OR_RETURN(head, read(kTargetLmHeadName, {c.vocab_size, c.hidden_size}));
      drop(kTargetLmHeadName);
    }
    w.lm_head = QuantizeInt8(head, how.int8_activations);
  } else if (!c.tie_word_embeddings) {
    DSCALE_ASSIGN_OR_RETURN(w.lm_head, read(kTargetLmHeadName, {c.vocab_size, c.hidden_size}));
  }
  if (copied) {
    CopyToHugePages(c.tie_word_embeddings ? &w.embed : &w.lm_head);  // read every step
    if (!c.tie_word_embeddings) drop(kTargetLmHeadName);
  }
  if (quantized || copied) drop(embed_name);  // lookups fault in only the rows they read
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    DSCALE_ASSIGN_OR_RETURN(DecoderLayerWeights lw, LoadDecoderLayer(c, prefix, layer, read));
    if (quantized) QuantizeLayer(&lw, how.mode, how.int8_activations);
    if (copied) CopyLayerToHugePages(&lw);
    if (quantized || copied) {
      for (const auto& [name, shape] : DecoderLayerShapes(c, prefix, layer)) drop(name);
    }
    w.layers.push_back(std::move(lw));
  }
  DSCALE_ASSIGN_OR_RETURN(w.final_norm,
                          ReadGains(c, read, {TargetFinalNormName(c), {c.hidden_size}}));
  return w;
}

}  // namespace dscale
