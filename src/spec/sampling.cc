#include "spec/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/check.h"

namespace dscale {
namespace {

// Token ids sorted by descending probability; ties keep the lower id first.
std::vector<int32_t> RankByProbability(const std::vector<double>& probs) {
  std::vector<int32_t> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
  return order;
}

Status Renormalise(std::vector<double>* probs) {
  const double total = std::accumulate(probs->begin(), probs->end(), 0.0);
  if (!(total > 0) || !std::isfinite(total)) {
    return InvalidArgument("no token has a positive finite probability (total " +
                           std::to_string(total) + ")");
  }
  for (double& p : *probs) p /= total;
  return Status::Ok();
}

std::string NonFinite(float value, size_t token) {
  const char* what = std::isnan(value) ? "NaN" : (value > 0 ? "+infinity" : "-infinity");
  return std::string("the logit of token ") + std::to_string(token) + " is " + what +
         ": the model's activations overflowed, so there is no distribution to sample from";
}

// Keeps the top-k, then the top-p nucleus of the kept set (probs sum to 1).
void KeepTopKTopP(const SamplingParams& params, std::vector<double>* probs) {
  const std::vector<int32_t> order = RankByProbability(*probs);
  const bool use_top_k = params.top_k > 0 && params.top_k < static_cast<int32_t>(probs->size());
  size_t keep = use_top_k ? static_cast<size_t>(params.top_k) : order.size();
  if (params.top_p < 1.0f) {
    // Smallest prefix (within the top-k set, renormalised) whose mass reaches top_p.
    double kept_mass = 0;
    for (size_t r = 0; r < keep; ++r) kept_mass += (*probs)[order[r]];
    double mass = 0;
    for (size_t r = 0; r < keep; ++r) {
      mass += (*probs)[order[r]] / kept_mass;
      if (mass >= params.top_p) {
        keep = r + 1;
        break;
      }
    }
  }
  for (size_t r = keep; r < order.size(); ++r) (*probs)[order[r]] = 0.0;
}

// Drops the tokens less likely than min_p times the likeliest (probs sum to 1).
void KeepAboveMinP(float min_p, std::vector<double>* probs) {
  const double floor = min_p * *std::max_element(probs->begin(), probs->end());
  for (double& p : *probs) {
    if (p < floor) p = 0.0;
  }
}

}  // namespace

Status MakeTargetDistribution(std::span<const float> logits, const SamplingParams& params,
                              std::vector<double>* probs) {
  DSCALE_CHECK(!params.greedy());
  if (logits.empty()) return InvalidArgument("no logits to sample from");
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) return InvalidArgument(NonFinite(logits[i], i));
  }
  const double inv_t = 1.0 / params.temperature;
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  probs->resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    (*probs)[i] = std::exp((static_cast<double>(logits[i]) - max_logit) * inv_t);
  }
  DSCALE_RETURN_IF_ERROR(Renormalise(probs));
  if (params.min_p > 0.0f) {
    KeepAboveMinP(params.min_p, probs);
    DSCALE_RETURN_IF_ERROR(Renormalise(probs));
  }
  const bool use_top_k = params.top_k > 0 && params.top_k < static_cast<int32_t>(logits.size());
  if (!use_top_k && params.top_p >= 1.0f) return Status::Ok();
  KeepTopKTopP(params, probs);
  return Renormalise(probs);
}

void TargetDistribution(std::span<const float> logits, const SamplingParams& params,
                        std::vector<double>* probs) {
  const Status made = MakeTargetDistribution(logits, params, probs);
  DSCALE_CHECK_MSG(made.ok(), made.message().c_str());
}

Status CheckGreedyChoice(std::span<const float> logits, int32_t token) {
  const float value = logits[static_cast<size_t>(token)];
  if (std::isfinite(value)) return Status::Ok();
  return InvalidArgument(NonFinite(value, static_cast<size_t>(token)));
}

int32_t SampleIndex(std::span<const double> probs, double u) {
  double cumulative = 0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    cumulative += probs[i];
    last_nonzero = static_cast<int32_t>(i);
    if (u < cumulative) return last_nonzero;
  }
  return last_nonzero;  // u beyond the rounded total
}

}  // namespace dscale
