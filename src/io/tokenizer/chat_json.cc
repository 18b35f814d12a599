#include "io/tokenizer/chat_json.h"

#include <charconv>
#include <cmath>
#include <string_view>

namespace dscale {
namespace {

// A float as Python's repr writes it: the shortest digits that read back as the same double,
// positioned as a decimal (with ".0" when whole) for exponents -4 to 15, else as d.ddde±XX.
std::string PythonFloat(double x) {
  if (std::isnan(x)) return "NaN";  // what json.dumps writes; JSON input never holds one
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string_view sci(buf, ec == std::errc() ? static_cast<size_t>(end - buf) : 0);
  std::string sign;
  if (sci.starts_with('-')) {
    sign = "-";
    sci.remove_prefix(1);
  }
  const size_t e_at = sci.find('e');
  std::string digits(sci.substr(0, e_at));
  std::erase(digits, '.');
  int exponent = 0;
  std::from_chars(sci.data() + e_at + 1 + (sci[e_at + 1] == '+'), sci.data() + sci.size(),
                  exponent);
  const int n = static_cast<int>(digits.size());
  if (exponent < -4 || exponent > 15) {
    std::string mantissa = digits.substr(0, 1);
    if (n > 1) mantissa += "." + digits.substr(1);
    const int magnitude = exponent < 0 ? -exponent : exponent;
    return sign + mantissa + (exponent < 0 ? "e-" : "e+") + (magnitude < 10 ? "0" : "") +
           std::to_string(magnitude);
  }
  if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + digits;
  const int whole = exponent + 1;
  if (n <= whole) return sign + digits + std::string(whole - n, '0') + ".0";
  return sign + digits.substr(0, whole) + "." + digits.substr(whole);
}

void Append(const nlohmann::ordered_json& value, std::string* out) {
  if (value.is_object()) {
    *out += '{';
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (!first) *out += ", ";
      first = false;
      *out += nlohmann::ordered_json(key).dump();
      *out += ": ";
      Append(member, out);
    }
    *out += '}';
  } else if (value.is_array()) {
    *out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) *out += ", ";
      Append(value[i], out);
    }
    *out += ']';
  } else if (value.is_number_float()) {
    *out += PythonFloat(value.get<double>());
  } else {
    // Strings, integers and literals: nlohmann's spelling is Python's — the same escapes (\",
    // \\, \n, \r, \t, \b, \f, \u00XX for other control characters, nothing else).
    *out += value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
}

}  // namespace

std::string TemplateJson(const nlohmann::ordered_json& value) {
  std::string out;
  Append(value, &out);
  return out;
}

std::string TemplateString(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  return TemplateJson(value);
}

}  // namespace dscale
