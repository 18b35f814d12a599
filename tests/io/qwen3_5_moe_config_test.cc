// The Qwen3.5 / Qwen3.6 mixture of experts at the config seam: a 35B-A3B-shaped config.json in
// both layouts (Qwen3_5MoeForConditionalGeneration with `text_config`, Qwen3_5MoeForCausalLM at
// the top level), every layer sparse with fused experts and a shared expert, the fields the family
// fixes refused by name, the round trip and the named shape.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/config_test_util.h"
#include "io/decoder_config.h"
#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

using testing_io::ExpectError;
using testing_io::ExpectRoundTrips;
using testing_io::Parse;

// Qwen3.5-35B-A3B's text model (the sizes of transformers' Qwen3_5MoeTextConfig defaults and
// the published training recipes; the vision config left out, which the reader does not look
// at).
nlohmann::json Qwen3_5_35bA3bJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "tie_word_embeddings": false,
    "text_config": {
      "attention_bias": false,
      "attn_output_gate": true,
      "bos_token_id": null,
      "eos_token_id": 248044,
      "full_attention_interval": 4,
      "head_dim": 256,
      "hidden_act": "silu",
      "hidden_size": 2048,
      "linear_conv_kernel_dim": 4,
      "linear_key_head_dim": 128,
      "linear_num_key_heads": 16,
      "linear_num_value_heads": 32,
      "linear_value_head_dim": 128,
      "max_position_embeddings": 262144,
      "model_type": "qwen3_5_moe_text",
      "moe_intermediate_size": 512,
      "num_attention_heads": 16,
      "num_experts": 256,
      "num_experts_per_tok": 8,
      "num_hidden_layers": 40,
      "num_key_value_heads": 2,
      "rms_norm_eps": 1e-06,
      "rope_parameters": {
        "mrope_interleaved": true,
        "mrope_section": [11, 11, 10],
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000000,
        "rope_type": "default"
      },
      "router_aux_loss_coef": 0.001,
      "shared_expert_intermediate_size": 512,
      "tie_word_embeddings": false,
      "vocab_size": 248320
    }
  })");
}

nlohmann::json CausalLmJson() {
  nlohmann::json json = Qwen3_5_35bA3bJson()["text_config"];
  json["architectures"] = {"Qwen3_5MoeForCausalLM"};
  return json;
}

TEST(Qwen3_5MoeConfigTest, ReadsBothLayouts) {
  for (const nlohmann::json& json : {Qwen3_5_35bA3bJson(), CausalLmJson()}) {
    const Result<DecoderConfig> c = Parse(json);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->family, ModelFamily::kQwen3_5Moe);
    EXPECT_EQ(c->hybrid.multimodal_layout, json.contains("text_config"));
    EXPECT_EQ(c->intermediate_size, 0);  // no dense MLP
    EXPECT_EQ(c->moe.num_experts, 256);
    EXPECT_EQ(c->moe.experts_per_token, 8);
    EXPECT_EQ(c->moe.expert_intermediate_size, 512);
    EXPECT_EQ(c->moe.shared_expert_intermediate_size, 512);
    EXPECT_TRUE(c->moe.norm_topk_prob);
    EXPECT_TRUE(c->moe.fused_experts);
    EXPECT_EQ(c->SparseLayerCount(), 40);
    EXPECT_TRUE(c->IsLinearAttentionLayer(0));
    EXPECT_FALSE(c->IsLinearAttentionLayer(3));
    EXPECT_EQ(c->rotary_dim(), 64);
    EXPECT_TRUE(c->hybrid.zero_centred_norms && c->hybrid.attention_output_gate);
  }
}

TEST(Qwen3_5MoeConfigTest, RefusalsNameTheField) {
  nlohmann::json json = Qwen3_5_35bA3bJson();
  json["text_config"].erase("shared_expert_intermediate_size");
  ExpectError(json, "text_config.shared_expert_intermediate_size", "missing");

  json = Qwen3_5_35bA3bJson();
  json["text_config"]["num_experts_per_tok"] = 300;
  ExpectError(json, "text_config.num_experts_per_tok", "more than num_experts 256");

  json = Qwen3_5_35bA3bJson();
  json["text_config"]["norm_topk_prob"] = false;
  ExpectError(json, "text_config.norm_topk_prob", "always renormalises");

  json = Qwen3_5_35bA3bJson();
  json["text_config"]["decoder_sparse_step"] = 2;
  ExpectError(json, "text_config.decoder_sparse_step", "every layer of this family is sparse");

  json = Qwen3_5_35bA3bJson();
  json["text_config"]["mlp_only_layers"] = {3};
  ExpectError(json, "text_config.mlp_only_layers", "every layer of this family is sparse");

  json = CausalLmJson();
  json["model_type"] = "qwen3_5_text";
  ExpectError(json, "model_type", "\"qwen3_5_moe_text\"");

  // The fields the family fixes may be present when they say what it does.
  json = Qwen3_5_35bA3bJson();
  json["text_config"]["norm_topk_prob"] = true;
  json["text_config"]["decoder_sparse_step"] = 1;
  json["text_config"]["mlp_only_layers"] = nlohmann::json::array();
  EXPECT_TRUE(Parse(json).ok());
}

TEST(Qwen3_5MoeConfigTest, RoundTripsThroughItsJson) {
  for (const nlohmann::json& json : {Qwen3_5_35bA3bJson(), CausalLmJson()}) ExpectRoundTrips(json);
}

TEST(Qwen3_5MoeConfigTest, TheNamedShapeIsThisConfig) {
  const Result<DecoderConfig> config = Parse(Qwen3_5_35bA3bJson());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(*NamedQwen3Config("qwen3.5-35b-a3b"), *config);
}

}  // namespace
}  // namespace dscale
