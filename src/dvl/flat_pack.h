#pragma once
// Request buckets and the flat-buffer packer (paper Eq. bucketselect, Eq. offset/packmap and
// Algorithm 1 lines 10–15) into a bucket's fixed-address StepBatch (core/step_batch.h).
//
// N live requests run in bucket N_bs = min{b ∈ B : b ≥ N}, whose BucketStep is allocated once
// and never resized, so a captured graph can replay against it. Packing copies row j < k_i of
// request i's block to row offset_i + j (token, position, KV slot), then writes sentinels
// (k_i = 0, offset_i = M_live for N ≤ i < N_bs) and tail placeholders (token 0, position 0,
// request 0's anchor slot, owner −1) in rows M_live ≤ s < M_bs: never accepted, and their slot
// is a live request's, so attention over a tail row reads valid memory.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dvl_shapes.h"
#include "core/status.h"
#include "core/step_batch.h"
#include "dvl/budget_allocator.h"

namespace dscale::dvl {

struct BucketConfig {
  std::vector<int32_t> buckets = {1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64};
  int width = kBlockWidth;                      // W: a block's rows, anchor included
  double verify_budget = kDefaultVerifyBudget;  // M = fraction · W · N (see BudgetFromFraction)

  // InvalidArgument unless buckets are nonempty, positive and strictly increasing, the width
  // is ≥ 2 and the fraction is in (0, 1].
  Status Validate() const;
};

// N_bs = min{b ∈ buckets : b ≥ n}; InvalidArgument when n < 1 or n exceeds the largest bucket.
Result<int32_t> SelectBucket(const std::vector<int32_t>& buckets, int64_t n);

// M_bs for bucket n_bs: the budget of n_bs live requests at the config's fraction (W·N_bs/2 by
// default). For any n ≤ n_bs, BudgetFromFraction(n) ≤ BucketCapacity(n_bs).
int64_t BucketCapacity(const BucketConfig& config, int32_t bucket);

// One bucket's fixed-address verification step: the packed StepBatch (M_bs rows, N_bs spans)
// and the decision that sized it. Sized at construction and never grown; one step writes it at
// a time (not thread-safe).
class BucketStep {
 public:
  BucketStep(int32_t bucket, int64_t capacity, int width = kBlockWidth);
  BucketStep(const BucketStep&) = delete;
  BucketStep& operator=(const BucketStep&) = delete;
  BucketStep(BucketStep&&) = default;

  int32_t bucket() const { return bucket_; }      // N_bs
  int64_t capacity() const { return capacity_; }  // M_bs
  int width() const { return width_; }            // W

  // The packed rows: rows() = M_live, num_spans() = N live spans; the storage past them holds
  // the sentinel spans (q_len = 0 at q_start = M_live) and the tail placeholders.
  const StepBatch& batch() const { return batch_; }
  StepBatch& batch() { return batch_; }
  // The last pack's lengths [N_bs] and offsets [N_bs + 1] (sentinels: k = 0, offset = M_live),
  // as the device step reads them.
  std::span<const int32_t> k() const { return k_; }
  std::span<const int32_t> offsets() const { return offsets_; }
  // AllocateAndPack's decision state: prefix scores Q [N_bs, W] and seeds k⁽⁰⁾ [N_bs].
  std::span<const float> scores() const { return scores_; }
  std::span<const int32_t> seed() const { return seed_; }

 private:
  friend Status Pack(const StepBatch& blocks, std::span<const int32_t> k, BucketStep* out);
  friend Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget,
                                         const StepBatch& blocks, BucketStep* out);

  int32_t bucket_;
  int64_t capacity_;
  int width_;
  StepBatch batch_;
  std::vector<int32_t> k_, offsets_, seed_;
  std::vector<float> scores_;
};

// Packs the first k_i rows of each span of `blocks` (one span per request: its draft block,
// row 0 the anchor) into `out` (Algorithm 1 lines 10–15): offsets, rows with every logit
// wanted, spans, sentinels and tail. `out`'s tile, causality and capture layers are left as
// they are. InvalidArgument when blocks has no span or more than the bucket, a length is
// outside [1, span rows], or Σk exceeds the capacity. Allocates nothing.
Status Pack(const StepBatch& blocks, std::span<const int32_t> k, BucketStep* out);

// Algorithm 1 end to end into `out`: prefix scores from predictor logits [n, W − 1] into
// scores(), seeds into seed(), budget adjustment to Σk = budget, then Pack. Every span of
// `blocks` must hold W rows. InvalidArgument for a budget outside [n, W·n] or above the
// bucket capacity, or for anything Pack rejects. Allocates nothing. Returns |Δ₀|, the number of
// grow/shrink updates.
Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget, const StepBatch& blocks,
                                BucketStep* out);

// One BucketStep per bucket, each created on first use and kept for the pool's lifetime, so its
// addresses never change. Not thread-safe.
class WorkspacePool {
 public:
  explicit WorkspacePool(BucketConfig config);

  // The step of bucket N_bs(n), created on first use.
  Result<BucketStep*> ForLiveCount(int64_t n);
  // Creates every bucket's workspace now (e.g. before graph capture).
  void CreateAll();

  const BucketConfig& config() const { return config_; }
  int64_t created() const;  // how many workspaces exist

 private:
  BucketConfig config_;
  std::vector<std::unique_ptr<BucketStep>> workspaces_;  // [buckets.size()], lazily filled
};

}  // namespace dscale::dvl
