#include "spec/prefix_verifier.h"

#include "core/check.h"
#include "kernels/cpu/softmax.h"
#include "spec/position_uniform.h"

namespace dscale {
namespace {

std::span<const float> Row(std::span<const float> logits, int64_t vocab, size_t row) {
  return logits.subspan(row * vocab, vocab);
}

int32_t Argmax(std::span<const float> row) {
  int32_t best = 0;
  cpu::ArgmaxRows(row.data(), 1, static_cast<int64_t>(row.size()), &best);
  return best;
}

}  // namespace

VerifyResult VerifyGreedy(std::span<const float> logits, int64_t vocab,
                          std::span<const int32_t> drafts) {
  DSCALE_CHECK(logits.size() == (drafts.size() + 1) * vocab);
  for (size_t j = 0; j < drafts.size(); ++j) {
    const int32_t target = Argmax(Row(logits, vocab, j));
    if (target != drafts[j]) return {.accepted = static_cast<int32_t>(j), .next_token = target};
  }
  return {.accepted = static_cast<int32_t>(drafts.size()),
          .next_token = Argmax(Row(logits, vocab, drafts.size()))};
}

VerifyResult VerifySampled(std::span<const float> logits, int64_t vocab,
                           std::span<const int32_t> drafts, const SamplingParams& params,
                           const UniformSource& next_uniform, std::vector<double>* probs) {
  DSCALE_CHECK(logits.size() == (drafts.size() + 1) * vocab);
  for (size_t j = 0; j < drafts.size(); ++j) {
    TargetDistribution(Row(logits, vocab, j), params, probs);
    const int32_t x = drafts[j];
    if (next_uniform() < (*probs)[x]) continue;  // accepted with probability P_j(x)
    // Rejected (so P_j(x) < 1): the residual distribution is P_j without x, renormalised.
    const double rest = 1.0 - (*probs)[x];
    (*probs)[x] = 0.0;
    for (double& p : *probs) p /= rest;
    return {.accepted = static_cast<int32_t>(j), .next_token = SampleIndex(*probs, next_uniform())};
  }
  TargetDistribution(Row(logits, vocab, drafts.size()), params, probs);
  return {.accepted = static_cast<int32_t>(drafts.size()),
          .next_token = SampleIndex(*probs, next_uniform())};
}

Result<VerifyResult> VerifyGreedyChecked(std::span<const float> logits, int64_t vocab,
                                         std::span<const int32_t> drafts) {
  const VerifyResult v = VerifyGreedy(logits, vocab, drafts);
  // Rows 0..accepted−1 chose the accepted drafts; row `accepted` chose the next token.
  for (int32_t j = 0; j < v.accepted; ++j) {
    DSCALE_RETURN_IF_ERROR(CheckGreedyChoice(Row(logits, vocab, j), drafts[j]));
  }
  DSCALE_RETURN_IF_ERROR(CheckGreedyChoice(Row(logits, vocab, v.accepted), v.next_token));
  return v;
}

Result<VerifyResult> VerifySampledAt(std::span<const float> logits, int64_t vocab,
                                     std::span<const int32_t> drafts, const SamplingParams& params,
                                     uint64_t seed, int64_t first_position,
                                     std::vector<double>* probs) {
  DSCALE_CHECK(logits.size() == (drafts.size() + 1) * vocab);
  for (size_t j = 0;; ++j) {
    DSCALE_RETURN_IF_ERROR(MakeTargetDistribution(Row(logits, vocab, j), params, probs));
    const int32_t token =
        SampleIndex(*probs, PositionUniform(seed, first_position + static_cast<int64_t>(j)));
    if (j == drafts.size() || token != drafts[j]) {
      return VerifyResult{.accepted = static_cast<int32_t>(j), .next_token = token};
    }
  }
}

}  // namespace dscale
