#pragma once
// A test drafter that proposes the target's own greedy continuation of the context (computed
// with the target, memoised per context) with one planted error per step at a position derived
// from a hash of the context. With greedy verification, exactly the drafts before the planted
// error are accepted, which drives the accept path through every length.

#include <cstdint>
#include <map>
#include <vector>

#include "model/decoder_model.h"
#include "model/drafter.h"

namespace dscale::testing {

class PlantedDrafter : public Drafter {
 public:
  // `error_free_share`: fraction of steps (by hash) with no planted error at all.
  PlantedDrafter(DecoderModel& target, int32_t block, uint64_t salt,
                 double error_free_share = 0.15);

  int32_t block_size() const override { return block_; }
  const std::vector<int32_t>& feature_layers() const override { return no_layers_; }
  void Bind(const PagedKvCache&) override {}
  void AppendContext(const ContextRows&) override {}
  Status Draft(std::span<const DraftRequest> requests, const PagedKvCache& cache, int tile_rows,
               DraftOutput* out) override;

  // 1-based draft index of the planted error for a context (block_ when there is none, i.e. all
  // block − 1 drafts are right).
  int32_t ErrorPosition(const std::vector<int32_t>& context) const;
  // Every context drafted for so far, in order (context = committed tokens + anchor).
  const std::vector<std::vector<int32_t>>& drafted_contexts() const { return drafted_; }

 private:
  const std::vector<int32_t>& GreedyContinuation(const std::vector<int32_t>& context);

  DecoderModel& target_;
  int32_t block_;
  uint64_t salt_;
  double error_free_share_;
  std::vector<int32_t> no_layers_;
  std::map<std::vector<int32_t>, std::vector<int32_t>> memo_;
  std::vector<std::vector<int32_t>> drafted_;
};

}  // namespace dscale::testing
