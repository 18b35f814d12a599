// The model-family seam's config reading: Llama 3.x configs, the family dispatch by
// `architectures` / `model_type`, and the llama3 rope_scaling fields.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/config_test_util.h"
#include "io/decoder_config.h"
#include "io/dflash_config.h"

namespace dscale {
namespace {

// Llama-3.1-8B-Instruct's config.json as published (head_dim absent: 4096 / 32 = 128).
nlohmann::json Llama31_8bJson() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": false,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": true,
    "vocab_size": 128256
  })");
}

using testing_io::ExpectError;
using testing_io::Parse;

TEST(LlamaConfigTest, ReadsLlama31_8b) {
  const Result<DecoderConfig> config = Parse(Llama31_8bJson());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->family, ModelFamily::kLlama);
  EXPECT_FALSE(config->qk_norm);
  EXPECT_EQ(config->vocab_size, 128256);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->head_dim, 128);  // implied by hidden_size / num_attention_heads
  EXPECT_EQ(config->rms_norm_eps, 1e-5);
  EXPECT_EQ(config->rope_theta, 500000.0);
  EXPECT_EQ(config->rope_scaling, (RopeScaling{.type = RopeScalingType::kLlama3,
                                               .factor = 8.0,
                                               .low_freq_factor = 1.0,
                                               .high_freq_factor = 4.0,
                                               .original_max_position_embeddings = 8192}));
  EXPECT_EQ(config->bos_token_ids, std::vector<int64_t>{128000});
  EXPECT_EQ(config->eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_EQ(config->rope().scaling, config->rope_scaling);
}

TEST(LlamaConfigTest, UnscaledAndTiedConfigsRead) {
  nlohmann::json json = Llama31_8bJson();
  json["rope_scaling"] = nullptr;
  json["tie_word_embeddings"] = true;
  json["head_dim"] = 64;  // given explicitly: kept, not derived
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->rope_scaling.type, RopeScalingType::kNone);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->head_dim, 64);
  // Older configs spell the kind `type`.
  json = Llama31_8bJson();
  json["rope_scaling"].erase("rope_type");
  json["rope_scaling"]["type"] = "llama3";
  EXPECT_TRUE(Parse(json).ok());
}

TEST(LlamaConfigTest, FamilyComesFromArchitecturesThenModelType) {
  nlohmann::json json = Llama31_8bJson();
  json.erase("architectures");
  const Result<DecoderConfig> by_type = Parse(json);
  ASSERT_TRUE(by_type.ok()) << by_type.status().message();
  EXPECT_EQ(by_type->family, ModelFamily::kLlama);
  // The architecture and the model type must agree.
  json = Llama31_8bJson();
  json["model_type"] = "qwen3";
  ExpectError(json, "model_type", "expected \"llama\", got \"qwen3\"");
}

TEST(LlamaConfigTest, UnknownArchitectureIsRefusedByName) {
  nlohmann::json json = Llama31_8bJson();
  json["architectures"] = {"MistralForCausalLM"};
  ExpectError(json, "architectures",
              "architecture \"MistralForCausalLM\" is not supported (supported: "
              "\"Qwen3ForCausalLM\", \"LlamaForCausalLM\", \"Qwen3MoeForCausalLM\", "
              "\"Qwen3_5ForConditionalGeneration\", \"Qwen3_5ForCausalLM\", "
              "\"Qwen3_5MoeForConditionalGeneration\", \"Qwen3_5MoeForCausalLM\")");
  json.erase("architectures");
  json["model_type"] = "gemma3";
  ExpectError(json, "model_type", "model type \"gemma3\" is not supported");
  json = Llama31_8bJson();
  json["architectures"] = "LlamaForCausalLM";
  ExpectError(json, "architectures", "expected a list of architecture names");
}

TEST(LlamaConfigTest, BadRopeScalingIsRefusedNamingTheField) {
  const auto with = [](const char* field, const nlohmann::json& value) {
    nlohmann::json json = Llama31_8bJson();
    json["rope_scaling"][field] = value;
    return json;
  };
  ExpectError(with("rope_type", "yarn"), "rope_scaling.rope_type",
              "only \"llama3\" scaling is supported, got \"yarn\"");
  ExpectError(with("factor", 0.5), "rope_scaling.factor", "expected at least 1, got 0.5");
  ExpectError(with("factor", "8"), "rope_scaling.factor", "expected a positive number");
  ExpectError(with("high_freq_factor", 1.0), "rope_scaling.high_freq_factor",
              "expected more than low_freq_factor 1.0, got 1.0");
  ExpectError(with("original_max_position_embeddings", 262144),
              "rope_scaling.original_max_position_embeddings",
              "262144 is past max_position_embeddings 131072");
  nlohmann::json json = Llama31_8bJson();
  json["rope_scaling"].erase("low_freq_factor");
  ExpectError(json, "rope_scaling.low_freq_factor", "missing");
  json["rope_scaling"] = 8;
  ExpectError(json, "rope_scaling", "expected an object or null, got 8");
}

TEST(LlamaConfigTest, UnsupportedVariantsAreRefusedByName) {
  const std::pair<const char*, nlohmann::json> cases[] = {
      {"mlp_bias", true},     {"attention_bias", true},   {"pretraining_tp", 2},
      {"hidden_act", "gelu"}, {"num_key_value_heads", 5},
  };
  for (const auto& [field, value] : cases) {
    nlohmann::json json = Llama31_8bJson();
    json[field] = value;
    ExpectError(json, field, "");
  }
  nlohmann::json json = Llama31_8bJson();
  json["hidden_size"] = 4064;  // 4064 / 32 = 127: an odd implied head_dim
  ExpectError(json, "head_dim", "127 is odd");
}

TEST(LlamaConfigTest, JsonRoundTrips) {
  const Result<DecoderConfig> config = Parse(Llama31_8bJson());
  ASSERT_TRUE(config.ok());
  const std::string text = DecoderConfigToJson(*config);
  const nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_EQ(json["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(json["rope_scaling"]["rope_type"], "llama3");
  const Result<DecoderConfig> again = ParseDecoderConfig(text, "");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, *config);
}

TEST(LlamaConfigTest, FamilyNames) {
  EXPECT_EQ(ModelFamilyName(ModelFamily::kLlama), "llama");
  EXPECT_EQ(ModelFamilyName(ModelFamily::kQwen3), "qwen3");
  EXPECT_EQ(ModelFamilyFromName("llama"), ModelFamily::kLlama);
  EXPECT_EQ(ModelFamilyFromName("mistral"), std::nullopt);
}

// generation_config.json's EOS list joins config.json's (the base Llama 3.1 config names only
// <|end_of_text|>; its generation config adds <|eom_id|> and <|eot_id|>).
TEST(LlamaConfigTest, GenerationConfigAddsItsEosIds) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dscale_llama_config_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json config = Llama31_8bJson();
  config["eos_token_id"] = 128001;
  std::ofstream(dir / "config.json") << config.dump();
  const Result<DecoderConfig> alone = LoadCheckpointConfig(dir.string());
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(alone->eos_token_ids, std::vector<int64_t>{128001});
  std::ofstream(dir / "generation_config.json")
      << R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]})";
  const Result<DecoderConfig> merged = LoadCheckpointConfig(dir.string());
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [128001, 130000]})";
  const Result<DecoderConfig> bad = LoadCheckpointConfig(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("generation_config.json: field \"eos_token_id\": token "
                                        "id 130000 is outside the vocabulary"),
            std::string::npos)
      << bad.status().message();
  std::filesystem::remove_all(dir);
}

// A DFlash drafter of a Llama 3.1 target: Qwen3 layers, its own config's llama3 RoPE.
TEST(LlamaConfigTest, DrafterReadsItsOwnRopeScaling) {
  const Result<DecoderConfig> target = Parse(Llama31_8bJson());
  ASSERT_TRUE(target.ok());
  nlohmann::json drafter = Llama31_8bJson();
  drafter["architectures"] = {"DFlashDraftModel"};
  drafter["model_type"] = "qwen3";
  drafter["num_hidden_layers"] = 5;
  drafter["head_dim"] = 128;
  drafter["block_size"] = 16;
  drafter["num_target_layers"] = 32;
  drafter["dflash_config"] = {{"mask_token_id", 128002}, {"target_layer_ids", {1, 8, 15, 22, 29}}};
  const Result<DFlashConfig> config = ParseDFlashConfig(drafter.dump(), "d/config.json", *target);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->draft.family, ModelFamily::kQwen3);
  EXPECT_TRUE(config->draft.qk_norm);
  EXPECT_EQ(config->draft.rope_scaling, target->rope_scaling);
  // Written back, the scaling is kept.
  const Result<DFlashConfig> again =
      ParseDFlashConfig(DFlashConfigToJson(*config), "d/config.json", *target);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->draft, config->draft);
  drafter["rope_scaling"]["rope_type"] = "dynamic";
  const Result<DFlashConfig> bad = ParseDFlashConfig(drafter.dump(), "d/config.json", *target);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("d/config.json: field \"rope_scaling.rope_type\""),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace dscale
