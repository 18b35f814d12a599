// Llama 3 targets on the CPU backend: the forward against the plain reference forward (GQA and
// MHA, tied and untied, positions past the llama3 scaling's original context), and checkpoints
// in the LlamaForCausalLM layout (no q_norm / k_norm tensors) written and loaded.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "logit_bounds.h"
#include "model/decoder_model.h"
#include "model/random_checkpoint.h"
#include "prefill_logits.h"
#include "reference_forward.h"
#include "support/tiny_models.h"

namespace dscale {
namespace {

// Odd sizes as OddTinyConfig, as Llama: GQA (4 heads over 2) or MHA (3 heads of 24, q_dim 72
// = hidden), llama3 scaling over an original context of 20 positions.
DecoderConfig OddLlamaConfig(bool mha, bool tie) {
  DecoderConfig c = testing::AsLlama3(testing::OddTinyConfig(), 10000.0, 20);
  if (mha) {
    c.num_attention_heads = 3;
    c.num_key_value_heads = 3;
    c.head_dim = 24;
  }
  c.tie_word_embeddings = tie;
  return c;
}

using testing::PrefillLogits;

// Two computation orders (the kernels, the reference's double-accumulating plain ones) each
// within B_v of exact (logit_bounds.h): every logit of the 45 positions within 2·B_v.
TEST(LlamaModelTest, ForwardMatchesTheReferenceForwardForGqaMhaTiedAndUntied) {
  for (const bool mha : {false, true}) {
    for (const bool tie : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "mha=" << mha << " tie=" << tie);
      const DecoderConfig config = OddLlamaConfig(mha, tie);
      DecoderModel model(config, RandomDecoderWeights(config, 11, DType::kBF16));
      const std::vector<int32_t> tokens = testing::RandomTokens(45, config.vocab_size, 2);
      const std::vector<float> got = PrefillLogits(model, tokens, 7);
      const testing::ReferenceOutput want =
          testing::ReferenceForward(config, model.weights(), tokens);
      const std::vector<double> bounds = testing::TargetLogitBounds(model, 45, KvDtype::kF32);
      ASSERT_EQ(got.size(), want.logits.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(
            worst, std::abs(double{got[i]} - want.logits[i]) / (2.0 * bounds[i % bounds.size()]));
      }
      EXPECT_LE(worst, 1.0);
    }
  }
}

// The scaling is applied: the same weights with unscaled RoPE give other logits past position 0.
TEST(LlamaModelTest, RopeScalingChangesTheLogits) {
  const DecoderConfig scaled = OddLlamaConfig(false, false);
  DecoderConfig plain = scaled;
  plain.rope_scaling = {};
  DecoderModel a(scaled, RandomDecoderWeights(scaled, 11, DType::kF32));
  DecoderModel b(plain, RandomDecoderWeights(plain, 11, DType::kF32));
  const std::vector<int32_t> tokens = testing::RandomTokens(30, scaled.vocab_size, 3);
  const std::vector<float> la = PrefillLogits(a, tokens, 16), lb = PrefillLogits(b, tokens, 16);
  const auto vocab = static_cast<size_t>(scaled.vocab_size);
  EXPECT_TRUE(std::equal(la.begin(), la.begin() + vocab, lb.begin()));  // position 0: no turn
  float last_row_diff = 0;
  for (size_t v = 0; v < vocab; ++v) {
    last_row_diff = std::max(last_row_diff, std::abs(la[29 * vocab + v] - lb[29 * vocab + v]));
  }
  EXPECT_GT(last_row_diff, 1e-2f);
}

// make-tiny's writer and the loader agree on the LlamaForCausalLM layout: no q/k norm tensors,
// lm_head only when untied, the config read back equal.
TEST(LlamaModelTest, WritesAndLoadsTheLlamaLayout) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("dscale_llama_model_test_" + std::to_string(getpid()));
  for (const bool tie : {false, true}) {
    DecoderConfig config = TinyLlamaConfig();
    config.num_hidden_layers = 2;
    config.tie_word_embeddings = tie;
    const TensorShapes shapes = DecoderTensorShapes(config);
    EXPECT_EQ(shapes.size(), 2u * 9u + 2u + (tie ? 0u : 1u));
    for (const auto& [name, shape] : shapes) {
      EXPECT_EQ(name.find("norm.weight") != std::string::npos &&
                    name.find("self_attn") != std::string::npos,
                false)
          << name;
    }
    ASSERT_TRUE(WriteRandomCheckpoint(dir, config, 5, DType::kBF16).ok());
    Result<DecoderModel> loaded = DecoderModel::Load(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_EQ(loaded->config(), config);
    DecoderModel direct(config, RandomDecoderWeights(config, 5, DType::kBF16));
    const std::vector<int32_t> tokens = testing::RandomTokens(9, config.vocab_size, 4);
    EXPECT_EQ(PrefillLogits(*loaded, tokens, 16), PrefillLogits(direct, tokens, 16));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dscale
