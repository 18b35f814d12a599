#pragma once
// Reading untrusted JSON (config files, tables, prompts, requests) with nlohmann::json without
// exceptions: every accessor here checks the type first, and every integer is range-checked as
// the JSON number it is (a float, a negative number, or one beyond the range is refused) before
// it is narrowed, so no nlohmann exception can escape and no value is silently wrapped.
//
// Errors are InvalidArgument "<what>: expected <shape>, got <the value>", where `what` names the
// file and field (JsonFieldName).

#include <concepts>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dscale {

// Parses `text`; nullopt when it is not valid JSON (including invalid UTF-8 in strings).
std::optional<nlohmann::json> ParseJson(std::string_view text);

// Parses `text` as a file the program is configured by: DataLoss "not valid JSON", or
// "duplicate key "K"" (with the path of the object holding it when that is not the top level:
// "duplicate key "K" in "a.b[2]"") for an object that names one key twice — nlohmann would keep
// one of the two silently. The caller adds the file name.
Result<nlohmann::json> ParseJsonDocument(std::string_view text);

// The value as an int64, when it is a JSON integer in range (not a float, not a bool).
std::optional<int64_t> JsonInt64(const nlohmann::json& value);

// A short rendering of a value for error messages: scalars as written in JSON (strings quoted and
// cut after 40 bytes), containers described ("an array of 3 elements", "an object").
std::string DescribeJson(const nlohmann::json& value);

// "<where>: field "<field>"", the name errors give a field of a file (`where` is the file's path,
// `field` may be a dotted path such as "dflash_config.target_layer_ids[2]").
std::string JsonFieldName(std::string_view where, std::string_view field);

// The member `key` of `object`, or nullptr when `object` is not an object, has no such member, or
// the member is null (optional fields treat null as absent).
const nlohmann::json* JsonMember(const nlohmann::json& object, std::string_view key);

// A JSON integer in [min, max]. Floats (even 3.0), booleans, strings, containers and integers
// outside the range (however large) are errors naming `what`.
Result<int64_t> ReadJsonInt(const nlohmann::json& value, std::string_view what, int64_t min,
                            int64_t max);

// ReadJsonInt into a narrower integer type: the range defaults to the type's, and is checked
// before the cast.
template <std::integral T>
Result<T> ReadJsonIntAs(const nlohmann::json& value, std::string_view what,
                        T min = std::numeric_limits<T>::lowest(),
                        T max = std::numeric_limits<T>::max()) {
  static_assert(sizeof(T) < sizeof(int64_t) || std::is_signed_v<T>,
                "64-bit unsigned values need their own reader");
  Result<int64_t> read =
      ReadJsonInt(value, what, static_cast<int64_t>(min), static_cast<int64_t>(max));
  if (!read.ok()) return read.status();
  return static_cast<T>(*read);
}

// A finite JSON number (integer or float, not a bool) in [min, max].
Result<double> ReadJsonNumber(const nlohmann::json& value, std::string_view what,
                              double min = std::numeric_limits<double>::lowest(),
                              double max = std::numeric_limits<double>::max());

// A JSON string.
Result<std::string> ReadJsonString(const nlohmann::json& value, std::string_view what);

// A file the program writes for itself (tables, calibrations): at most `max_bytes`, one JSON
// object whose "format" member is `format`. Errors name the file (and the field).
Result<nlohmann::json> ReadTaggedJsonFile(const std::string& path, std::string_view format,
                                          size_t max_bytes);

// true or false.
Result<bool> ReadJsonBool(const nlohmann::json& value, std::string_view what);

}  // namespace dscale
