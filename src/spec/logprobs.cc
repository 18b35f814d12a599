#include "spec/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "core/check.h"

namespace dscale {
namespace {

// scratch = log softmax(logits) in double.
Status LogSoftmax(std::span<const float> logits, std::vector<double>* scratch) {
  double max = -std::numeric_limits<double>::infinity();
  for (size_t v = 0; v < logits.size(); ++v) {
    if (!std::isfinite(logits[v])) {
      return InvalidArgument("the logit of token " + std::to_string(v) +
                             " is not finite: there are no log-probabilities to report");
    }
    max = std::max(max, static_cast<double>(logits[v]));
  }
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_z = max + std::log(sum);
  scratch->resize(logits.size());
  for (size_t v = 0; v < logits.size(); ++v) (*scratch)[v] = static_cast<double>(logits[v]) - log_z;
  return Status::Ok();
}

// scratch = log P; −∞ where P is 0.
Status LogTargetDistribution(std::span<const float> logits, const SamplingParams& sampling,
                             std::vector<double>* scratch) {
  DSCALE_RETURN_IF_ERROR(MakeTargetDistribution(logits, sampling, scratch));
  for (double& p : *scratch) {
    p = p > 0.0 ? std::log(p) : -std::numeric_limits<double>::infinity();
  }
  return Status::Ok();
}

}  // namespace

Status ComputeTokenLogprobs(std::span<const float> logits, const SamplingParams& sampling,
                            int32_t token, int32_t top, std::vector<double>* scratch,
                            TokenLogprobs* out) {
  const auto vocab = static_cast<int64_t>(logits.size());
  DSCALE_CHECK(token >= 0 && token < vocab && top >= 0 && top <= kMaxTopLogprobs);
  DSCALE_RETURN_IF_ERROR(sampling.greedy() ? LogSoftmax(logits, scratch)
                                           : LogTargetDistribution(logits, sampling, scratch));
  const std::vector<double>& logp = *scratch;
  out->token = token;
  out->logprob = static_cast<float>(logp[token]);
  out->top.clear();
  if (top == 0) return Status::Ok();
  // The `top` largest finite entries, ties to the lower id, by a partial sort of their ids.
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const auto more_likely = [&](int32_t a, int32_t b) {
    return logp[a] > logp[b] || (logp[a] == logp[b] && a < b);
  };
  const int64_t n = std::min<int64_t>(top, vocab);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), more_likely);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(logp[ids[i]])) break;
    out->top.push_back({.token = ids[i], .logprob = static_cast<float>(logp[ids[i]])});
  }
  return Status::Ok();
}

}  // namespace dscale
