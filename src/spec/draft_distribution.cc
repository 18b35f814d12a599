#include "spec/draft_distribution.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "kernels/cpu/softmax.h"
#include "spec/sampling.h"

namespace dscale {

Result<DraftSampling> ParseDraftSampling(std::string_view text) {
  if (text == "argmax") return DraftSampling::kArgmax;
  if (text == "distribution") return DraftSampling::kDistribution;
  return InvalidArgument("--draft-sampling: expected argmax or distribution, got \"" +
                         std::string(text) + "\"");
}

std::string_view DraftSamplingName(DraftSampling mode) {
  return mode == DraftSampling::kArgmax ? "argmax" : "distribution";
}

bool DraftColumnDistribution(std::span<const float> logits, float temperature,
                             std::vector<double>* q) {
  DSCALE_CHECK(temperature > 0.0f && !logits.empty());
  for (const float v : logits) {
    if (!std::isfinite(v)) return false;
  }
  const double inv_t = 1.0 / temperature;
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  q->resize(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    (*q)[i] = std::exp((static_cast<double>(logits[i]) - max_logit) * inv_t);
    total += (*q)[i];
  }
  for (double& p : *q) p /= total;  // total ≥ 1: the largest logit's term is exp(0)
  return true;
}

int32_t SampleDraftColumn(std::span<const float> logits, float temperature, double u,
                          std::vector<double>* q) {
  if (DraftColumnDistribution(logits, temperature, q)) return SampleIndex(*q, u);
  int32_t column = 0;
  cpu::ArgmaxRows(logits.data(), 1, static_cast<int64_t>(logits.size()), &column);
  return column;
}

}  // namespace dscale
