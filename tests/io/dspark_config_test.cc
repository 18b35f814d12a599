// DeepSpec's DSpark drafter config (Qwen3DSparkModel): the layout read by `architectures`, its
// block rule (B rows drafted, W = B + 1 verified), its heads, and every refusal naming the field.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "io/dflash_config.h"
#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

// Qwen3-8B: 36 layers.
DecoderConfig DSparkTarget() { return *NamedQwen3Config("qwen3-8b"); }

// DeepSpec's dspark_qwen3_8b config as build_draft_config writes it (a copy of the target's
// config with the drafting fields at the top level).
nlohmann::json DSparkJson() {
  return {{"architectures", {"Qwen3DSparkModel"}},
          {"model_type", "qwen3"},
          {"block_size", 7},
          {"mask_token_id", 151669},
          {"target_layer_ids", {1, 9, 17, 25, 33}},
          {"num_target_layers", 36},
          {"num_anchors", 512},
          {"markov_rank", 256},
          {"markov_head_type", "vanilla"},
          {"enable_confidence_head", true},
          {"confidence_head_with_markov", true},
          {"layer_types", std::vector<std::string>(5, "full_attention")},
          {"use_sliding_window", false},
          {"sliding_window", nullptr},
          {"hidden_size", 4096},
          {"intermediate_size", 12288},
          {"num_hidden_layers", 5},
          {"num_attention_heads", 32},
          {"num_key_value_heads", 8},
          {"head_dim", 128},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000},
          {"max_position_embeddings", 40960},
          {"tie_word_embeddings", false},
          {"vocab_size", 151936}};
}

Result<DFlashConfig> ParseDSpark(const nlohmann::json& j) {
  return ParseDFlashConfig(j.dump(), "dspark/config.json", DSparkTarget());
}

std::string DSparkError(const nlohmann::json& j) {
  const Result<DFlashConfig> c = ParseDSpark(j);
  EXPECT_FALSE(c.ok()) << j.dump();
  return c.ok() ? "" : c.status().message();
}

// `needle` is in the error `j` gets.
void ExpectDSparkError(const nlohmann::json& j, const std::string& needle) {
  const std::string message = DSparkError(j);
  EXPECT_NE(message.find(needle), std::string::npos) << message;
  EXPECT_NE(message.find("dspark/config.json"), std::string::npos) << message;
}

TEST(DSparkConfigTest, ReadsDeepSpecsLayout) {
  const DFlashConfig c = ParseDSpark(DSparkJson()).value();
  ASSERT_TRUE(c.is_dspark());
  EXPECT_EQ(c.block_size, 7);
  EXPECT_EQ(c.mask_token_id, 151669);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int32_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(c.num_target_layers, 36);
  EXPECT_TRUE(c.IsPlainLayout());
  EXPECT_EQ(*c.dspark, (DSparkHeadConfig{.markov_rank = 256,
                                         .markov_head_type = MarkovHeadType::kVanilla,
                                         .confidence_head = true,
                                         .confidence_with_markov = true}));
  EXPECT_FALSE(c.domino.has_value());
}

// B = 7 rows drafted, all of them predicting: 7 candidates, verified with the anchor in W = 8.
TEST(DSparkConfigTest, BlockRuleIsBRowsAllPredictingAndWIsBPlusOne) {
  const DraftBlock dspark = ParseDSpark(DSparkJson()).value().Block();
  EXPECT_EQ(dspark.input_rows, 7);
  EXPECT_EQ(dspark.first_prediction_row, 0);
  EXPECT_EQ(dspark.candidates(), 7);
  EXPECT_EQ(dspark.verify_rows(), 8);
  DFlashConfig dflash;
  dflash.block_size = 16;
  EXPECT_EQ(dflash.Block().input_rows, 16);
  EXPECT_EQ(dflash.Block().first_prediction_row, 1);
  EXPECT_EQ(dflash.Block().candidates(), 15);
  EXPECT_EQ(dflash.Block().verify_rows(), 16);
}

TEST(DSparkConfigTest, ReadsEachHeadVariant) {
  nlohmann::json j = DSparkJson();
  j["markov_head_type"] = "Gated";  // DeepSpec lower-cases the name
  j["enable_confidence_head"] = false;
  j.erase("confidence_head_with_markov");
  DSparkHeadConfig heads = *ParseDSpark(j).value().dspark;
  EXPECT_EQ(heads.markov_head_type, MarkovHeadType::kGated);
  EXPECT_FALSE(heads.confidence_head);

  j["markov_head_type"] = "rnn";
  j["enable_confidence_head"] = true;
  j["confidence_head_with_markov"] = false;
  heads = *ParseDSpark(j).value().dspark;
  EXPECT_EQ(heads.markov_head_type, MarkovHeadType::kRnn);
  EXPECT_TRUE(heads.confidence_head);
  EXPECT_FALSE(heads.confidence_with_markov);

  // Rank 0: no Markov head; its type is then not read (DeepSpec's build_markov_head returns
  // before it), as DeepSpec's DFlash baseline configs have it.
  j["markov_rank"] = 0;
  j["markov_head_type"] = "anything";
  heads = *ParseDSpark(j).value().dspark;
  EXPECT_FALSE(heads.has_markov_head());
}

TEST(DSparkConfigTest, RoundTripsThroughJson) {
  for (const char* type : {"vanilla", "gated", "rnn"}) {
    nlohmann::json j = DSparkJson();
    j["markov_head_type"] = type;
    const DFlashConfig c = ParseDSpark(j).value();
    const DFlashConfig back =
        ParseDFlashConfig(DFlashConfigToJson(c), "config.json", DSparkTarget()).value();
    EXPECT_EQ(back.dspark, c.dspark) << type;
    EXPECT_EQ(back.block_size, c.block_size);
    EXPECT_EQ(back.target_layer_ids, c.target_layer_ids);
    EXPECT_EQ(back.mask_token_id, c.mask_token_id);
    const nlohmann::json written = nlohmann::json::parse(DFlashConfigToJson(c));
    EXPECT_EQ(written["architectures"], nlohmann::json::array({"Qwen3DSparkModel"}));
    EXPECT_FALSE(written.contains("dflash_config"));
  }
}

TEST(DSparkConfigTest, UnknownArchitecturesAreRefusedNamingTheSupportedOnes) {
  nlohmann::json j = DSparkJson();
  j["architectures"] = {"EagleDraftModel"};
  ExpectDSparkError(j,
                    "field \"architectures\": drafter architecture \"EagleDraftModel\" is not "
                    "supported (supported: \"DFlashDraftModel\", \"Qwen3DSparkModel\")");
  j["architectures"] = "Qwen3DSparkModel";
  ExpectDSparkError(j, "field \"architectures\": expected a list of architecture names");
  // Without `architectures` a config is z-lab's DFlash layout, as before.
  j.erase("architectures");
  const Result<DFlashConfig> dflash = ParseDSpark(j);
  ASSERT_TRUE(dflash.ok()) << dflash.status().message();
  EXPECT_FALSE(dflash->is_dspark());
}

TEST(DSparkConfigTest, MissingRequiredFieldsAreNamed) {
  for (const char* field :
       {"block_size", "mask_token_id", "target_layer_ids", "markov_rank", "markov_head_type",
        "enable_confidence_head", "confidence_head_with_markov"}) {
    nlohmann::json j = DSparkJson();
    j.erase(field);
    ExpectDSparkError(j, std::string("field \"") + field + "\": missing");
  }
  // Those two are required only when their head is on.
  nlohmann::json j = DSparkJson();
  j["markov_rank"] = 0;
  j["enable_confidence_head"] = false;
  j.erase("markov_head_type");
  j.erase("confidence_head_with_markov");
  EXPECT_TRUE(ParseDSpark(j).ok());
}

TEST(DSparkConfigTest, BadHeadFieldsAreNamed) {
  nlohmann::json j = DSparkJson();
  j["markov_head_type"] = "lstm";
  ExpectDSparkError(j,
                    "field \"markov_head_type\": expected \"vanilla\", \"gated\" or \"rnn\", got "
                    "\"lstm\"");
  j = DSparkJson();
  j["markov_rank"] = -1;
  ExpectDSparkError(j, "field \"markov_rank\": expected an integer");
  j = DSparkJson();
  j["enable_confidence_head"] = 1;
  ExpectDSparkError(j, "field \"enable_confidence_head\"");
  j = DSparkJson();
  j["markov_rank"] = 0;
  ExpectDSparkError(j, "field \"confidence_head_with_markov\": true needs a Markov head");
}

TEST(DSparkConfigTest, BlockSizesOutsideOneTo63AreRefused) {
  for (const int block : {0, 64}) {
    nlohmann::json j = DSparkJson();
    j["block_size"] = block;
    ExpectDSparkError(j, "field \"block_size\": expected an integer in [1, 63]");
  }
  nlohmann::json j = DSparkJson();
  j["block_size"] = 63;  // W = 64
  EXPECT_EQ(ParseDSpark(j).value().Block().verify_rows(), 64);
  j["block_size"] = 1;  // one proposal
  EXPECT_EQ(ParseDSpark(j).value().Block().candidates(), 1);
}

TEST(DSparkConfigTest, WhatADSparkLayerIsNotIsRefused) {
  nlohmann::json j = DSparkJson();
  j["dflash_config"] = {{"mask_token_id", 151669}};
  ExpectDSparkError(j, "field \"dflash_config\": not part of a Qwen3DSparkModel config");
  j = DSparkJson();
  j["domino_config"] = {{"head_file", "h.safetensors"}};
  ExpectDSparkError(j, "field \"domino_config\": not part of a Qwen3DSparkModel config");
  j = DSparkJson();
  j["layer_types"][3] = "sliding_attention";
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  ExpectDSparkError(j, "field \"layer_types[3]\": draft layer 3 is sliding-window");
  j = DSparkJson();
  j["input_embedding_scale"] = 2.0;
  ExpectDSparkError(j, "field \"input_embedding_scale\"");
  // DeepSpec drafts non-causally whatever `is_causal` says.
  j = DSparkJson();
  j["is_causal"] = true;
  EXPECT_TRUE(ParseDSpark(j).value().IsPlainLayout());
}

TEST(DSparkConfigTest, TargetMismatchesAreRefused) {
  nlohmann::json j = DSparkJson();
  j["target_layer_ids"] = {1, 35};  // the last layer: hidden_states[36] is final-normed
  ExpectDSparkError(j, "field \"target_layer_ids\": layer 35 is the target's last");
  j["target_layer_ids"] = {1, 36};
  ExpectDSparkError(j, "layer 36 is outside the target's 36 layers");
  j["target_layer_ids"] = {-1, 9};  // DeepSpec's embedding output: not captured by dscale
  ExpectDSparkError(j, "field \"target_layer_ids[0]\": expected an integer in [0, 2147483647]");
  j = DSparkJson();
  j["mask_token_id"] = 151936;
  ExpectDSparkError(j, "outside the target vocabulary");
  j = DSparkJson();
  j["num_target_layers"] = 28;
  ExpectDSparkError(j, "field \"num_target_layers\"");
}

}  // namespace
}  // namespace dscale
