#include "io/dflash_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

// Qwen3-8B: 36 layers.
Qwen3Config Target36() { return *NamedQwen3Config("qwen3-8b"); }

// The z-lab Qwen3-8B-DFlash-b16 config shape.
nlohmann::json DraftJson() {
  return {{"architectures", {"DFlashDraftModel"}},
          {"model_type", "qwen3"},
          {"block_size", 16},
          {"dflash_config", {{"mask_token_id", 151669}, {"target_layer_ids", {1, 9, 17, 25, 33}}}},
          {"num_target_layers", 36},
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

Result<DFlashConfig> Parse(const nlohmann::json& j) {
  return ParseDFlashConfig(j.dump(), "draft/config.json", Target36());
}

TEST(DFlashConfigTest, ParsesTheReleasedLayout) {
  const DFlashConfig c = Parse(DraftJson()).value();
  EXPECT_EQ(c.block_size, 16);
  EXPECT_EQ(c.mask_token_id, 151669);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int32_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(c.draft.num_hidden_layers, 5);
  EXPECT_EQ(c.draft.hidden_size, 4096);
}

TEST(DFlashConfigTest, DerivesLayerIdsByTheDocumentedRule) {
  EXPECT_EQ(DeriveTargetLayerIds(36, 5), (std::vector<int32_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(DeriveTargetLayerIds(36, 1), (std::vector<int32_t>{18}));
  EXPECT_EQ(DeriveTargetLayerIds(8, 2), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(DeriveTargetLayerIds(28, 3), (std::vector<int32_t>{1, 13, 25}));
  // 1 + 3.5 = 4.5 rounds half to even, to 4.
  EXPECT_EQ(DeriveTargetLayerIds(11, 3), (std::vector<int32_t>{1, 4, 8}));
  nlohmann::json j = DraftJson();
  j["dflash_config"].erase("target_layer_ids");
  EXPECT_EQ(Parse(j).value().target_layer_ids, (std::vector<int32_t>{1, 9, 17, 25, 33}));
}

TEST(DFlashConfigTest, AcceptsTopLevelAndNestedVariants) {
  nlohmann::json j = DraftJson();
  j.erase("dflash_config");
  j["mask_token_id"] = 151669;
  j["target_layer_ids"] = {2, 20};
  const DFlashConfig top = Parse(j).value();
  EXPECT_EQ(top.mask_token_id, 151669);
  EXPECT_EQ(top.target_layer_ids, (std::vector<int32_t>{2, 20}));

  j = DraftJson();
  j.erase("block_size");
  j["dflash_config"]["block_size"] = 8;
  EXPECT_EQ(Parse(j).value().block_size, 8);
}

TEST(DFlashConfigTest, InconsistentFieldsAreClearErrors) {
  auto error = [](nlohmann::json j) { return Parse(j).status().message(); };
  nlohmann::json j = DraftJson();
  j["dflash_config"]["mask_token_id"] = 151936;
  EXPECT_NE(error(j).find("mask_token_id"), std::string::npos) << error(j);
  EXPECT_NE(error(j).find("outside the target vocabulary"), std::string::npos);

  j = DraftJson();
  j["hidden_size"] = 2560;
  j["intermediate_size"] = 9728;
  EXPECT_NE(error(j).find("differs from the target's 4096"), std::string::npos) << error(j);

  j = DraftJson();
  j["vocab_size"] = 32000;  // a drafter of another model family
  EXPECT_NE(error(j).find("\"vocab_size\": drafter vocabulary of 32000 tokens differs from the "
                          "target's 151936"),
            std::string::npos)
      << error(j);

  j = DraftJson();
  j["dflash_config"]["target_layer_ids"] = {1, 36};
  EXPECT_NE(error(j).find("layer 36 is outside"), std::string::npos) << error(j);

  j = DraftJson();
  j["dflash_config"].erase("mask_token_id");
  EXPECT_NE(error(j).find("\"mask_token_id\": missing"), std::string::npos) << error(j);

  j = DraftJson();
  j["block_size"] = "16";
  EXPECT_NE(error(j).find("\"block_size\""), std::string::npos) << error(j);

  j = DraftJson();
  j["num_target_layers"] = 28;
  EXPECT_NE(error(j).find("num_target_layers"), std::string::npos) << error(j);
  EXPECT_NE(error(j).find("draft/config.json"), std::string::npos) << error(j);
}

TEST(DFlashConfigTest, RoundTripsThroughJson) {
  const DFlashConfig c = Parse(DraftJson()).value();
  const DFlashConfig back =
      ParseDFlashConfig(DFlashConfigToJson(c), "config.json", Target36()).value();
  EXPECT_EQ(back.target_layer_ids, c.target_layer_ids);
  EXPECT_EQ(back.mask_token_id, c.mask_token_id);
  EXPECT_EQ(back.block_size, c.block_size);
  EXPECT_EQ(back.draft.intermediate_size, c.draft.intermediate_size);
}

}  // namespace
}  // namespace dscale
