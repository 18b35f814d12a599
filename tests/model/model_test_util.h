#pragma once
// Shared fixtures for model tests: small random Qwen3 configs and helpers.

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/qwen3_config.h"
#include "model/dflash_drafter.h"
#include "model/random_checkpoint.h"

namespace dscale::testing {

// A small config with deliberately odd sizes (vocab 131, hidden 72, GQA group 2).
inline Qwen3Config OddTinyConfig() {
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

inline std::vector<int32_t> RandomTokens(int32_t count, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(count);
  for (int32_t& t : tokens) t = dist(rng);
  return tokens;
}

// A drafter config for `target`: 2 layers reading target layers {0, last}, block 16, mask id
// vocab − 2.
inline DFlashConfig TestDrafterConfig(const Qwen3Config& target) {
  DFlashConfig c;
  c.draft = target;
  c.draft.num_hidden_layers = 2;
  c.block_size = 16;
  c.mask_token_id = target.vocab_size - 2;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = {0, static_cast<int32_t>(target.num_hidden_layers - 1)};
  return c;
}

// A random DFlash drafter for `target` (f32 weights, no file round trip).
inline std::unique_ptr<DFlashDrafter> RandomDrafter(const Qwen3Model& target, uint64_t seed) {
  const DFlashConfig config = TestDrafterConfig(target.config());
  std::map<std::string, std::vector<float>> by_name;
  for (TensorToWrite& t :
       RandomDFlashTensors(config, target.config().hidden_size, seed, DType::kF32)) {
    by_name[t.name] = std::move(t.values);
  }
  TensorReader read = FromF32Reader(
      [&](const std::string& name, const std::vector<int64_t>&) -> Result<std::vector<float>> {
        return by_name.at(name);
      });
  return std::make_unique<DFlashDrafter>(
      config, LoadDFlashWeights(config, target.config().hidden_size, read).value(), target);
}

// A Domino head with deliberately odd widths (G 23, B 13) and random weights for `target`,
// stored as `dtype` (BF16 matrices held as BF16, as a head file's are).
inline DominoHeadConfig OddHeadConfig() {
  return {.head_file = "domino_head.safetensors", .gru_hidden_size = 23, .bottleneck_size = 13};
}
inline DominoHeadWeights RandomHeadWeights(const DominoHeadConfig& config,
                                           const Qwen3Config& target, uint64_t seed, DType dtype) {
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

// RandomDrafter with a random Domino head attached.
inline std::unique_ptr<DFlashDrafter> RandomDominoDrafter(const Qwen3Model& target, uint64_t seed) {
  std::unique_ptr<DFlashDrafter> drafter = RandomDrafter(target, seed);
  drafter->AttachHead(DominoHead(
      OddHeadConfig(), RandomHeadWeights(OddHeadConfig(), target.config(), seed + 1, DType::kF32),
      target.weights().embed));
  return drafter;
}

}  // namespace dscale::testing
