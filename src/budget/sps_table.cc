#include "budget/sps_table.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/check.h"

namespace dscale::budget {
namespace {

constexpr const char* kFormat = "dscale-sps-v1";

}  // namespace

Status SpsTable::Validate() const {
  if (tokens.empty()) return InvalidArgument("verify_tokens: expected at least one entry");
  if (tokens.size() != steps_per_second.size()) {
    return InvalidArgument("steps_per_second: expected " + std::to_string(tokens.size()) +
                           " entries (one per verify_tokens), got " +
                           std::to_string(steps_per_second.size()));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 1 || (i > 0 && tokens[i] <= tokens[i - 1])) {
      return InvalidArgument("verify_tokens: expected strictly increasing values >= 1, got " +
                             std::to_string(tokens[i]) + " at index " + std::to_string(i));
    }
    if (!(steps_per_second[i] > 0) || !std::isfinite(steps_per_second[i])) {
      return InvalidArgument("steps_per_second: expected positive finite values, index " +
                             std::to_string(i));
    }
  }
  return Status::Ok();
}

double SpsTable::StepsPerSecond(int64_t b) const {
  DSCALE_CHECK(!tokens.empty());
  if (b <= tokens.front()) return steps_per_second.front();
  if (b >= tokens.back()) {
    return steps_per_second.back() * static_cast<double>(tokens.back()) / static_cast<double>(b);
  }
  const size_t hi =
      static_cast<size_t>(std::upper_bound(tokens.begin(), tokens.end(), b) - tokens.begin());
  const size_t lo = hi - 1;
  const double t =
      static_cast<double>(b - tokens[lo]) / static_cast<double>(tokens[hi] - tokens[lo]);
  // Interpolate the step time, not the rate: time is what adds up along B.
  const double seconds = (1 - t) / steps_per_second[lo] + t / steps_per_second[hi];
  return 1.0 / seconds;
}

Result<SpsTable> LoadSpsTable(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot open the SPS table");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(path + ": not a JSON object");
  if (j.value("format", "") != kFormat) {
    return InvalidArgument(path + ": format: expected \"" + kFormat + "\"");
  }
  SpsTable table;
  const auto& b = j.find("verify_tokens");
  const auto& s = j.find("steps_per_second");
  if (b == j.end() || !b->is_array())
    return InvalidArgument(path + ": verify_tokens: expected an array");
  if (s == j.end() || !s->is_array()) {
    return InvalidArgument(path + ": steps_per_second: expected an array");
  }
  for (const auto& v : *b) {
    if (!v.is_number_integer()) return InvalidArgument(path + ": verify_tokens: expected integers");
    table.tokens.push_back(v.get<int64_t>());
  }
  for (const auto& v : *s) {
    if (!v.is_number()) return InvalidArgument(path + ": steps_per_second: expected numbers");
    table.steps_per_second.push_back(v.get<double>());
  }
  if (j.contains("context") && j["context"].is_number_integer()) table.context = j["context"];
  if (j.contains("target") && j["target"].is_string()) table.target = j["target"];
  if (Status st = table.Validate(); !st.ok()) return st.WithContext(path);
  return table;
}

Status SaveSpsTable(const SpsTable& table, const std::string& path) {
  DSCALE_RETURN_IF_ERROR(table.Validate());
  const nlohmann::json j = {{"format", kFormat},
                            {"verify_tokens", table.tokens},
                            {"steps_per_second", table.steps_per_second},
                            {"context", table.context},
                            {"target", table.target}};
  std::ofstream out(path);
  if (!out) return IoError(path + ": cannot write the SPS table");
  out << j.dump(2) << "\n";
  if (!out) return IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace dscale::budget
