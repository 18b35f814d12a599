#include "io/dflash_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/qwen3_shapes.h"

namespace dscale {
namespace {

// Qwen3-8B: 36 layers.
DecoderConfig Target36() { return *NamedQwen3Config("qwen3-8b"); }

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

// `j` written out with the value at `path` ("a" or "a.b") replaced by `raw`, as written.
std::string WithRaw(nlohmann::json j, const std::string& path, const std::string& raw) {
  const size_t dot = path.find('.');
  if (dot == std::string::npos) {
    j[path] = "@raw@";
  } else {
    j[path.substr(0, dot)][path.substr(dot + 1)] = "@raw@";
  }
  std::string text = j.dump();
  text.replace(text.find("\"@raw@\""), 7, raw);
  return text;
}

// Every integer of the drafter's config is checked as the JSON number it is, before it is
// narrowed: a layer id of 2^31 + k is an error rather than an abort, 2^32 + 1 is not layer 1.
TEST(DFlashConfigTest, IntegersAreCheckedBeforeTheyAreNarrowed) {
  const auto error = [](const std::string& text) {
    const Result<DFlashConfig> c = ParseDFlashConfig(text, "draft/config.json", Target36());
    return c.ok() ? std::string() : c.status().message();
  };
  const std::pair<std::string, std::string> cases[] = {
      {"[1, 2147483648]",
       "dflash_config.target_layer_ids[1]\": expected an integer in [0, "
       "2147483647], got 2147483648"},
      {"[2147483651]", "got 2147483651"},
      {"[4294967297]",
       "dflash_config.target_layer_ids[0]\": expected an integer in [0, "
       "2147483647], got 4294967297"},
      {"[1, 18446744073709551615]", "got 18446744073709551615"},
      {"[18446744073709551617]", "got 1.8446744073709552e+19"},
      {"[9, -1]", "target_layer_ids[1]\": expected an integer in [0, 2147483647], got -1"},
      {"[9, 1.0]", "got 1.0"},
      {"[\"1\"]", "got \"1\""},
      {"[null]", "got null"},
      {"[[1]]", "got an array of 1 element"},
      {"5", "expected a non-empty list of layer ids, got 5"},
      {"[]", "expected a non-empty list of layer ids, got an empty array"},
  };
  for (const auto& [raw, expected] : cases) {
    const std::string message = error(WithRaw(DraftJson(), "dflash_config.target_layer_ids", raw));
    EXPECT_NE(message.find("draft/config.json: field \"dflash_config.target_layer_ids"),
              std::string::npos)
        << raw << ": " << message;
    EXPECT_NE(message.find(expected), std::string::npos) << raw << ": " << message;
  }
  const std::pair<std::string, std::string> fields[] = {
      {"block_size", "4294967312"},
      {"block_size", "16.0"},
      {"block_size", "-16"},
      {"block_size", "1"},
      {"block_size", "65"},
      {"dflash_config.mask_token_id", "4294967297"},
      {"dflash_config.mask_token_id", "-1"},
      {"dflash_config.mask_token_id", "151669.0"},
      {"dflash_config.mask_token_id", "18446744073709551615"},
      {"num_target_layers", "4294967332"},
      {"num_target_layers", "36.0"},
      {"num_target_layers", "0"},
      {"num_target_layers", "\"36\""},
  };
  for (const auto& [field, raw] : fields) {
    const std::string message = error(WithRaw(DraftJson(), field, raw));
    EXPECT_NE(message.find("draft/config.json: field \"" + field + "\": expected an integer"),
              std::string::npos)
        << field << " = " << raw << ": " << message;
  }
  // The same fields at the top level are named as such.
  nlohmann::json top = DraftJson();
  top.erase("dflash_config");
  top["mask_token_id"] = 7;
  const std::string message = error(WithRaw(top, "target_layer_ids", "[4294967297]"));
  EXPECT_NE(message.find("field \"target_layer_ids[0]\": expected an integer in [0, 2147483647]"),
            std::string::npos)
      << message;
}

TEST(DFlashConfigTest, WrongShapesAndRepeatedKeysAreRefused) {
  const auto error = [](const std::string& text) {
    const Result<DFlashConfig> c = ParseDFlashConfig(text, "draft/config.json", Target36());
    return c.ok() ? std::string() : c.status().message();
  };
  for (const std::string raw : {"5", "[1, 2]", "\"x\"", "true"}) {
    EXPECT_NE(error(WithRaw(DraftJson(), "dflash_config", raw))
                  .find("field \"dflash_config\": expected an object"),
              std::string::npos)
        << raw;
  }
  std::string text = DraftJson().dump();
  text.replace(text.find("\"mask_token_id\""), 15, R"("mask_token_id":3,"mask_token_id")");
  EXPECT_EQ(error(text), "draft/config.json: duplicate key \"mask_token_id\" in \"dflash_config\"");
  text = DraftJson().dump();
  text.replace(0, 1, R"({"block_size": 8,)");
  EXPECT_EQ(error(text), "draft/config.json: duplicate key \"block_size\"");
  // A target too shallow for the derived layer ids: refused, not a negative layer.
  nlohmann::json j = DraftJson();
  j["dflash_config"].erase("target_layer_ids");
  j.erase("num_target_layers");
  DecoderConfig shallow = Target36();
  shallow.num_hidden_layers = 2;
  const Result<DFlashConfig> c = ParseDFlashConfig(j.dump(), "draft/config.json", shallow);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("target_layer_ids"), std::string::npos)
      << c.status().message();
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

// Newer drafters' per-layer attention and embedding scale, read as HF and z-lab read them.
TEST(DFlashConfigTest, ReadsLayerTypesWindowsCausalityAndEmbeddingScale) {
  nlohmann::json j = DraftJson();
  // The released layout: every layer full, non-causal, unscaled.
  j["layer_types"] = std::vector<std::string>(5, "full_attention");
  j["sliding_window"] = nullptr;
  j["use_sliding_window"] = false;
  DFlashConfig c = Parse(j).value();
  EXPECT_TRUE(c.IsPlainLayout());
  EXPECT_EQ(c.LayerAttention(4), DraftAttention{});

  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                      "full_attention"};
  j["sliding_window"] = 2048;
  j["use_sliding_window"] = true;
  j["dflash_config"]["input_embedding_scale"] = 0.25;
  c = Parse(j).value();
  EXPECT_FALSE(c.IsPlainLayout());
  EXPECT_EQ(c.LayerAttention(0), (DraftAttention{.causal = true, .window = 2048}));
  EXPECT_EQ(c.LayerAttention(1), DraftAttention{});
  EXPECT_EQ(c.input_embedding_scale, 0.25);
  // is_causal overrides every layer's causality; the window stays the sliding layers'.
  j["is_causal"] = false;
  c = Parse(j).value();
  EXPECT_EQ(c.LayerAttention(2), (DraftAttention{.causal = false, .window = 2048}));
  j["is_causal"] = true;
  c = Parse(j).value();
  EXPECT_EQ(c.LayerAttention(1), (DraftAttention{.causal = true, .window = 0}));
  // As HF reads it, the window is in force only with use_sliding_window.
  j.erase("is_causal");
  j["use_sliding_window"] = false;
  c = Parse(j).value();
  EXPECT_EQ(c.LayerAttention(0), (DraftAttention{.causal = true, .window = 0}));
  // Without layer_types, layers from max_window_layers on slide.
  j.erase("layer_types");
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 3;
  c = Parse(j).value();
  EXPECT_EQ(c.LayerAttention(2), DraftAttention{});
  EXPECT_EQ(c.LayerAttention(3), (DraftAttention{.causal = true, .window = 2048}));

  // The JSON it writes reads back to the same layout.
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                      "sliding_attention"};
  j["is_causal"] = false;
  c = Parse(j).value();
  const DFlashConfig back =
      ParseDFlashConfig(DFlashConfigToJson(c), "back/config.json", Target36()).value();
  for (int64_t layer = 0; layer < 5; ++layer) {
    EXPECT_EQ(back.LayerAttention(layer), c.LayerAttention(layer)) << "layer " << layer;
  }
  EXPECT_EQ(back.input_embedding_scale, 0.25);
}

// What it cannot read is refused naming the field.
TEST(DFlashConfigTest, RefusesUnknownLayerTypesAndBadScalesByName) {
  const auto refused = [](const nlohmann::json& j, const std::string& field) {
    const Result<DFlashConfig> bad = Parse(j);
    ASSERT_FALSE(bad.ok()) << field;
    EXPECT_NE(bad.status().message().find(field), std::string::npos) << bad.status().message();
  };
  nlohmann::json j = DraftJson();
  j["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention",
                      "full_attention"};
  refused(j, "layer_types[1]");
  j["layer_types"] = {"full_attention"};
  refused(j, "layer_types");
  j.erase("layer_types");
  j["sliding_window"] = 0;
  refused(j, "sliding_window");
  j.erase("sliding_window");
  j["is_causal"] = "yes";
  refused(j, "is_causal");
  j.erase("is_causal");
  j["dflash_config"]["input_embedding_scale"] = -2.0;
  refused(j, "dflash_config.input_embedding_scale");
  j["dflash_config"]["input_embedding_scale"] = "1";
  refused(j, "dflash_config.input_embedding_scale");
}

}  // namespace
}  // namespace dscale
