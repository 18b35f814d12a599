#pragma once
// Request buckets and the flat-buffer packer (paper Eq. bucketselect, Eq. offset/packmap and
// Algorithm 1 lines 10–15).
//
// N live requests run in bucket N_bs = min{b ∈ B : b ≥ N}. Each bucket owns one fixed-address
// PackWorkspace whose arrays are allocated once, at creation, and never resized: that is what
// lets a captured graph replay against them. Packing writes
//   field[offset_i + j] = field_i[j],   0 ≤ j < k_i,
// for tokens, positions and KV slots with the same row mapping; then sentinels
//   k_i = 0 and offset_i = M_live  for N ≤ i < N_bs (and offset_{N_bs} = M_live),
// and tail placeholders (token 0, position 0, KV slot = request 0's first slot) in rows
// M_live ≤ s < M_bs. Tail rows are never accepted; the placeholder slot is a real slot of a
// live request so attention over a tail row reads valid memory.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dvl_shapes.h"
#include "core/status.h"
#include "dvl/budget_allocator.h"

namespace dscale::dvl {

struct BucketConfig {
  std::vector<int32_t> buckets = {1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64};
  int width = kBlockWidth;                      // W
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

// One step's draft blocks. Each per-request field is [n, width] row-major: row j = 0 is the
// anchor, rows 1..width−1 the draft positions in order.
struct PackInput {
  int64_t n = 0;
  int width = kBlockWidth;
  std::span<const int32_t> tokens;     // [n, width]
  std::span<const int32_t> positions;  // [n, width]
  std::span<const int32_t> kv_slots;   // [n, width]
  std::span<const int32_t> k;          // [n] lengths from the allocator, 1 ≤ k_i ≤ width
};

// The fixed-address verification buffer of one bucket. Arrays are sized at construction and
// never reallocated. Not thread-safe; one step writes it at a time.
class PackWorkspace {
 public:
  PackWorkspace(int32_t bucket, int64_t capacity, int width = kBlockWidth);
  PackWorkspace(const PackWorkspace&) = delete;
  PackWorkspace& operator=(const PackWorkspace&) = delete;

  int32_t bucket() const { return bucket_; }          // N_bs
  int64_t capacity() const { return capacity_; }      // M_bs
  int32_t live_count() const { return live_count_; }  // N of the last pack
  int64_t live_rows() const { return live_rows_; }    // M_live = Σ k of the last pack
  int width() const { return width_; }                // W

  std::span<int32_t> tokens() { return tokens_; }        // [M_bs]
  std::span<int32_t> positions() { return positions_; }  // [M_bs]
  std::span<int32_t> kv_slots() { return kv_slots_; }    // [M_bs]
  std::span<int32_t> k() { return k_; }                  // [N_bs]
  std::span<int32_t> offsets() { return offsets_; }      // [N_bs + 1]
  // Decision state of AllocateAndPack: prefix scores Q and seeds k⁽⁰⁾ of the live requests.
  std::span<float> scores() { return scores_; }  // [N_bs, W]
  std::span<int32_t> seed() { return seed_; }    // [N_bs]
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> positions() const { return positions_; }
  std::span<const int32_t> kv_slots() const { return kv_slots_; }
  std::span<const int32_t> k() const { return k_; }
  std::span<const int32_t> offsets() const { return offsets_; }
  std::span<const float> scores() const { return scores_; }
  std::span<const int32_t> seed() const { return seed_; }

 private:
  friend Status Pack(const PackInput& in, PackWorkspace* ws);
  friend Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget,
                                         const PackInput& in, PackWorkspace* ws);

  // Algorithm 1 end to end into `ws`: prefix scores from predictor logits [n, W − 1] into
  // ws->scores(), seeds into ws->seed(), budget adjustment to Σk = budget, then Pack. `in.k` is
  // ignored (the lengths come from the allocator). InvalidArgument for a budget outside
  // [n, W·n] or above the bucket capacity, or for anything Pack rejects. Allocates nothing.
  // Returns the number of grow/shrink updates, |Δ₀|.
  Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget, const PackInput& in,
                                  PackWorkspace* ws);

  int32_t bucket_;
  int64_t capacity_;
  int width_;
  int32_t live_count_ = 0;
  int64_t live_rows_ = 0;
  std::vector<int32_t> tokens_, positions_, kv_slots_, k_, offsets_, seed_;
  std::vector<float> scores_;
};

// Packs `in` into `ws` (Algorithm 1 lines 10–15): offsets, rows, sentinels and tail.
// InvalidArgument when n is 0 or exceeds the bucket, a length is out of [1, width], Σk exceeds
// the capacity, or a field has the wrong size. Allocates nothing.
Status Pack(const PackInput& in, PackWorkspace* ws);

// Algorithm 1 end to end into `ws`: prefix scores from predictor logits [n, W − 1] into
// ws->scores(), seeds into ws->seed(), budget adjustment to Σk = budget, then Pack. `in.k` is
// ignored (the lengths come from the allocator). InvalidArgument for a budget outside
// [n, W·n] or above the bucket capacity, or for anything Pack rejects. Allocates nothing.
// Returns the number of grow/shrink updates, |Δ₀|.
Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget, const PackInput& in,
                                PackWorkspace* ws);

// One workspace per bucket, each created on first use and kept for the pool's lifetime, so its
// addresses never change. Not thread-safe.
class WorkspacePool {
 public:
  explicit WorkspacePool(BucketConfig config);

  // The workspace of bucket N_bs(n), created on first use.
  Result<PackWorkspace*> ForLiveCount(int64_t n);
  // Creates every bucket's workspace now (e.g. before graph capture).
  void CreateAll();

  const BucketConfig& config() const { return config_; }
  int64_t created() const;  // how many workspaces exist

 private:
  BucketConfig config_;
  std::vector<std::unique_ptr<PackWorkspace>> workspaces_;  // [buckets.size()], lazily filled
};

}  // namespace dscale::dvl
