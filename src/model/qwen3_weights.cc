#include "model/qwen3_weights.h"

#include <iterator>

namespace dscale {
namespace {

using ShapeList = TensorShapes;

void AddLayerShapes(const Qwen3Config& c, const std::string& prefix, int64_t layer,
                    ShapeList* shapes) {
  const int64_t h = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  auto add = [&](const char* suffix, std::vector<int64_t> shape) {
    shapes->emplace_back(LayerTensorName(prefix, layer, suffix), std::move(shape));
  };
  add("input_layernorm", {h});
  add("self_attn.q_proj", {c.q_dim(), h});
  add("self_attn.k_proj", {c.kv_dim(), h});
  add("self_attn.v_proj", {c.kv_dim(), h});
  add("self_attn.o_proj", {h, c.q_dim()});
  add("self_attn.q_norm", {c.head_dim});
  add("self_attn.k_norm", {c.head_dim});
  add("post_attention_layernorm", {h});
  add("mlp.gate_proj", {inter, h});
  add("mlp.up_proj", {inter, h});
  add("mlp.down_proj", {h, inter});
}

// Reads the named tensors (in order) and concatenates their rows.
Result<std::vector<float>> ReadStacked(const TensorReader& read, const ShapeList& parts) {
  std::vector<float> stacked;
  for (const auto& [name, shape] : parts) {
    DSCALE_ASSIGN_OR_RETURN(std::vector<float> part, read(name, shape));
    stacked.insert(stacked.end(), std::make_move_iterator(part.begin()),
                   std::make_move_iterator(part.end()));
  }
  return stacked;
}

}  // namespace

Result<Qwen3LayerWeights> LoadDecoderLayer(const Qwen3Config& c, const std::string& prefix,
                                           int64_t layer, const TensorReader& read) {
  const ShapeList shapes = DecoderLayerShapes(c, prefix, layer);
  auto part = [&](size_t index) { return ShapeList{shapes[index]}; };
  Qwen3LayerWeights w;
  DSCALE_ASSIGN_OR_RETURN(w.input_norm, ReadStacked(read, part(0)));
  DSCALE_ASSIGN_OR_RETURN(w.qkv, ReadStacked(read, {shapes[1], shapes[2], shapes[3]}));
  DSCALE_ASSIGN_OR_RETURN(w.o_proj, ReadStacked(read, part(4)));
  DSCALE_ASSIGN_OR_RETURN(w.q_norm, ReadStacked(read, part(5)));
  DSCALE_ASSIGN_OR_RETURN(w.k_norm, ReadStacked(read, part(6)));
  DSCALE_ASSIGN_OR_RETURN(w.post_norm, ReadStacked(read, part(7)));
  DSCALE_ASSIGN_OR_RETURN(w.gate_up, ReadStacked(read, {shapes[8], shapes[9]}));
  DSCALE_ASSIGN_OR_RETURN(w.down, ReadStacked(read, part(10)));
  return w;
}

std::string LayerTensorName(const std::string& prefix, int64_t layer, const std::string& suffix) {
  return prefix + "layers." + std::to_string(layer) + "." + suffix + ".weight";
}

ShapeList DecoderLayerShapes(const Qwen3Config& c, const std::string& prefix, int64_t layer) {
  ShapeList shapes;
  AddLayerShapes(c, prefix, layer, &shapes);
  return shapes;
}

ShapeList Qwen3TensorShapes(const Qwen3Config& c) {
  ShapeList shapes;
  shapes.emplace_back(kQwen3EmbedName, std::vector<int64_t>{c.vocab_size, c.hidden_size});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    AddLayerShapes(c, kQwen3Prefix, layer, &shapes);
  }
  shapes.emplace_back(kQwen3FinalNormName, std::vector<int64_t>{c.hidden_size});
  if (!c.tie_word_embeddings) {
    shapes.emplace_back(kQwen3LmHeadName, std::vector<int64_t>{c.vocab_size, c.hidden_size});
  }
  return shapes;
}

Result<Qwen3Weights> LoadQwen3Weights(const Qwen3Config& c, const TensorReader& read) {
  Qwen3Weights w;
  DSCALE_ASSIGN_OR_RETURN(w.embed, read(kQwen3EmbedName, {c.vocab_size, c.hidden_size}));
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    DSCALE_ASSIGN_OR_RETURN(Qwen3LayerWeights lw, LoadDecoderLayer(c, kQwen3Prefix, layer, read));
    w.layers.push_back(std::move(lw));
  }
  DSCALE_ASSIGN_OR_RETURN(w.final_norm, read(kQwen3FinalNormName, {c.hidden_size}));
  if (!c.tie_word_embeddings) {
    DSCALE_ASSIGN_OR_RETURN(w.lm_head, read(kQwen3LmHeadName, {c.vocab_size, c.hidden_size}));
  }
  return w;
}

}  // namespace dscale
