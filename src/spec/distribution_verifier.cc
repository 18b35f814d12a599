#include "spec/distribution_verifier.h"

#include <algorithm>

#include "core/check.h"
#include "spec/draft_distribution.h"

namespace dscale {

void DraftTargetDistribution(const DraftRows& rows, size_t row, float temperature, int64_t vocab,
                             int32_t draft, std::vector<double>* columns, std::vector<double>* q) {
  DSCALE_CHECK(rows.present());
  DSCALE_CHECK(rows.column_ids.empty() ? rows.columns == vocab
                                       : static_cast<int64_t>(rows.column_ids.size()) ==
                                             rows.columns);
  const std::span<const float> logits = rows.logits.subspan(row * rows.columns, rows.columns);
  q->assign(static_cast<size_t>(vocab), 0.0);
  if (!DraftColumnDistribution(logits, temperature, columns)) {
    (*q)[static_cast<size_t>(draft)] = 1.0;  // no Q: the drafter proposed the argmax
    return;
  }
  if (rows.column_ids.empty()) {
    std::copy(columns->begin(), columns->end(), q->begin());
    return;
  }
  for (size_t c = 0; c < columns->size(); ++c) {
    (*q)[static_cast<size_t>(rows.column_ids[c])] = (*columns)[c];
  }
}

Result<VerifyResult> VerifyWithDraftDistribution(std::span<const float> logits, int64_t vocab,
                                                 std::span<const int32_t> drafts,
                                                 const DraftRows& rows,
                                                 const SamplingParams& params,
                                                 int64_t first_position,
                                                 const StreamUniformSource& uniform,
                                                 DistributionScratch* scratch) {
  DSCALE_CHECK(!params.greedy());
  DSCALE_CHECK(logits.size() == (drafts.size() + 1) * vocab);
  DSCALE_CHECK(drafts.empty() || rows.logits.size() >= drafts.size() * rows.columns);
  std::vector<double>& p = scratch->p;
  std::vector<double>& q = scratch->q;
  for (size_t j = 0;; ++j) {
    DSCALE_RETURN_IF_ERROR(
        MakeTargetDistribution(logits.subspan(j * vocab, vocab), params, &p));
    const int64_t position = first_position + static_cast<int64_t>(j);
    const auto at = static_cast<int32_t>(j);
    if (j == drafts.size()) {
      return VerifyResult{.accepted = at,
                          .next_token = SampleIndex(p, uniform(UniformStream::kToken, position))};
    }
    const int32_t d = drafts[j];
    DraftTargetDistribution(rows, j, params.temperature, vocab, d, &scratch->columns, &q);
    DSCALE_CHECK_MSG(q[d] > 0.0, "a sampled draft has positive draft probability");
    if (uniform(UniformStream::kAccept, position) * q[d] < p[d]) continue;  // min(1, P/Q)
    // Rejected, so P(d) < Q(d): the residual max(0, P − Q) has mass unless rounding ate it.
    double mass = 0;
    for (size_t x = 0; x < p.size(); ++x) {
      q[x] = std::max(0.0, p[x] - q[x]);
      mass += q[x];
    }
    const double u = uniform(UniformStream::kToken, position);
    const int32_t next = mass > 0 ? SampleIndex(q, u * mass) : SampleIndex(p, u);
    return VerifyResult{.accepted = at, .next_token = next};
  }
}

Result<VerifyResult> VerifyWithDraftDistributionAt(std::span<const float> logits, int64_t vocab,
                                                   std::span<const int32_t> drafts,
                                                   const DraftRows& rows,
                                                   const SamplingParams& params, uint64_t seed,
                                                   int64_t first_position,
                                                   DistributionScratch* scratch) {
  return VerifyWithDraftDistribution(
      logits, vocab, drafts, rows, params, first_position,
      [seed](UniformStream stream, int64_t position) {
        return StreamUniform(seed, position, stream);
      },
      scratch);
}

}  // namespace dscale
