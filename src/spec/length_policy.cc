#include "spec/length_policy.h"

#include <charconv>

namespace dscale {

Result<LengthPolicy> LengthPolicy::Parse(const std::string& text) {
  if (text == "none") return LengthPolicy{.mode = SpecMode::kNone};
  if (text == "dflash") return LengthPolicy{.mode = SpecMode::kDFlash};
  if (text == "dscale") return LengthPolicy{.mode = SpecMode::kDScale};
  if (text == "dspark") return LengthPolicy{.mode = SpecMode::kDSpark};
  if (text.rfind("fixed:", 0) == 0) {
    const std::string digits = text.substr(6);
    int32_t k = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (ec == std::errc() && ptr == digits.data() + digits.size() && k >= 2 && k <= 16) {
      return LengthPolicy{.mode = SpecMode::kFixed, .fixed_rows = k};
    }
  }
  return InvalidArgument(
      "--spec: expected none, dflash, fixed:K (K in 2..16), dscale or dspark, got \"" + text +
      "\"");
}

std::string LengthPolicy::Name() const {
  switch (mode) {
    case SpecMode::kNone: return "none";
    case SpecMode::kDFlash: return "dflash";
    case SpecMode::kFixed: return "fixed:" + std::to_string(fixed_rows);
    case SpecMode::kDScale: return "dscale";
    case SpecMode::kDSpark:
      return "dspark";
  }
  return "?";
}

}  // namespace dscale
