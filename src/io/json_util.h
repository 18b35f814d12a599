#pragma once
// Helpers for reading untrusted JSON with nlohmann::json without exceptions: every accessor here
// checks the type first, so no nlohmann exception can escape.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace dscale {

// Parses `text`; nullopt when it is not valid JSON (including invalid UTF-8 in strings).
std::optional<nlohmann::json> ParseJson(std::string_view text);

// The value as an int64, when it is a JSON integer in range (not a float, not a bool).
std::optional<int64_t> JsonInt64(const nlohmann::json& value);

// A short rendering of a value for error messages: scalars as written in JSON (strings quoted and
// cut after 40 bytes), containers described ("an array of 3 elements", "an object").
std::string DescribeJson(const nlohmann::json& value);

}  // namespace dscale
