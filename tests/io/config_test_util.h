#pragma once
// Helpers for the config.json tests of every model family: parse a document as if it were read
// from "some/dir/config.json", expect its refusal to name a field and what was expected, and
// expect its config to survive the round trip through its own JSON.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "io/decoder_config.h"

namespace dscale::testing_io {

inline Result<DecoderConfig> Parse(const nlohmann::json& json) {
  return ParseDecoderConfig(json.dump(), "some/dir/config.json");
}

inline void ExpectError(const nlohmann::json& json, const std::string& field,
                        const std::string& expected) {
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_FALSE(config.ok()) << field << " " << expected;
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = config.status().message();
  const std::string prefix = "some/dir/config.json: field \"" + field + "\": ";
  EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
  EXPECT_NE(message.find(expected), std::string::npos)
      << "\"" << message << "\" lacks \"" << expected << "\"";
}

// `json` parses, and the JSON its config writes parses back to the same config.
inline void ExpectRoundTrips(const nlohmann::json& json) {
  const Result<DecoderConfig> config = Parse(json);
  ASSERT_TRUE(config.ok()) << config.status().message();
  const Result<DecoderConfig> again =
      ParseDecoderConfig(DecoderConfigToJson(*config), "round/trip/config.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, *config);
}

}  // namespace dscale::testing_io
