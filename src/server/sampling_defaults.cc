#include "server/sampling_defaults.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_util.h"
#include "server/openai_request.h"
#include "spec/logit_rules.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;

std::string Shown(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

// root[key] into *out when it is a number in [lo, hi]; absent or null leaves *out unset.
Status ReadNumberIn(const json& root, const std::string& path, const char* key, double lo,
                    double hi, std::optional<float>* out) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < lo ||
      it->get<double>() > hi) {
    return DataLoss(path + ": \"" + key + "\": expected a number from " + Shown(lo) + " to " +
                    Shown(hi) + ", got " + DescribeJson(*it) +
                    " (serve with --sampling-defaults openai to ignore the file's)");
  }
  *out = static_cast<float>(it->get<double>());
  return Status::Ok();
}

}  // namespace

std::string SamplingDefaults::Describe() const {
  std::string text;
  const auto add = [&text](const char* name, const std::string& value) {
    text += (text.empty() ? "" : ", ") + std::string(name) + " " + value;
  };
  if (temperature) add("temperature", Shown(*temperature));
  if (top_k) add("top_k", std::to_string(*top_k));
  if (top_p) add("top_p", Shown(*top_p));
  if (min_p) add("min_p", Shown(*min_p));
  if (repetition_penalty) add("repetition_penalty", Shown(*repetition_penalty));
  return text;
}

Result<SamplingDefaults> LoadSamplingDefaults(const std::string& dir) {
  const std::string path = dir + "/generation_config.json";
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return SamplingDefaults{};
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(path));
  Result<json> root = ParseJsonDocument(text);
  if (!root.ok()) return root.status().WithContext(path);
  if (!root->is_object()) {
    return DataLoss(path + ": expected a JSON object, got " + DescribeJson(*root));
  }
  SamplingDefaults d;
  // The ranges a request may send (server/openai_request.h).
  DSCALE_RETURN_IF_ERROR(
      ReadNumberIn(*root, path, "temperature", 0.0, kMaxTemperature, &d.temperature));
  DSCALE_RETURN_IF_ERROR(ReadNumberIn(*root, path, "top_p", 0.0, 1.0, &d.top_p));
  DSCALE_RETURN_IF_ERROR(ReadNumberIn(*root, path, "min_p", 0.0, 1.0, &d.min_p));
  DSCALE_RETURN_IF_ERROR(ReadNumberIn(*root, path, "repetition_penalty", kMinRepetitionPenalty,
                                      kMaxRepetitionPenalty, &d.repetition_penalty));
  if (d.top_p && *d.top_p == 0.0f) {
    return DataLoss(path + ": \"top_p\": expected a number above 0, got 0");
  }
  std::optional<float> top_k;
  DSCALE_RETURN_IF_ERROR(ReadNumberIn(*root, path, "top_k", 0.0, 1e9, &top_k));
  if (top_k) {
    if (*top_k != std::trunc(*top_k)) {
      return DataLoss(path + ": \"top_k\": expected a whole number, got " +
                      DescribeJson((*root)["top_k"]));
    }
    d.top_k = static_cast<int32_t>(*top_k);
  }
  return d;
}

}  // namespace dscale::server
