#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/config_test_util.h"
#include "io/decoder_config.h"
#include "io/io_test_util.h"

namespace dscale {
namespace {

using testing_io::ReadBytes;

const std::string kConfigDir = std::string(DSCALE_TEST_DATA_DIR) + "/configs/qwen3-8b";
const std::string kConfigPath = kConfigDir + "/config.json";

nlohmann::json Qwen3_8bJson() { return nlohmann::json::parse(ReadBytes(kConfigPath)); }

using testing_io::ExpectError;
using testing_io::Parse;

TEST(Qwen3ConfigTest, LoadsQwen3_8b) {
  const Result<DecoderConfig> config = LoadDecoderConfig(kConfigPath);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->vocab_size, 151936);
  EXPECT_EQ(config->hidden_size, 4096);
  EXPECT_EQ(config->intermediate_size, 12288);
  EXPECT_EQ(config->num_hidden_layers, 36);
  EXPECT_EQ(config->num_attention_heads, 32);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->head_dim, 128);
  EXPECT_EQ(config->rms_norm_eps, 1e-6);
  EXPECT_EQ(config->rope_theta, 1e6);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_EQ(config->max_position_embeddings, 40960);
  EXPECT_EQ(config->bos_token_ids, std::vector<int64_t>{151643});
  EXPECT_EQ(config->eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_EQ(config->q_dim(), 4096);
  EXPECT_EQ(config->kv_dim(), 1024);
}

// generation_config.json stops on two ids; the same list is accepted in config.json.
TEST(Qwen3ConfigTest, EosFromGenerationConfigList) {
  const nlohmann::json generation =
      nlohmann::json::parse(ReadBytes(kConfigDir + "/generation_config.json"));
  nlohmann::json json = Qwen3_8bJson();
  json["eos_token_id"] = generation["eos_token_id"];
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->eos_token_ids, (std::vector<int64_t>{151645, 151643}));
}

TEST(Qwen3ConfigTest, TokenIdsAsIntListOrNull) {
  nlohmann::json json = Qwen3_8bJson();
  json["eos_token_id"] = 7;
  json["bos_token_id"] = nullptr;
  Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->eos_token_ids, std::vector<int64_t>{7});
  EXPECT_TRUE(config->bos_token_ids.empty());

  json["eos_token_id"] = {1, 2, 3};
  json.erase("bos_token_id");
  config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->eos_token_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(config->bos_token_ids.empty());

  json["eos_token_id"] = nlohmann::json::array();
  config = Parse(json);
  ASSERT_TRUE(config.ok());
  EXPECT_TRUE(config->eos_token_ids.empty());
}

TEST(Qwen3ConfigTest, OptionalFieldsDefault) {
  nlohmann::json json = Qwen3_8bJson();
  json.erase("head_dim");
  json.erase("tie_word_embeddings");
  Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->head_dim, 4096 / 32);
  EXPECT_FALSE(config->tie_word_embeddings);

  json["tie_word_embeddings"] = true;
  json["head_dim"] = 64;  // Qwen3 decouples head_dim from hidden_size / heads
  config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->q_dim(), 2048);
}

TEST(Qwen3ConfigTest, MissingRequiredFields) {
  for (const char* field : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
                            "rope_theta", "max_position_embeddings"}) {
    nlohmann::json json = Qwen3_8bJson();
    json.erase(field);
    ExpectError(json, field, "missing");
    json[field] = nullptr;
    ExpectError(json, field, "missing");
  }
}

TEST(Qwen3ConfigTest, WrongTypes) {
  for (const char* field :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"}) {
    for (const nlohmann::json& bad :
         {nlohmann::json("8"), nlohmann::json(8.5), nlohmann::json(8.0), nlohmann::json(true),
          nlohmann::json::array({8}), nlohmann::json::object()}) {
      nlohmann::json json = Qwen3_8bJson();
      json[field] = bad;
      ExpectError(json, field, "expected a positive integer, got ");
    }
  }
  nlohmann::json json = Qwen3_8bJson();
  json["num_key_value_heads"] = "8";
  ExpectError(json, "num_key_value_heads", "expected a positive integer, got \"8\"");

  for (const char* field : {"rms_norm_eps", "rope_theta"}) {
    for (const nlohmann::json& bad :
         {nlohmann::json("1e-6"), nlohmann::json(false), nlohmann::json::array()}) {
      json = Qwen3_8bJson();
      json[field] = bad;
      ExpectError(json, field, "expected a positive number, got ");
    }
  }
  json = Qwen3_8bJson();
  json["tie_word_embeddings"] = "false";
  ExpectError(json, "tie_word_embeddings", "expected true or false, got \"false\"");
  json = Qwen3_8bJson();
  json["eos_token_id"] = "151645";
  ExpectError(json, "eos_token_id", "expected a token id, a list of token ids or null");
  json["eos_token_id"] = {151645, "x"};
  ExpectError(json, "eos_token_id", "holding \"x\"");
  json = Qwen3_8bJson();
  json["bos_token_id"] = 3.5;
  ExpectError(json, "bos_token_id", "got 3.5");
}

TEST(Qwen3ConfigTest, OutOfRangeValues) {
  for (const char* field :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"}) {
    for (const int64_t bad : {int64_t{0}, int64_t{-4}}) {
      nlohmann::json json = Qwen3_8bJson();
      json[field] = bad;
      ExpectError(json, field, "expected a positive integer, got " + std::to_string(bad));
    }
    nlohmann::json json = Qwen3_8bJson();
    json[field] = int64_t{1} << 40;
    ExpectError(json, field, "too large");
  }
  for (const char* field : {"rms_norm_eps", "rope_theta"}) {
    for (const double bad : {0.0, -1e-6}) {
      nlohmann::json json = Qwen3_8bJson();
      json[field] = bad;
      ExpectError(json, field, "expected a positive number");
    }
  }
}

// `json` with `field` set to `raw`, written as is (numbers nlohmann would not produce itself).
std::string WithRawField(nlohmann::json json, const std::string& field, const std::string& raw) {
  json[field] = "@raw@";
  std::string text = json.dump();
  text.replace(text.find("\"@raw@\""), 7, raw);
  return text;
}

// Every integer is checked as the JSON number it is: nothing past 32 or 64 bits is wrapped into
// range, and integral floats are not integers.
TEST(Qwen3ConfigTest, NumbersPastTheirRangeAreNeverWrapped) {
  for (const char* field :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings"}) {
    for (const std::string raw :
         {"2147483649", "4294967297", "9223372036854775807", "9223372036854775808",
          "18446744073709551615", "18446744073709551617", "4096.0", "1e3", "-0"}) {
      const Result<DecoderConfig> config =
          ParseDecoderConfig(WithRawField(Qwen3_8bJson(), field, raw), "some/dir/config.json");
      ASSERT_FALSE(config.ok()) << field << " = " << raw;
      EXPECT_EQ(config.status().message().rfind(
                    "some/dir/config.json: field \"" + std::string(field) + "\": ", 0),
                0u)
          << config.status().message();
    }
  }
  for (const char* field : {"bos_token_id", "eos_token_id"}) {
    for (const std::string raw : {"4294967297", "18446744073709551615", "18446744073709551617",
                                  "[151645, 4294967297]", "151645.0", "[1e2]"}) {
      const Result<DecoderConfig> config =
          ParseDecoderConfig(WithRawField(Qwen3_8bJson(), field, raw), "c.json");
      ASSERT_FALSE(config.ok()) << field << " = " << raw;
      EXPECT_NE(config.status().message().find("c.json: field \"" + std::string(field) + "\""),
                std::string::npos)
          << config.status().message();
    }
  }
  for (const char* field : {"rms_norm_eps", "rope_theta"}) {
    for (const std::string raw : {"1e400", "-1e400", "true"}) {
      EXPECT_FALSE(ParseDecoderConfig(WithRawField(Qwen3_8bJson(), field, raw), "c.json").ok())
          << field << " = " << raw;
    }
  }
}

// A config that names a field twice is refused (a JSON object would keep one of them silently).
TEST(Qwen3ConfigTest, RepeatedKeysAreRefused) {
  const std::string text = Qwen3_8bJson().dump();
  for (const std::string extra : {R"("vocab_size": 151936)", R"("num_hidden_layers": 4)",
                                  R"("eos_token_id": 1)", R"("model_type": "qwen3")"}) {
    const std::string doubled = "{" + extra + "," + text.substr(1);
    const Result<DecoderConfig> config = ParseDecoderConfig(doubled, "m/config.json");
    ASSERT_FALSE(config.ok()) << extra;
    EXPECT_EQ(config.status().code(), StatusCode::kDataLoss);
    const std::string key = extra.substr(1, extra.find('"', 1) - 1);
    EXPECT_EQ(config.status().message(), "m/config.json: duplicate key \"" + key + "\"");
  }
  nlohmann::json nested = Qwen3_8bJson();
  nested["rope_scaling"] = nullptr;
  std::string text2 = nested.dump();
  text2.replace(text2.find("\"rope_scaling\":null"), 19,
                R"("rope_scaling":{"factor":1,"factor":2})");
  EXPECT_EQ(ParseDecoderConfig(text2, "m/config.json").status().message(),
            "m/config.json: duplicate key \"factor\" in \"rope_scaling\"");
}

TEST(Qwen3ConfigTest, InconsistentValues) {
  nlohmann::json json = Qwen3_8bJson();
  json["num_key_value_heads"] = 5;
  ExpectError(json, "num_key_value_heads", "5 does not divide num_attention_heads 32");
  json = Qwen3_8bJson();
  json["num_key_value_heads"] = 64;
  ExpectError(json, "num_key_value_heads", "64 does not divide num_attention_heads 32");

  json = Qwen3_8bJson();
  json["head_dim"] = 127;
  ExpectError(json, "head_dim", "127 is odd");
  json.erase("head_dim");
  json["hidden_size"] = 4100;
  ExpectError(json, "head_dim", "hidden_size 4100 is not divisible by num_attention_heads 32");
  json["hidden_size"] = 32 * 3;
  ExpectError(json, "head_dim", "3 is odd");

  json = Qwen3_8bJson();
  json["eos_token_id"] = 151936;
  ExpectError(json, "eos_token_id", "token id 151936 is outside the vocabulary [0, 151936)");
  json["eos_token_id"] = {151645, -1};
  ExpectError(json, "eos_token_id", "token id -1 is outside");
  json = Qwen3_8bJson();
  json["bos_token_id"] = 200000;
  ExpectError(json, "bos_token_id", "token id 200000 is outside");
}

// Hugging Face Qwen3 variants this model does not implement are refused by name.
TEST(Qwen3ConfigTest, UnsupportedFeaturesAreRefusedByName) {
  const std::pair<const char*, nlohmann::json> cases[] = {
      {"model_type", "qwen3_moe"},  {"hidden_act", "gelu"},
      {"attention_bias", true},     {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}},
      {"use_sliding_window", true}, {"layer_types", {"full_attention", "sliding_attention"}},
  };
  for (const auto& [field, value] : cases) {
    nlohmann::json json = Qwen3_8bJson();
    json[field] = value;
    ExpectError(json, field, "");
  }
  nlohmann::json plain = Qwen3_8bJson();  // the values real checkpoints carry are fine
  plain["model_type"] = "qwen3";
  plain["rope_scaling"] = nullptr;
  plain["sliding_window"] = nullptr;
  plain["use_sliding_window"] = false;
  EXPECT_TRUE(ParseDecoderConfig(plain.dump(), "config.json").ok());
}

TEST(Qwen3ConfigTest, NotAConfig) {
  for (const std::string text : {"", "{", "[1, 2]", "\"config\"", "null"}) {
    const Result<DecoderConfig> config = ParseDecoderConfig(text, "x/config.json");
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_EQ(config.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(config.status().message().rfind("x/config.json: ", 0), 0u)
        << config.status().message();
  }
  // Without a path, messages say "config.json".
  const Result<DecoderConfig> unnamed = ParseDecoderConfig("{}", "");
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().message(),
            "config.json: field \"vocab_size\": missing (expected a positive integer)");

  const Result<DecoderConfig> missing = LoadDecoderConfig(kConfigDir + "/absent.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(kConfigDir + "/absent.json"), std::string::npos);
}

TEST(Qwen3ConfigTest, ToJsonRoundTrips) {
  const Result<DecoderConfig> original = LoadDecoderConfig(kConfigPath);
  ASSERT_TRUE(original.ok());
  const std::string text = DecoderConfigToJson(*original);
  const Result<DecoderConfig> reparsed = ParseDecoderConfig(text, "");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  EXPECT_EQ(*reparsed, *original);

  const nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_EQ(json["architectures"], nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(json["model_type"], "qwen3");
  EXPECT_EQ(json["hidden_act"], "silu");
  EXPECT_EQ(json["attention_bias"], false);
  EXPECT_EQ(json["torch_dtype"], "bfloat16");
  EXPECT_EQ(json["rope_theta"], 1000000);
  EXPECT_TRUE(json["rope_theta"].is_number_integer());
  EXPECT_EQ(json["eos_token_id"], 151645);
  // Every field of the real config the parser reads carries the same value.
  const nlohmann::json real = Qwen3_8bJson();
  for (const char* field :
       {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta",
        "tie_word_embeddings", "max_position_embeddings", "bos_token_id", "eos_token_id"}) {
    EXPECT_EQ(json[field], real[field]) << field;
  }
}

TEST(Qwen3ConfigTest, ToJsonRoundTripsUnusualValues) {
  DecoderConfig config;
  config.vocab_size = 1000;
  config.hidden_size = 96;
  config.intermediate_size = 250;
  config.num_hidden_layers = 3;
  config.num_attention_heads = 6;
  config.num_key_value_heads = 2;
  config.head_dim = 18;
  config.rms_norm_eps = 1.2345678901234567e-7;
  config.rope_theta = 10000.5;
  config.tie_word_embeddings = true;
  config.max_position_embeddings = 77;
  config.bos_token_ids = {};
  config.eos_token_ids = {999, 0, 5};
  const Result<DecoderConfig> reparsed = ParseDecoderConfig(DecoderConfigToJson(config), "");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().message();
  EXPECT_EQ(*reparsed, config);
  const nlohmann::json json = nlohmann::json::parse(DecoderConfigToJson(config));
  EXPECT_TRUE(json["bos_token_id"].is_null());
  EXPECT_EQ(json["eos_token_id"], nlohmann::json::array({999, 0, 5}));
}

}  // namespace
}  // namespace dscale
