#include "budget/verify_budget.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace dscale::budget {

Result<VerifyBudget> VerifyBudget::Parse(std::string_view text) {
  if (text == "auto") return VerifyBudget{.automatic = true};
  if (text == "auto-rows") return VerifyBudget{.automatic = true, .price_experts = false};
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !(value > 0.0 && value <= 1.0)) {
    return InvalidArgument("expected auto, auto-rows or a fraction of W·N in (0, 1], got \"" +
                           std::string(text) + "\"");
  }
  return VerifyBudget{.fraction = value};
}

std::string VerifyBudget::Name() const {
  if (automatic) return price_experts ? "auto" : "auto-rows";
  std::ostringstream out;
  out << fraction;
  return out.str();
}

}  // namespace dscale::budget
