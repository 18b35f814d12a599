#include "dvl_decider.h"

#include <memory>
#include <vector>

#include "dvl/budget_allocator.h"
#include "dvl/features.h"
#include "dvl/predictor.h"

namespace dscale::cli {
namespace {

struct DeciderState {
  dvl::Predictor predictor;
  std::vector<float> features;  // [n, 1735]
  std::vector<float> logits;    // [n, 15]
};

void Decide(DeciderState& s, const DraftOutput& drafts, int32_t live, int32_t block,
            std::vector<int32_t>* rows) {
  const int64_t n = live;
  s.features.resize(static_cast<size_t>(n) * dvl::kFeatureCount);
  s.logits.resize(static_cast<size_t>(n) * dvl::kDraftPositions);
  dvl::ExtractFeaturesBatch(drafts.logits.data(), drafts.hidden.data(), n, n,
                            s.predictor.projections(), s.features.data());
  s.predictor.Forward(s.features.data(), n, s.logits.data());
  Result<int64_t> budget = dvl::BudgetFromFraction(n, block, dvl::kDefaultVerifyBudget);
  DSCALE_CHECK_MSG(budget.ok(), "the budget of a live step is always in range");
  Result<dvl::Allocation> allocation = dvl::AllocateFromLogits(s.logits.data(), n, *budget);
  DSCALE_CHECK_MSG(allocation.ok(), "the allocator accepts every in-range budget");
  rows->assign(allocation->k.begin(), allocation->k.end());
}

}  // namespace

Result<RowDecider> MakeDvlRowDecider(const std::string& path, const DFlashDrafter& drafter,
                                     int64_t vocab_size) {
  if (drafter.block_size() != dvl::kBlockWidth) {
    return InvalidArgument("--spec dscale: the predictor needs a drafter block of " +
                           std::to_string(dvl::kBlockWidth) + ", the drafter has " +
                           std::to_string(drafter.block_size()));
  }
  const dvl::DrafterDims dims{.hidden_size = drafter.config().draft.hidden_size,
                              .vocab_size = vocab_size};
  DSCALE_ASSIGN_OR_RETURN(dvl::Predictor predictor, dvl::Predictor::Load(path, dims));
  auto state = std::make_shared<DeciderState>(DeciderState{.predictor = std::move(predictor)});
  return RowDecider(
      [state](const DraftOutput& drafts, int32_t live, int32_t block, std::vector<int32_t>* rows) {
        Decide(*state, drafts, live, block, rows);
      });
}

}  // namespace dscale::cli
