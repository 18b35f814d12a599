// The Qwen3-MoE family at the config seam: Qwen3-30B-A3B's config.json as published, the sparse
// layer rule (mlp_only_layers, decoder_sparse_step), the fields' refusals, the round trip and the
// named shape.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/config_test_util.h"
#include "io/decoder_config.h"
#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

using testing_io::ExpectError;
using testing_io::Parse;

// Qwen3-30B-A3B's config.json as published.
nlohmann::json Qwen3_30bA3bJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": true,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "output_router_logits": false,
    "rms_norm_eps": 1e-06,
    "rope_scaling": null,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.001,
    "sliding_window": null,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "use_cache": true,
    "use_sliding_window": false,
    "vocab_size": 151936
  })");
}

TEST(Qwen3MoeConfigTest, ReadsQwen3_30bA3bAsTheNamedShapeHasIt) {
  const Result<DecoderConfig> config = Parse(Qwen3_30bA3bJson());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->family, ModelFamily::kQwen3Moe);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_EQ(config->moe.num_experts, 128);
  EXPECT_EQ(config->moe.experts_per_token, 8);
  EXPECT_EQ(config->moe.expert_intermediate_size, 768);
  EXPECT_TRUE(config->moe.norm_topk_prob);
  EXPECT_EQ(*config, *NamedQwen3Config("qwen3-30b-a3b"));
  for (int64_t layer = 0; layer < 48; ++layer) EXPECT_TRUE(config->IsSparseLayer(layer));
}

TEST(Qwen3MoeConfigTest, ModelTypeAloneNamesTheFamilyAndOptionalFieldsTakeHfDefaults) {
  nlohmann::json json = Qwen3_30bA3bJson();
  json.erase("architectures");
  for (const char* field : {"norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"}) {
    json.erase(field);
  }
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->family, ModelFamily::kQwen3Moe);
  EXPECT_FALSE(config->moe.norm_topk_prob);  // transformers' default
  EXPECT_EQ(config->moe.decoder_sparse_step, 1);
  EXPECT_TRUE(config->moe.mlp_only_layers.empty());
  EXPECT_EQ(ModelFamilyName(ModelFamily::kQwen3Moe), "qwen3_moe");
  EXPECT_EQ(ModelFamilyFromName("qwen3_moe"), ModelFamily::kQwen3Moe);
}

// Layer i is sparse iff i ∉ mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
TEST(Qwen3MoeConfigTest, SparseLayersFollowTheStepAndTheDenseList) {
  nlohmann::json json = Qwen3_30bA3bJson();
  json["num_hidden_layers"] = 7;
  json["decoder_sparse_step"] = 2;
  json["mlp_only_layers"] = {3, 4};
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  const std::vector<bool> sparse = {false, true, false, false, false, true, false};
  for (int64_t layer = 0; layer < 7; ++layer) {
    EXPECT_EQ(config->IsSparseLayer(layer), sparse[static_cast<size_t>(layer)]) << layer;
  }
  EXPECT_TRUE(config->HasSparseLayers());
  json["mlp_only_layers"] = {1, 3, 5};
  EXPECT_FALSE(Parse(json)->HasSparseLayers());
  // A dense family has no sparse layers whatever it would say.
  EXPECT_FALSE(ParseDecoderConfig(DecoderConfigToJson(*NamedQwen3Config("qwen3-8b")), "")
                   ->HasSparseLayers());
}

TEST(Qwen3MoeConfigTest, RoundTripsThroughItsJson) {
  DecoderConfig config = *NamedQwen3Config("qwen3-30b-a3b");
  config.num_hidden_layers = 5;
  config.moe.norm_topk_prob = false;
  config.moe.decoder_sparse_step = 2;
  config.moe.mlp_only_layers = {0, 4};
  const Result<DecoderConfig> back = ParseDecoderConfig(DecoderConfigToJson(config), "");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, config);
}

TEST(Qwen3MoeConfigTest, BadOrMissingExpertFieldsAreRefusedByName) {
  const auto with = [](const char* field, const nlohmann::json& value) {
    nlohmann::json json = Qwen3_30bA3bJson();
    json[field] = value;
    return json;
  };
  const auto without = [](const char* field) {
    nlohmann::json json = Qwen3_30bA3bJson();
    json.erase(field);
    return json;
  };
  ExpectError(without("num_experts"), "num_experts", "missing (expected a positive integer)");
  ExpectError(without("num_experts_per_tok"), "num_experts_per_tok", "missing");
  ExpectError(without("moe_intermediate_size"), "moe_intermediate_size", "missing");
  ExpectError(with("num_experts", 0), "num_experts", "expected a positive integer, got 0");
  ExpectError(with("num_experts_per_tok", 129), "num_experts_per_tok",
              "129 is more than num_experts 128");
  ExpectError(with("moe_intermediate_size", 7.5), "moe_intermediate_size",
              "expected a positive integer, got 7.5");
  ExpectError(with("norm_topk_prob", "yes"), "norm_topk_prob", "expected");
  ExpectError(with("decoder_sparse_step", 0), "decoder_sparse_step", "expected a positive integer");
  ExpectError(with("mlp_only_layers", 3), "mlp_only_layers", "expected a list of layer indices");
  ExpectError(with("mlp_only_layers", {1, 48}), "mlp_only_layers[1]",
              "expected a layer index in [0, 48), got 48");
  ExpectError(with("mlp_only_layers", {-1}), "mlp_only_layers[0]", "got -1");
  ExpectError(with("shared_expert_intermediate_size", 512), "shared_expert_intermediate_size",
              "a shared expert is not supported");
  ExpectError(with("model_type", "qwen3"), "model_type", "expected \"qwen3_moe\"");
  ExpectError(with("rope_scaling", {{"rope_type", "yarn"}}), "rope_scaling", "not supported");
}

}  // namespace
}  // namespace dscale
