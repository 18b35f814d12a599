// A DSpark drafter's heads at the large shape (docs/INFLATE.md, "The DSpark heads"). The heads
// read two things the inflation changes: h, the drafter's final-normed row (the small row in the
// hidden map's dims, divided by λ when the LM head is tied; ±g_c·… on the first two constant dims;
// zero elsewhere), and the vocabulary, whose pad ids never occur. Their own widths (r, 2r, 3r)
// are kept, so every product sees the small head's inputs and weights, and its outputs (the
// Markov bias on real tokens, the rnn state, the confidence logit) are the small head's.

#include <utility>

#include "inflate/inflate_tensors.h"
#include "inflate/tensor_recipes.h"
#include "model/dspark_head.h"

namespace dscale {
namespace {

// A projection whose input is [kept (`before` values) ; h ; kept (`after` values)]: `rows` rows,
// the kept columns copied, h's through AppendFinalRowColumns.
Status AddReadingFinalRow(const InflatePlan& p, const char* name, int64_t rows, int64_t before,
                          int64_t after, TensorList& list) {
  const int64_t d = p.small_target.hidden_size, big = p.large_target.hidden_size;
  IndexMap cols;
  AppendKeptColumns(0, before, &cols);
  RowPatch scale_h = AppendFinalRowColumns(p, before, &cols);
  AppendKeptColumns(before + d, after, &cols);
  return list.Matrix({.name = name,
                      .shape = {rows, before + big + after},
                      .source = name,
                      .source_shape = {rows, before + d + after},
                      .rows = IdentityMap(rows),
                      .cols = ShareMap(std::move(cols)),
                      .patch = std::move(scale_h)});
}

}  // namespace

Result<std::vector<InflatedTensor>> InflatedDSparkHeadTensors(
    const InflatePlan& p, std::shared_ptr<const Checkpoint> source,
    const std::string& source_prefix) {
  if (!p.large_drafter.is_dspark()) return std::vector<InflatedTensor>();
  const DSparkHeadConfig& c = *p.large_drafter.dspark;
  const int64_t r = c.markov_rank;
  TensorList list(std::move(source), source_prefix);
  if (c.has_markov_head()) {
    // W1 is gathered at the previous token (the anchor, or a draft: never a pad id, which never
    // wins); W2's rows are each token's bias, zero on a pad row, whose logit stays the backbone's.
    for (const char* name : {kDSparkW1Name, kDSparkW2Name}) {
      DSCALE_RETURN_IF_ERROR(list.Matrix({.name = name,
                                          .shape = {p.large_target.vocab_size, r},
                                          .source = name,
                                          .source_shape = {p.small_target.vocab_size, r},
                                          .rows = ShareMap(p.vocab),
                                          .cols = IdentityMap(r)}));
    }
    if (c.markov_head_type == MarkovHeadType::kGated) {  // [h ; e]
      DSCALE_RETURN_IF_ERROR(AddReadingFinalRow(p, kDSparkGateName, r, 0, r, list));
      DSCALE_RETURN_IF_ERROR(list.Copy(kDSparkGateBiasName, {r}));
    } else if (c.markov_head_type == MarkovHeadType::kRnn) {  // [s ; e ; h]
      DSCALE_RETURN_IF_ERROR(AddReadingFinalRow(p, kDSparkJointName, 3 * r, 2 * r, 0, list));
      DSCALE_RETURN_IF_ERROR(list.Copy(kDSparkJointBiasName, {3 * r}));
    }
  }
  if (c.confidence_head) {  // [h (; e)]
    const int64_t e = c.confidence_with_markov ? r : 0;
    DSCALE_RETURN_IF_ERROR(AddReadingFinalRow(p, kDSparkConfidenceName, 1, 0, e, list));
    DSCALE_RETURN_IF_ERROR(list.Copy(kDSparkConfidenceBiasName, {1}));
  }
  return list.Take();
}

}  // namespace dscale
