#include "budget/sps_table.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale::budget {
namespace {

constexpr const char* kFormat = "dscale-sps-v1";
// A table is a few hundred bytes; verify sizes are rows of one forward.
constexpr size_t kMaxTableBytes = size_t{16} << 20;
constexpr int64_t kMaxVerifyTokens = int64_t{1} << 31;

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
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json j,
                          ReadTaggedJsonFile(path, kFormat, kMaxTableBytes));
  const auto field = [&](const char* name) { return JsonFieldName(path, name); };
  SpsTable table;
  const nlohmann::json* b = JsonMember(j, "verify_tokens");
  const nlohmann::json* s = JsonMember(j, "steps_per_second");
  if (b == nullptr || !b->is_array()) {
    return InvalidArgument(field("verify_tokens") + ": expected an array, got " +
                           (b == nullptr ? std::string("nothing") : DescribeJson(*b)));
  }
  if (s == nullptr || !s->is_array()) {
    return InvalidArgument(field("steps_per_second") + ": expected an array, got " +
                           (s == nullptr ? std::string("nothing") : DescribeJson(*s)));
  }
  for (size_t i = 0; i < b->size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        const int64_t tokens,
        ReadJsonInt((*b)[i], field(("verify_tokens[" + std::to_string(i) + "]").c_str()), 1,
                    kMaxVerifyTokens));
    table.tokens.push_back(tokens);
  }
  for (size_t i = 0; i < s->size(); ++i) {
    DSCALE_ASSIGN_OR_RETURN(
        const double rate,
        ReadJsonNumber((*s)[i], field(("steps_per_second[" + std::to_string(i) + "]").c_str())));
    table.steps_per_second.push_back(rate);
  }
  if (const nlohmann::json* context = JsonMember(j, "context")) {
    DSCALE_ASSIGN_OR_RETURN(table.context, ReadJsonInt(*context, field("context"), 0,
                                                       std::numeric_limits<int64_t>::max()));
  }
  if (const nlohmann::json* target = JsonMember(j, "target")) {
    DSCALE_ASSIGN_OR_RETURN(table.target, ReadJsonString(*target, field("target")));
  }
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
