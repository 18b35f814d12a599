// The dense Qwen3.5 / Qwen3.6 family at the config seam: Qwen3.5-27B's config.json in both
// layouts (…ForConditionalGeneration with `text_config`, …ForCausalLM at the top level), the
// layer-type rule, the partial rotary dims, the fields' refusals, the round trip and the named
// shapes.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "io/config_test_util.h"
#include "io/decoder_config.h"
#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

using testing_io::ExpectError;
using testing_io::ExpectRoundTrips;
using testing_io::Parse;

// Qwen3.5-27B's config.json (its text config as published; the vision config left out, which
// the reader does not look at).
nlohmann::json Qwen3_5_27bJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "eos_token_id": 248046,
    "image_token_id": 248056,
    "model_type": "qwen3_5",
    "tie_word_embeddings": false,
    "text_config": {
      "attention_bias": false,
      "attention_dropout": 0.0,
      "attn_output_gate": true,
      "bos_token_id": null,
      "eos_token_id": 248044,
      "full_attention_interval": 4,
      "head_dim": 256,
      "hidden_act": "silu",
      "hidden_size": 5120,
      "initializer_range": 0.02,
      "intermediate_size": 17408,
      "linear_conv_kernel_dim": 4,
      "linear_key_head_dim": 128,
      "linear_num_key_heads": 16,
      "linear_num_value_heads": 48,
      "linear_value_head_dim": 128,
      "mamba_ssm_dtype": "float32",
      "max_position_embeddings": 262144,
      "mlp_only_layers": [],
      "model_type": "qwen3_5_text",
      "mtp_num_hidden_layers": 1,
      "num_attention_heads": 24,
      "num_hidden_layers": 64,
      "num_key_value_heads": 4,
      "partial_rotary_factor": 0.25,
      "rms_norm_eps": 1e-06,
      "rope_parameters": {
        "mrope_interleaved": true,
        "mrope_section": [11, 11, 10],
        "partial_rotary_factor": 0.25,
        "rope_theta": 10000000,
        "rope_type": "default"
      },
      "tie_word_embeddings": false,
      "use_cache": true,
      "vocab_size": 248320
    }
  })");
}

// The same text model as a Qwen3_5ForCausalLM config (fields at the top level).
nlohmann::json CausalLmJson() {
  nlohmann::json json = Qwen3_5_27bJson()["text_config"];
  json["architectures"] = {"Qwen3_5ForCausalLM"};
  return json;
}

void ExpectQwen3_5_27b(const DecoderConfig& c) {
  EXPECT_EQ(c.family, ModelFamily::kQwen3_5);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_hidden_layers, 64);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.q_proj_rows(), 2 * 24 * 256);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.hybrid.zero_centred_norms);
  EXPECT_TRUE(c.hybrid.attention_output_gate);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{248044});
  const GatedDeltaNetConfig& l = c.hybrid.linear;
  EXPECT_EQ(l.key_heads, 16);
  EXPECT_EQ(l.value_heads, 48);
  EXPECT_EQ(l.key_head_dim, 128);
  EXPECT_EQ(l.value_head_dim, 128);
  EXPECT_EQ(l.conv_kernel, 4);
  EXPECT_EQ(l.conv_dim(), 2 * 16 * 128 + 48 * 128);
  // full_attention_interval 4: layers 3, 7, …, 63 attend; the 48 others are linear.
  int linear = 0;
  for (int64_t layer = 0; layer < 64; ++layer) {
    EXPECT_EQ(c.IsLinearAttentionLayer(layer), (layer + 1) % 4 != 0) << layer;
    linear += c.IsLinearAttentionLayer(layer) ? 1 : 0;
  }
  EXPECT_EQ(linear, 48);
  EXPECT_TRUE(c.HasLinearAttentionLayers());
}

TEST(Qwen3_5ConfigTest, ReadsTheMultimodalLayout) {
  const Result<DecoderConfig> config = Parse(Qwen3_5_27bJson());
  ASSERT_TRUE(config.ok()) << config.status().message();
  ExpectQwen3_5_27b(*config);
  EXPECT_TRUE(config->hybrid.multimodal_layout);
  EXPECT_EQ(config->TensorPrefix(), "model.language_model.");
}

TEST(Qwen3_5ConfigTest, ReadsTheTextOnlyLayout) {
  const Result<DecoderConfig> config = Parse(CausalLmJson());
  ASSERT_TRUE(config.ok()) << config.status().message();
  ExpectQwen3_5_27b(*config);
  EXPECT_FALSE(config->hybrid.multimodal_layout);
  EXPECT_EQ(config->TensorPrefix(), "model.");
  // Without architectures, model_type names the layout.
  nlohmann::json typed = CausalLmJson();
  typed.erase("architectures");
  ASSERT_TRUE(Parse(typed).ok());
  EXPECT_FALSE(Parse(typed)->hybrid.multimodal_layout);
}

TEST(Qwen3_5ConfigTest, LayerTypesWinOverTheInterval) {
  nlohmann::json json = CausalLmJson();
  json["num_hidden_layers"] = 3;
  json["layer_types"] = {"full_attention", "linear_attention", "linear_attention"};
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_FALSE(config->IsLinearAttentionLayer(0));
  EXPECT_TRUE(config->IsLinearAttentionLayer(1));
  EXPECT_TRUE(config->IsLinearAttentionLayer(2));
}

TEST(Qwen3_5ConfigTest, OlderConfigsKeepRopeAtTheTopLevel) {
  nlohmann::json json = CausalLmJson();
  json.erase("rope_parameters");
  json["rope_theta"] = 5e6;
  json["partial_rotary_factor"] = 0.5;
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->rope_theta, 5e6);
  EXPECT_EQ(config->rotary_dim(), 128);
}

TEST(Qwen3_5ConfigTest, RefusalsNameTheField) {
  nlohmann::json json = Qwen3_5_27bJson();
  json["text_config"].erase("linear_num_value_heads");
  ExpectError(json, "text_config.linear_num_value_heads", "missing");

  json = Qwen3_5_27bJson();
  json["text_config"]["linear_num_value_heads"] = 24;
  json["text_config"]["linear_num_key_heads"] = 16;
  ExpectError(json, "text_config.linear_num_value_heads", "not a multiple of linear_num_key_heads");

  json = Qwen3_5_27bJson();
  json["text_config"]["layer_types"] = {"full_attention"};
  ExpectError(json, "text_config.layer_types", "a list of 64 layer types");

  json = Qwen3_5_27bJson();
  json["text_config"]["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 64; ++i) json["text_config"]["layer_types"].push_back("sliding_attention");
  ExpectError(json, "text_config.layer_types[0]", "\"linear_attention\"");

  json = Qwen3_5_27bJson();
  json["text_config"]["rope_parameters"]["rope_type"] = "yarn";
  ExpectError(json, "text_config.rope_parameters.rope_type", "\"default\"");

  json = Qwen3_5_27bJson();
  json["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.0;
  ExpectError(json, "text_config.rope_parameters.partial_rotary_factor", "(0, 1]");

  json = Qwen3_5_27bJson();
  json["text_config"]["rope_parameters"]["partial_rotary_factor"] = 3.0 / 256;
  ExpectError(json, "text_config.rope_parameters.partial_rotary_factor", "even, positive");

  json = Qwen3_5_27bJson();
  json["text_config"]["attn_output_gate"] = false;
  ExpectError(json, "text_config.attn_output_gate", "expected true");

  json = Qwen3_5_27bJson();
  json["text_config"]["num_experts"] = 256;
  ExpectError(json, "text_config.num_experts", "mixture of experts");

  json = Qwen3_5_27bJson();
  json["text_config"].erase("head_dim");
  ExpectError(json, "text_config.head_dim", "missing");

  json = Qwen3_5_27bJson();
  json.erase("text_config");
  ExpectError(json, "text_config", "missing");

  json = Qwen3_5_27bJson();
  json["tie_word_embeddings"] = true;
  ExpectError(json, "tie_word_embeddings", "contradicts text_config.tie_word_embeddings");

  json = CausalLmJson();
  json["model_type"] = "qwen3_next";
  ExpectError(json, "model_type", "\"qwen3_5_text\"");
}

TEST(Qwen3_5ConfigTest, RoundTripsThroughItsJson) {
  for (const nlohmann::json& json : {Qwen3_5_27bJson(), CausalLmJson()}) ExpectRoundTrips(json);
}

// The named shapes (make-tiny --shape, the benchmarks) are the published configs: 27B's equals
// the config above as read, and 4B's and 9B's sizes are their config.json's.
TEST(Qwen3_5ConfigTest, NamedShapesAreThePublishedConfigs) {
  const Result<DecoderConfig> published = Parse(Qwen3_5_27bJson());
  ASSERT_TRUE(published.ok()) << published.status().message();
  EXPECT_EQ(*NamedQwen3Config("qwen3.5-27b"), *published);
  for (const auto& [name, hidden, intermediate, tied] :
       {std::tuple{"qwen3.5-4b", 2560, 9216, true}, std::tuple{"qwen3.5-9b", 4096, 12288, false}}) {
    const std::optional<DecoderConfig> shape = NamedQwen3Config(name);
    ASSERT_TRUE(shape.has_value()) << name;
    EXPECT_EQ(shape->hidden_size, hidden) << name;
    EXPECT_EQ(shape->intermediate_size, intermediate) << name;
    EXPECT_EQ(shape->tie_word_embeddings, tied) << name;
    EXPECT_EQ(shape->num_hidden_layers, 32) << name;
    EXPECT_EQ(shape->num_attention_heads, 16) << name;
    EXPECT_EQ(shape->hybrid.linear.value_heads, 32) << name;
    EXPECT_EQ(shape->hybrid.linear.key_heads, 16) << name;
    // Every other field is the 27B's.
    DecoderConfig same = *published;
    same.hidden_size = hidden;
    same.intermediate_size = intermediate;
    same.tie_word_embeddings = tied;
    same.num_hidden_layers = 32;
    same.num_attention_heads = 16;
    same.hybrid.linear.value_heads = 32;
    same.hybrid.layer_types.resize(32);
    EXPECT_EQ(*shape, same) << name;
    const Result<DecoderConfig> again =
        ParseDecoderConfig(DecoderConfigToJson(*shape), std::string(name));
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(*again, *shape) << name;
  }
}

// A shape's first layers keep its spacing of full-attention layers (make-tiny --shape --layers).
TEST(Qwen3_5ConfigTest, ShapeWithLayersKeepsTheSpacing) {
  const DecoderConfig five = ShapeWithLayers(*NamedQwen3Config("qwen3.5-4b"), 5);
  EXPECT_EQ(five.num_hidden_layers, 5);
  EXPECT_EQ(five.hybrid.layer_types,
            (std::vector<LayerKind>{LayerKind::kLinearAttention, LayerKind::kLinearAttention,
                                    LayerKind::kLinearAttention, LayerKind::kFullAttention,
                                    LayerKind::kLinearAttention}));
  EXPECT_TRUE(ParseDecoderConfig(DecoderConfigToJson(five), "five").ok());
  const DecoderConfig dense = ShapeWithLayers(*NamedQwen3Config("qwen3-8b"), 3);
  EXPECT_EQ(dense.num_hidden_layers, 3);
  EXPECT_TRUE(dense.hybrid.layer_types.empty());
}

}  // namespace
}  // namespace dscale
