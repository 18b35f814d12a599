#include "budget/confidence_survival.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale::budget {
namespace {

constexpr const char* kCalibrationFormat = "dscale-confidence-calibration-v1";
constexpr size_t kMaxCalibrationBytes = size_t{1} << 20;

// σ(x) without overflow for either sign.
double ConfidenceSigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// `name_of(k)` names entry k in errors.
template <class NameOf>
Status CheckTemperatures(const std::vector<float>& temperatures, const NameOf& name_of) {
  for (size_t k = 0; k < temperatures.size(); ++k) {
    if (!(temperatures[k] > 0) || !std::isfinite(temperatures[k])) {
      return InvalidArgument(name_of(k) + ": expected a positive finite temperature, got " +
                             std::to_string(temperatures[k]));
    }
  }
  return Status::Ok();
}

}  // namespace

void SurvivalFromConfidence(const float* logits, int64_t n, int positions,
                            const ConfidenceCalibration& calibration, float* q) {
  DSCALE_CHECK(calibration.temperatures.empty() ||
               calibration.temperatures.size() == static_cast<size_t>(positions));
  const int64_t width = positions + 1;
  for (int64_t r = 0; r < n; ++r) {
    // The product runs in double so that a long block does not round each factor twice.
    double survival = 1.0;
    q[r * width] = 1.0f;
    for (int k = 0; k < positions; ++k) {
      survival *= ConfidenceSigmoid(double{logits[r * positions + k]} / calibration.Temperature(k));
      q[r * width + k + 1] = static_cast<float>(survival);
    }
  }
}

Result<ConfidenceCalibration> LoadConfidenceCalibration(const std::string& path, int positions) {
  DSCALE_ASSIGN_OR_RETURN(const nlohmann::json j,
                          ReadTaggedJsonFile(path, kCalibrationFormat, kMaxCalibrationBytes));
  const auto field = [&](const char* name) { return JsonFieldName(path, name); };
  const nlohmann::json* t = JsonMember(j, "temperatures");
  if (t == nullptr || !t->is_array()) {
    return InvalidArgument(field("temperatures") + ": expected an array, got " +
                           (t == nullptr ? std::string("nothing") : DescribeJson(*t)));
  }
  if (t->size() != static_cast<size_t>(positions)) {
    return InvalidArgument(field("temperatures") + ": expected " + std::to_string(positions) +
                           " entries (the drafter's candidates per block), got " +
                           std::to_string(t->size()));
  }
  ConfidenceCalibration calibration;
  for (size_t k = 0; k < t->size(); ++k) {
    DSCALE_ASSIGN_OR_RETURN(
        const double value,
        ReadJsonNumber((*t)[k], field(("temperatures[" + std::to_string(k) + "]").c_str())));
    calibration.temperatures.push_back(static_cast<float>(value));
  }
  DSCALE_RETURN_IF_ERROR(CheckTemperatures(calibration.temperatures, [&](size_t k) {
    return field(("temperatures[" + std::to_string(k) + "]").c_str());
  }));
  if (const nlohmann::json* records = JsonMember(j, "records")) {
    DSCALE_ASSIGN_OR_RETURN(calibration.records,
                            ReadJsonInt(*records, field("records"), 0,
                                        std::numeric_limits<int64_t>::max()));
  }
  for (auto [name, value] : {std::pair{"ece_before", &calibration.ece_before},
                             std::pair{"ece_after", &calibration.ece_after}}) {
    if (const nlohmann::json* v = JsonMember(j, name)) {
      DSCALE_ASSIGN_OR_RETURN(*value, ReadJsonNumber(*v, field(name)));
    }
  }
  return calibration;
}

Status SaveConfidenceCalibration(const ConfidenceCalibration& calibration,
                                 const std::string& path) {
  if (calibration.temperatures.empty()) {
    return InvalidArgument("temperatures: a calibration file needs at least one");
  }
  DSCALE_RETURN_IF_ERROR(CheckTemperatures(calibration.temperatures, [](size_t k) {
    return "temperatures[" + std::to_string(k) + "]";
  }));
  const nlohmann::json j = {{"format", kCalibrationFormat},
                            {"temperatures", calibration.temperatures},
                            {"records", calibration.records},
                            {"ece_before", calibration.ece_before},
                            {"ece_after", calibration.ece_after}};
  const std::string text = j.dump(2) + "\n";
  return WriteFileAtomically(path, text.data(), text.size());
}

}  // namespace dscale::budget
