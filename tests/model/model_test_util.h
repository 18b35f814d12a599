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

}  // namespace dscale::testing
