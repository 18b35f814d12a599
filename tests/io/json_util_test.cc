// The checked JSON readers every loader, table and request parser goes through: integers are
// range-checked as the JSON numbers they are before any narrowing, typed access never throws,
// and a configuration file that names one key twice is refused.

#include "io/json_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace dscale {
namespace {

nlohmann::json Json(const std::string& text) { return ParseJson(text).value(); }

// The message of reading `text` as an integer in [min, max], or "" when it is accepted.
std::string IntError(const std::string& text, int64_t min, int64_t max) {
  const Result<int64_t> r = ReadJsonInt(Json(text), "f.json: field \"n\"", min, max);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(JsonUtilTest, IntegersAreCheckedAsTheNumbersTheyAre) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  // 2^31 + k and 2^32 + 1 must not wrap into a 32-bit range; 2^63 and 2^64 − 1 (unsigned in
  // JSON) must not wrap into int64; 2^64 + 1 is a float to the parser.
  for (const std::string bad :
       {"2147483648", "2147483650", "4294967297", "9223372036854775807", "9223372036854775808",
        "18446744073709551615", "18446744073709551617", "-1", "-2147483649",
        "-9223372036854775808"}) {
    const std::string message = IntError(bad, 0, kInt32Max);
    EXPECT_EQ(message.rfind("f.json: field \"n\": expected an integer in [0, 2147483647], got ", 0),
              0u)
        << bad << ": " << message;
  }
  // Not integers at all, whatever their value.
  for (const std::string bad : {"3.0", "3.5", "1e3", "-0.0", "true", "false", "null", "\"3\"",
                                "[3]", "{\"n\": 3}", "[]", "{}"}) {
    EXPECT_NE(IntError(bad, 0, kInt32Max).find("expected an integer"), std::string::npos) << bad;
  }
  EXPECT_EQ(IntError("0", 0, kInt32Max), "");
  EXPECT_EQ(IntError("2147483647", 0, kInt32Max), "");
  EXPECT_EQ(IntError("-5", -5, 5), "");
  EXPECT_EQ(ReadJsonInt(Json("18446744073709551615"), "n", 0, std::numeric_limits<int64_t>::max())
                .status()
                .message(),
            "n: expected a non-negative integer, got 18446744073709551615");
  EXPECT_EQ(*ReadJsonInt(Json("-9223372036854775808"), "n", std::numeric_limits<int64_t>::lowest(),
                         std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::lowest());
  EXPECT_EQ(*ReadJsonInt(Json("9223372036854775807"), "n", 0, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max());
  // The range's wording.
  EXPECT_NE(IntError("0", 1, std::numeric_limits<int64_t>::max()).find("a positive integer"),
            std::string::npos);
  EXPECT_NE(IntError("-1", 0, std::numeric_limits<int64_t>::max()).find("a non-negative integer"),
            std::string::npos);
  EXPECT_NE(IntError("1", 2, std::numeric_limits<int64_t>::max()).find("an integer >= 2"),
            std::string::npos);
}

TEST(JsonUtilTest, NarrowReadsCheckTheTargetTypesRange) {
  EXPECT_EQ(*ReadJsonIntAs<int32_t>(Json("-2147483648"), "n"), std::numeric_limits<int32_t>::min());
  EXPECT_FALSE(ReadJsonIntAs<int32_t>(Json("2147483648"), "n").ok());
  EXPECT_FALSE(ReadJsonIntAs<int32_t>(Json("4294967297"), "n").ok());
  EXPECT_EQ(*ReadJsonIntAs<uint8_t>(Json("255"), "n"), 255);
  EXPECT_FALSE(ReadJsonIntAs<uint8_t>(Json("256"), "n").ok());
  EXPECT_FALSE(ReadJsonIntAs<uint8_t>(Json("-1"), "n").ok());
  EXPECT_FALSE(ReadJsonIntAs<uint32_t>(Json("4294967296"), "n").ok());
  EXPECT_EQ(*ReadJsonIntAs<int32_t>(Json("7"), "n", 2, 64), 7);
  EXPECT_NE(ReadJsonIntAs<int32_t>(Json("65"), "b", 2, 64)
                .status()
                .message()
                .find("b: expected an integer in [2, 64], got 65"),
            std::string::npos);
}

TEST(JsonUtilTest, TypedReadsNeverThrowAndNameTheField) {
  for (const std::string text : {"5", "null", "[1]", "{\"a\": 1}", "true", "1.5"}) {
    const Result<std::string> s = ReadJsonString(Json(text), "t.json: field \"format\"");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().message().rfind("t.json: field \"format\": expected a string, got ", 0),
              0u)
        << s.status().message();
  }
  EXPECT_EQ(*ReadJsonString(Json("\"x\""), "s"), "x");
  for (const std::string text : {"0", "1", "\"true\"", "null", "[]"}) {
    EXPECT_NE(ReadJsonBool(Json(text), "b").status().message().find("expected true or false"),
              std::string::npos)
        << text;
  }
  EXPECT_TRUE(*ReadJsonBool(Json("true"), "b"));
  // A number past double's range is either refused by the parser or not finite.
  for (const std::string text : {"1e400", "-1e400"}) {
    const std::optional<nlohmann::json> huge = ParseJson(text);
    if (huge) {
      EXPECT_FALSE(ReadJsonNumber(*huge, "x").ok()) << text;
    }
  }
  for (const std::string text : {"\"1\"", "true", "null", "[1]", "{}"}) {
    EXPECT_NE(ReadJsonNumber(Json(text), "x").status().message().find("expected a finite number"),
              std::string::npos)
        << text;
  }
  EXPECT_DOUBLE_EQ(*ReadJsonNumber(Json("2"), "x"), 2.0);
  EXPECT_DOUBLE_EQ(*ReadJsonNumber(Json("0.25"), "x", 0, 1), 0.25);
  EXPECT_NE(ReadJsonNumber(Json("1.5"), "p", 0, 1)
                .status()
                .message()
                .find("p: expected a number in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_EQ(JsonFieldName("a/config.json", "dflash_config.block_size"),
            "a/config.json: field \"dflash_config.block_size\"");
  // Members of anything: null and absent are alike, a non-object has none.
  const nlohmann::json object = Json(R"({"a": 1, "b": null})");
  EXPECT_NE(JsonMember(object, "a"), nullptr);
  EXPECT_EQ(JsonMember(object, "b"), nullptr);
  EXPECT_EQ(JsonMember(object, "c"), nullptr);
  EXPECT_EQ(JsonMember(Json("[1, 2]"), "a"), nullptr);
  EXPECT_EQ(JsonMember(Json("5"), "a"), nullptr);
}

TEST(JsonUtilTest, DocumentsWithARepeatedKeyAreRefused) {
  const auto error = [](const std::string& text) {
    const Result<nlohmann::json> r = ParseJsonDocument(text);
    if (r.ok()) return std::string();
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    return r.status().message();
  };
  EXPECT_EQ(error(R"({"vocab_size": 5, "hidden_size": 8, "vocab_size": 7})"),
            "duplicate key \"vocab_size\"");
  EXPECT_EQ(error(R"({"dflash_config": {"mask_token_id": 1, "mask_token_id": 2}})"),
            "duplicate key \"mask_token_id\" in \"dflash_config\"");
  EXPECT_EQ(error(R"({"a": [1, {"x": 1}, {"y": {"z": 1, "z": 1}}]})"),
            "duplicate key \"z\" in \"a[2].y\"");
  EXPECT_EQ(error(R"([[], {"k": 1, "k": 1}])"), "duplicate key \"k\" in \"[1]\"");
  EXPECT_EQ(error("{\"a\": 1,"), "not valid JSON");
  EXPECT_EQ(error("{\"a\": \"\xff\"}"), "not valid JSON");
  // The same key in different objects, and equal values under different keys, are fine.
  const Result<nlohmann::json> fine =
      ParseJsonDocument(R"({"a": {"k": 1}, "b": {"k": 1}, "c": [{"k": 2}, {"k": 3}], "k": 4})");
  ASSERT_TRUE(fine.ok()) << fine.status().message();
  EXPECT_EQ((*fine)["c"][1]["k"], 3);
}

}  // namespace
}  // namespace dscale
