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

// indent < 0: on one line, ", " between items; else a line per item at `level` + 1 levels.
void Append(const nlohmann::ordered_json& value, int indent, int level, std::string* out) {
  const auto item_start = [&](bool first) {
    if (indent < 0) {
      if (!first) *out += ", ";
      return;
    }
    if (!first) *out += ',';
    *out += '\n' + std::string(static_cast<size_t>(indent * (level + 1)), ' ');
  };
  const auto close = [&](char bracket) {
    if (indent >= 0) *out += '\n' + std::string(static_cast<size_t>(indent * level), ' ');
    *out += bracket;
  };
  if (value.is_object()) {
    *out += '{';
    if (value.empty()) {
      *out += '}';
      return;
    }
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      item_start(first);
      first = false;
      *out += nlohmann::ordered_json(key).dump(-1, ' ', false,
                                               nlohmann::ordered_json::error_handler_t::replace);
      *out += ": ";
      Append(member, indent, level + 1, out);
    }
    close('}');
  } else if (value.is_array()) {
    *out += '[';
    if (value.empty()) {
      *out += ']';
      return;
    }
    for (size_t i = 0; i < value.size(); ++i) {
      item_start(i == 0);
      Append(value[i], indent, level + 1, out);
    }
    close(']');
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
  Append(value, /*indent=*/-1, 0, &out);
  return out;
}

std::string TemplateJson(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  Append(value, indent < 0 ? 0 : indent, 0, &out);
  return out;
}

std::string TemplateString(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  return TemplateJson(value);
}

}  // namespace dscale
