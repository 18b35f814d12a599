#include "model/random_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "core/check.h"
#include "model/dflash_drafter.h"
#include "model/domino_head.h"
#include "model/dspark_head.h"

namespace dscale {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Norm gains near 1; biases in [−0.5, 0.5]; projections N(0, 1/in) so each layer keeps unit
// scale; the embeddings (a DSpark Markov head's too) N(0, 1); the LM head and a Markov head's
// output projection a little wider, so the top logits stand apart and the head moves some of
// them.
std::vector<float> RandomValues(const std::string& name, const std::vector<int64_t>& shape,
                                std::mt19937_64& rng) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> values(count);
  if (name.ends_with(".bias")) {
    std::uniform_real_distribution<float> bias(-0.5f, 0.5f);
    for (float& v : values) v = bias(rng);
    return values;
  }
  if (shape.size() == 1) {
    std::uniform_real_distribution<float> gain(0.8f, 1.2f);
    for (float& v : values) v = gain(rng);
    return values;
  }
  double stddev = 1.0 / std::sqrt(static_cast<double>(shape.back()));  // the inputs' dim
  if (name.ends_with("embed_tokens.weight") || name.ends_with("markov_w1.weight")) stddev = 1.0;
  if (name == kTargetLmHeadName || name.ends_with("markov_w2.weight")) stddev *= 3.0;
  std::normal_distribution<float> normal(0.0f, static_cast<float>(stddev));
  for (float& v : values) v = normal(rng);
  return values;
}

void RoundTo(DType dtype, std::vector<float>& values) {
  if (dtype == DType::kF32) return;
  std::vector<uint16_t> bits(values.size());
  ConvertFromF32(dtype, values.data(), values.size(), bits.data());
  ConvertToF32(dtype, bits.data(), values.size(), values.data());
}

// A Gated DeltaNet's own parameters, so that its state carries over positions: the conv's taps
// N(0, 1/kernel); A = exp(A_log) in [0.14, 1.6] and dt_bias in [−1, 1], so the per-step decay
// exp(−A · softplus(a + dt_bias)) mostly lies in [0.3, 0.95].
void ShapeLinearAttention(const std::string& name, std::vector<float>& values,
                          const std::vector<int64_t>& shape, std::mt19937_64& rng) {
  if (EndsWith(name, "conv1d.weight")) {
    std::normal_distribution<float> normal(
        0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.back()))));
    for (float& v : values) v = normal(rng);
  } else if (EndsWith(name, "A_log")) {
    std::uniform_real_distribution<float> a_log(-2.0f, 0.5f);
    for (float& v : values) v = a_log(rng);
  } else if (EndsWith(name, "dt_bias")) {
    std::uniform_real_distribution<float> bias(-1.0f, 1.0f);
    for (float& v : values) v = bias(rng);
  }
}

// The values of a checkpoint's tensors, made one after another from one generator in the order
// of its shape list (so tensor i depends on the ones before it). With `zero_centred_norms` the
// norms (but a Gated DeltaNet's gated one) are stored as gain − 1, as Qwen3.5 stores them.
class RandomTensorStream {
 public:
  RandomTensorStream(uint64_t seed, DType dtype, bool zero_centred_norms)
      : rng_(seed), dtype_(dtype), zero_centred_norms_(zero_centred_norms) {}

  std::vector<float> Next(const std::string& name, const std::vector<int64_t>& shape) {
    std::vector<float> values = RandomValues(name, shape, rng_);
    if (EndsWith(name, "q_norm.weight") || EndsWith(name, "k_norm.weight")) {
      for (float& v : values) v = 1.0f + (v - 1.0f) * 0.5f;
    }
    if (name.find("linear_attn.") != std::string::npos) {
      ShapeLinearAttention(name, values, shape, rng_);
    } else if (zero_centred_norms_ && EndsWith(name, "norm.weight")) {
      for (float& v : values) v -= 1.0f;
    }
    RoundTo(dtype_, values);
    return values;
  }

 private:
  std::mt19937_64 rng_;
  DType dtype_;
  bool zero_centred_norms_;
};

std::vector<TensorToWrite> RandomTensors(const TensorShapes& shapes, uint64_t seed, DType dtype,
                                         bool zero_centred_norms = false) {
  RandomTensorStream stream(seed, dtype, zero_centred_norms);
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, shape] : shapes) {
    tensors.push_back(
        {.name = name, .dtype = dtype, .shape = shape, .values = stream.Next(name, shape)});
  }
  return tensors;
}

// Tensors written with the values given rather than random ones (already rounded to the dtype).
using GivenTensors = std::map<std::string, std::vector<float>>;

// config.json and model.safetensors with the random tensors of `shapes`, made and written one
// at a time (an 8B-shaped checkpoint is written in the memory of its largest tensor); those in
// `given` take its values and draw nothing from the generator.
Status WriteCheckpoint(const std::string& dir, const std::string& config_json,
                       const TensorShapes& shapes, uint64_t seed, DType dtype,
                       bool zero_centred_norms = false, const GivenTensors& given = {}) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(dir + ": cannot create directory: " + error.message());
  {
    std::ofstream file(dir + "/config.json");
    file << config_json << "\n";
    if (!file) return IoError(dir + "/config.json: write failed");
  }
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, shape] : shapes) {
    tensors.push_back({.name = name, .dtype = dtype, .shape = shape, .values = {}});
  }
  RandomTensorStream stream(seed, dtype, zero_centred_norms);
  return WriteSafetensorsStreaming(dir + "/model.safetensors", tensors, [&](size_t i) {
    const auto it = given.find(tensors[i].name);
    return it != given.end() ? it->second : stream.Next(tensors[i].name, tensors[i].shape);
  });
}

}  // namespace

DecoderConfig TinyQwen3Config() {
  return {.vocab_size = 512,
          .hidden_size = 128,
          .intermediate_size = 256,
          .num_hidden_layers = 4,
          .num_attention_heads = 4,
          .num_key_value_heads = 2,
          .head_dim = 32,
          .rms_norm_eps = 1e-6,
          .rope_theta = 1e6,
          .tie_word_embeddings = false,
          .max_position_embeddings = 4096,
          .bos_token_ids = {},
          .eos_token_ids = {}};
}

DecoderConfig TinyLlamaConfig() {
  DecoderConfig c = TinyQwen3Config();
  c.family = ModelFamily::kLlama;
  c.qk_norm = false;
  c.rope_theta = 500000.0;
  c.rope_scaling = {.type = RopeScalingType::kLlama3,
                    .factor = 8.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = 1024};
  return c;
}

DecoderConfig TinyQwen3MoeConfig() {
  DecoderConfig c = TinyQwen3Config();
  c.family = ModelFamily::kQwen3Moe;
  c.moe = {.num_experts = 8,
           .experts_per_token = 2,
           .expert_intermediate_size = 64,
           .norm_topk_prob = true,
           .decoder_sparse_step = 1,
           .mlp_only_layers = {}};
  return c;
}

DecoderConfig TinyQwen3_5Config() {
  DecoderConfig c = TinyQwen3Config();
  c.family = ModelFamily::kQwen3_5;
  c.rope_theta = 1e7;
  c.hybrid = {.layer_types = {LayerKind::kLinearAttention, LayerKind::kLinearAttention,
                              LayerKind::kLinearAttention, LayerKind::kFullAttention},
              .linear = {.key_heads = 2,
                         .value_heads = 4,
                         .key_head_dim = 16,
                         .value_head_dim = 16,
                         .conv_kernel = 4},
              .partial_rotary_factor = 0.25,
              .attention_output_gate = true,
              .zero_centred_norms = true,
              .multimodal_layout = false};
  return c;
}

DecoderConfig TinyQwen3_5MoeConfig() {
  DecoderConfig c = TinyQwen3_5Config();
  c.family = ModelFamily::kQwen3_5Moe;
  c.intermediate_size = 0;
  c.moe = TinyQwen3MoeConfig().moe;
  c.moe.shared_expert_intermediate_size = 64;
  c.moe.fused_experts = true;
  return c;
}

std::vector<TensorToWrite> RandomDecoderTensors(const DecoderConfig& config, uint64_t seed,
                                                DType dtype) {
  return RandomTensors(DecoderTensorShapes(config), seed, dtype, config.hybrid.zero_centred_norms);
}

std::vector<TensorToWrite> RandomDFlashTensors(const DFlashConfig& config, int64_t target_hidden,
                                               uint64_t seed, DType dtype) {
  return RandomTensors(DFlashTensorShapes(config, target_hidden), seed, dtype);
}

Status WriteRandomDFlashCheckpoint(const std::string& dir, const DFlashConfig& config,
                                   int64_t target_hidden, uint64_t seed, DType dtype) {
  return WriteCheckpoint(dir, DFlashConfigToJson(config), DFlashTensorShapes(config, target_hidden),
                         seed, dtype);
}

TensorShapes DSparkDrafterTensorShapes(const DFlashConfig& config, int64_t target_hidden,
                                       int64_t vocab) {
  DSCALE_CHECK(config.is_dspark());
  TensorShapes shapes = DFlashTensorShapes(config, target_hidden);
  for (auto& entry : DSparkHeadTensorShapes(*config.dspark, config.draft.hidden_size, vocab)) {
    shapes.push_back(std::move(entry));
  }
  shapes.emplace_back(kDSparkEmbedCopyName, std::vector<int64_t>{vocab, target_hidden});
  shapes.emplace_back(kDSparkLmHeadCopyName, std::vector<int64_t>{vocab, target_hidden});
  return shapes;
}

std::vector<TensorToWrite> RandomDSparkHeadTensors(const DSparkHeadConfig& config, int64_t hidden,
                                                   int64_t vocab, uint64_t seed, DType dtype) {
  return RandomTensors(DSparkHeadTensorShapes(config, hidden, vocab), seed, dtype);
}

Status WriteRandomDSparkCheckpoint(const std::string& dir, const DFlashConfig& config,
                                   int64_t target_hidden, uint64_t seed, DType dtype,
                                   std::vector<float> embed, std::vector<float> lm_head) {
  const int64_t vocab = config.draft.vocab_size;
  DSCALE_CHECK(static_cast<int64_t>(embed.size()) == vocab * target_hidden);
  DSCALE_CHECK(static_cast<int64_t>(lm_head.size()) == vocab * target_hidden);
  GivenTensors copies;
  copies[kDSparkEmbedCopyName] = std::move(embed);
  copies[kDSparkLmHeadCopyName] = std::move(lm_head);
  return WriteCheckpoint(dir, DFlashConfigToJson(config),
                         DSparkDrafterTensorShapes(config, target_hidden, vocab), seed, dtype,
                         /*zero_centred_norms=*/false, copies);
}

std::vector<TensorToWrite> RandomDominoHeadTensors(const DominoHeadConfig& config, int64_t hidden,
                                                   int64_t vocab, uint64_t seed, DType dtype) {
  return RandomTensors(DominoHeadTensorShapes(config, hidden, vocab), seed, dtype);
}

Status WriteRandomDominoHead(const std::string& drafter_dir, const DominoHeadConfig& config,
                             int64_t hidden, int64_t vocab, uint64_t seed, DType dtype) {
  return WriteSafetensors(drafter_dir + "/" + config.head_file,
                          RandomDominoHeadTensors(config, hidden, vocab, seed, dtype));
}

DecoderWeights RandomDecoderWeights(const DecoderConfig& config, uint64_t seed, DType dtype) {
  std::map<std::string, std::vector<float>> by_name;
  for (TensorToWrite& t : RandomDecoderTensors(config, seed, dtype)) {
    by_name[t.name] = std::move(t.values);
  }
  // BF16 matrices stay BF16, as a BF16 checkpoint's are used in place, so a model built here
  // computes exactly what the same weights loaded from a file compute.
  TensorReader read = [&by_name, dtype](const std::string& name,
                                        const std::vector<int64_t>& shape) -> Result<WeightMatrix> {
    std::vector<float>& values = by_name.at(name);
    if (dtype == DType::kBF16 && shape.size() == 2) {
      std::vector<uint16_t> bits(values.size());
      ConvertFromF32(DType::kBF16, values.data(), values.size(), bits.data());
      return WeightMatrix::FromBf16(std::move(bits), shape[0], shape[1]);
    }
    return WeightMatrix::FromF32(std::move(values), shape);
  };
  return LoadDecoderWeights(config, read).value();
}

Status WriteRandomCheckpoint(const std::string& dir, const DecoderConfig& config, uint64_t seed,
                             DType dtype) {
  return WriteCheckpoint(dir, DecoderConfigToJson(config), DecoderTensorShapes(config), seed, dtype,
                         config.hybrid.zero_centred_norms);
}

}  // namespace dscale
