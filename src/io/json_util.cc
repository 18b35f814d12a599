#include "io/json_util.h"

#include <limits>

namespace dscale {
namespace {

constexpr size_t kMaxQuotedBytes = 40;

// Cuts `text` to at most `max_bytes` without splitting a UTF-8 sequence.
std::string_view CutUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace

std::optional<nlohmann::json> ParseJson(std::string_view text) {
  nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

std::optional<int64_t> JsonInt64(const nlohmann::json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t x = value.get<uint64_t>();
    if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(x);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

std::string DescribeJson(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      const std::string_view cut = CutUtf8(text, kMaxQuotedBytes);
      return "\"" + std::string(cut) + (cut.size() < text.size() ? "...\"" : "\"");
    }
    case nlohmann::json::value_t::array:
      if (value.empty()) return "an empty array";
      return "an array of " + std::to_string(value.size()) +
             (value.size() == 1 ? " element" : " elements");
    case nlohmann::json::value_t::object:
      return value.empty() ? "an empty object" : "an object";
    case nlohmann::json::value_t::discarded:
      return "nothing";
    default:
      // null, booleans and numbers: dump() cannot fail on them.
      return value.dump();
  }
}

}  // namespace dscale
