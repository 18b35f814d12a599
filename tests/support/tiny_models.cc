#include "support/tiny_models.h"

#include <map>
#include <random>
#include <string>
#include <utility>

#include "dvl/features.h"
#include "model/random_checkpoint.h"

namespace dscale::testing {

DecoderConfig OddTinyConfig() {
  return {.vocab_size = 131,
          .hidden_size = 72,
          .intermediate_size = 100,
          .num_hidden_layers = 3,
          .num_attention_heads = 4,
          .num_key_value_heads = 2,
          .head_dim = 32,
          .rms_norm_eps = 1e-6,
          .rope_theta = 10000.0,
          .tie_word_embeddings = false,
          .max_position_embeddings = 1024,
          .bos_token_ids = {},
          .eos_token_ids = {130}};
}

DecoderConfig EngineTestTargetConfig(int64_t vocab) {
  return {.vocab_size = vocab,
          .hidden_size = 64,
          .intermediate_size = 96,
          .num_hidden_layers = 3,
          .num_attention_heads = 4,
          .num_key_value_heads = 2,
          .head_dim = 16,
          .rms_norm_eps = 1e-6,
          .rope_theta = 10000.0,
          .tie_word_embeddings = false,
          .max_position_embeddings = 2048,
          .bos_token_ids = {},
          .eos_token_ids = {vocab - 1}};
}

DecoderConfig AsLlama3(DecoderConfig c, double rope_theta, int64_t original_context) {
  c.family = ModelFamily::kLlama;
  c.qk_norm = false;
  c.rope_theta = rope_theta;
  c.rope_scaling = {.type = RopeScalingType::kLlama3,
                    .factor = 8.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_position_embeddings = original_context};
  return c;
}

DecoderConfig EngineTestLlamaConfig(int64_t vocab, int64_t original_context) {
  return AsLlama3(EngineTestTargetConfig(vocab), 500000.0, original_context);
}

DecoderConfig EngineTestMoeConfig(bool norm_topk_prob, int64_t vocab) {
  DecoderConfig c = EngineTestTargetConfig(vocab);
  c.family = ModelFamily::kQwen3Moe;
  c.moe = {.num_experts = 8,
           .experts_per_token = 2,
           .expert_intermediate_size = 24,
           .norm_topk_prob = norm_topk_prob,
           .decoder_sparse_step = 1,
           .mlp_only_layers = {1}};
  return c;
}

DecoderConfig EngineTestHybridConfig(int64_t key_heads, int64_t value_heads, int64_t vocab) {
  DecoderConfig c = EngineTestTargetConfig(vocab);
  c.family = ModelFamily::kQwen3_5;
  c.hybrid = {.layer_types = {},
              .linear = {.key_heads = key_heads,
                         .value_heads = value_heads,
                         .key_head_dim = 12,
                         .value_head_dim = 9,
                         .conv_kernel = 4},
              .partial_rotary_factor = 0.5,
              .attention_output_gate = true,
              .zero_centred_norms = true,
              .multimodal_layout = false};
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    c.hybrid.layer_types.push_back(layer % 2 == 0 ? LayerKind::kLinearAttention
                                                  : LayerKind::kFullAttention);
  }
  return c;
}

DecoderConfig EngineTestHybridMoeConfig(int64_t vocab) {
  DecoderConfig c = EngineTestHybridConfig(2, 4, vocab);
  c.family = ModelFamily::kQwen3_5Moe;
  c.intermediate_size = 0;
  c.moe = {.num_experts = 8,
           .experts_per_token = 2,
           .expert_intermediate_size = 24,
           .norm_topk_prob = true,
           .shared_expert_intermediate_size = 16,
           .fused_experts = true};
  return c;
}

DecoderConfig EngineLoopConfig() {
  return {.vocab_size = 512,
          .hidden_size = 32,
          .intermediate_size = 48,
          .num_hidden_layers = 2,
          .num_attention_heads = 2,
          .num_key_value_heads = 1,
          .head_dim = 16,
          .rms_norm_eps = 1e-6,
          .rope_theta = 10000.0,
          .tie_word_embeddings = false,
          .max_position_embeddings = 2048,
          .bos_token_ids = {},
          .eos_token_ids = {}};
}

DecoderConfig TinyDeviceConfig(bool tie) {
  DecoderConfig config = TinyQwen3Config();
  config.num_hidden_layers = 3;
  config.tie_word_embeddings = tie;
  config.eos_token_ids = {0};
  return config;
}

DecoderConfig ForwardBenchConfig() {
  return {.vocab_size = 4096,
          .hidden_size = 512,
          .intermediate_size = 1536,
          .num_hidden_layers = 8,
          .num_attention_heads = 8,
          .num_key_value_heads = 4,
          .head_dim = 64,
          .rms_norm_eps = 1e-6,
          .rope_theta = 1e6,
          .tie_word_embeddings = false,
          .max_position_embeddings = 4096,
          .bos_token_ids = {},
          .eos_token_ids = {0}};
}

DFlashConfig TestDrafterConfig(const DecoderConfig& target) {
  DFlashConfig c;
  c.draft = target;
  c.draft.family = ModelFamily::kQwen3;  // DFlash layers are Qwen3's whatever the target
  c.draft.qk_norm = true;
  c.draft.moe = {};     // and dense
  c.draft.hybrid = {};  // and plain attention
  c.draft.num_hidden_layers = 2;
  c.block_size = 16;
  c.mask_token_id = target.vocab_size - 2;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = {0, static_cast<int32_t>(target.num_hidden_layers - 1)};
  return c;
}

std::vector<int32_t> RandomTokens(int32_t count, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(count);
  for (int32_t& t : tokens) t = dist(rng);
  return tokens;
}

DFlashConfig LayeredTestDrafterConfig(const DecoderConfig& target) {
  DFlashConfig c = TestDrafterConfig(target);
  c.draft.num_hidden_layers = 3;
  c.layer_types = {DraftLayerType::kSliding, DraftLayerType::kFull, DraftLayerType::kSliding};
  c.sliding_window = 5;
  c.input_embedding_scale = 0.375;
  return c;
}

DFlashConfig TestDSparkConfig(const DecoderConfig& target, const DSparkHeadConfig& heads,
                              int32_t rows) {
  DFlashConfig c = TestDrafterConfig(target);
  c.block_size = rows;
  c.dspark = heads;
  // DeepSpec's drafters may not read the target's last layer (io/dflash_config.h).
  c.target_layer_ids = {0, static_cast<int32_t>(target.num_hidden_layers - 2)};
  return c;
}

std::unique_ptr<DFlashDrafter> RandomDrafter(const DecoderModel& target, uint64_t seed) {
  return RandomDrafter(target, seed, TestDrafterConfig(target.config()));
}

std::unique_ptr<DFlashDrafter> RandomDrafter(const DecoderModel& target, uint64_t seed,
                                             const DFlashConfig& config) {
  std::map<std::string, std::vector<float>> by_name;
  for (TensorToWrite& t :
       RandomDFlashTensors(config, target.config().hidden_size, seed, DType::kF32)) {
    by_name[t.name] = std::move(t.values);
  }
  TensorReader read = FromF32Reader(
      [&](const std::string& name, const std::vector<int64_t>&) -> Result<std::vector<float>> {
        return by_name.at(name);
      });
  DSparkHeadWeights heads;
  if (config.is_dspark()) {
    const DecoderConfig& t = target.config();
    std::map<std::string, std::vector<float>> head_values;
    for (TensorToWrite& w : RandomDSparkHeadTensors(*config.dspark, t.hidden_size, t.vocab_size,
                                                    seed + 1, DType::kF32)) {
      head_values[w.name] = std::move(w.values);
    }
    heads = LoadDSparkHeadWeights(
                *config.dspark, t.hidden_size, t.vocab_size,
                FromF32Reader([&](const std::string& name, const std::vector<int64_t>&)
                                  -> Result<std::vector<float>> { return head_values.at(name); }))
                .value();
  }
  return std::make_unique<DFlashDrafter>(
      config, LoadDFlashWeights(config, target.config().hidden_size, read).value(), target,
      std::move(heads));
}

DominoHeadConfig OddHeadConfig() {
  return {.head_file = "domino_head.safetensors", .gru_hidden_size = 23, .bottleneck_size = 13};
}

DominoHeadWeights RandomHeadWeights(const DominoHeadConfig& config, const DecoderConfig& target,
                                    uint64_t seed, DType dtype) {
  std::map<std::string, std::vector<float>> by_name;
  for (TensorToWrite& t :
       RandomDominoHeadTensors(config, target.hidden_size, target.vocab_size, seed, dtype)) {
    by_name[t.name] = std::move(t.values);
  }
  const TensorReader read = [&](const std::string& name,
                                const std::vector<int64_t>& shape) -> Result<WeightMatrix> {
    std::vector<float>& values = by_name.at(name);
    if (dtype != DType::kBF16) return WeightMatrix::FromF32(values, shape);
    std::vector<uint16_t> bits(values.size());
    ConvertFromF32(DType::kBF16, values.data(), values.size(), bits.data());
    return WeightMatrix::FromBf16(std::move(bits), shape[0], shape[1]);
  };
  return LoadDominoHeadWeights(config, target.hidden_size, target.vocab_size, read).value();
}

std::unique_ptr<DFlashDrafter> RandomDominoDrafter(const DecoderModel& target, uint64_t seed) {
  std::unique_ptr<DFlashDrafter> drafter = RandomDrafter(target, seed);
  drafter->AttachHead(DominoHead(
      OddHeadConfig(), RandomHeadWeights(OddHeadConfig(), target.config(), seed + 1, DType::kF32),
      target.weights().embed));
  return drafter;
}

dvl::Predictor RandomPredictor(int64_t hidden, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  dvl::PredictorWeights w = dvl::PredictorWeights::Zeros();
  for (float& v : w.w1) v = 0.05f * normal(rng);
  for (float& v : w.w2) v = 0.5f * normal(rng);
  for (float& v : w.b2) v = 1.0f + normal(rng);
  return dvl::Predictor(dvl::MakeProjections(hidden, vocab, seed), std::move(w));
}

}  // namespace dscale::testing
