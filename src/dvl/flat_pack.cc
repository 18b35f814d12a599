#include "dvl/flat_pack.h"

#include <algorithm>
#include <string>
#include <utility>

namespace dscale::dvl {

Status BucketConfig::Validate() const {
  if (buckets.empty()) return InvalidArgument("bucket list is empty");
  for (size_t b = 0; b < buckets.size(); ++b) {
    if (buckets[b] < 1 || (b > 0 && buckets[b] <= buckets[b - 1])) {
      return InvalidArgument("bucket list must be positive and strictly increasing; entry " +
                             std::to_string(b) + " is " + std::to_string(buckets[b]));
    }
  }
  if (width < 2) return InvalidArgument("block width must be >= 2, got " + std::to_string(width));
  return BudgetFromFraction(1, width, verify_budget).status();
}

Result<int32_t> SelectBucket(const std::vector<int32_t>& buckets, int64_t n) {
  if (n < 1) return InvalidArgument("live request count must be >= 1, got " + std::to_string(n));
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  if (it == buckets.end()) {
    return InvalidArgument(
        std::to_string(n) + " live requests exceed the largest bucket (" +
        (buckets.empty() ? std::string("none") : std::to_string(buckets.back())) + ")");
  }
  return *it;
}

int64_t BucketCapacity(const BucketConfig& config, int32_t bucket) {
  Result<int64_t> capacity = BudgetFromFraction(bucket, config.width, config.verify_budget);
  DSCALE_CHECK_MSG(capacity.ok(), "BucketCapacity on an invalid BucketConfig");
  return *capacity;
}

PackWorkspace::PackWorkspace(int32_t bucket, int64_t capacity, int width)
    : bucket_(bucket),
      capacity_(capacity),
      width_(width),
      tokens_(static_cast<size_t>(capacity)),
      positions_(static_cast<size_t>(capacity)),
      kv_slots_(static_cast<size_t>(capacity)),
      k_(static_cast<size_t>(bucket)),
      offsets_(static_cast<size_t>(bucket) + 1),
      seed_(static_cast<size_t>(bucket)),
      scores_(static_cast<size_t>(bucket) * width) {
  DSCALE_CHECK(bucket >= 1 && capacity >= bucket && width >= 2);
}

namespace {

Status CheckPackInput(const PackInput& in, const PackWorkspace& ws) {
  if (in.n < 1 || in.n > ws.bucket()) {
    return InvalidArgument("live count " + std::to_string(in.n) + " does not fit bucket " +
                           std::to_string(ws.bucket()));
  }
  const size_t rows = static_cast<size_t>(in.n) * in.width;
  if (in.tokens.size() != rows || in.positions.size() != rows || in.kv_slots.size() != rows ||
      in.k.size() != static_cast<size_t>(in.n)) {
    return InvalidArgument("pack fields must be [n, width] = [" + std::to_string(in.n) + ", " +
                           std::to_string(in.width) + "] and k must have n entries");
  }
  int64_t total = 0;
  for (int64_t i = 0; i < in.n; ++i) {
    if (in.k[i] < 1 || in.k[i] > in.width) {
      return InvalidArgument("k[" + std::to_string(i) + "] = " + std::to_string(in.k[i]) +
                             " is outside [1, " + std::to_string(in.width) + "]");
    }
    total += in.k[i];
  }
  if (total > ws.capacity()) {
    return InvalidArgument("sum of k (" + std::to_string(total) + ") exceeds the bucket capacity " +
                           std::to_string(ws.capacity()));
  }
  return Status::Ok();
}

}  // namespace

Status Pack(const PackInput& in, PackWorkspace* ws) {
  DSCALE_RETURN_IF_ERROR(CheckPackInput(in, *ws));
  const int64_t n = in.n;
  ws->offsets_[0] = 0;
  for (int64_t i = 0; i < n; ++i) {
    ws->k_[i] = in.k[i];
    ws->offsets_[i + 1] = ws->offsets_[i] + in.k[i];
  }
  const int32_t live_rows = ws->offsets_[n];
  for (int64_t i = 0; i < n; ++i) {
    const size_t src = static_cast<size_t>(i) * in.width;
    const size_t dst = static_cast<size_t>(ws->offsets_[i]);
    const size_t len = static_cast<size_t>(in.k[i]);
    std::copy_n(in.tokens.begin() + src, len, ws->tokens_.begin() + dst);
    std::copy_n(in.positions.begin() + src, len, ws->positions_.begin() + dst);
    std::copy_n(in.kv_slots.begin() + src, len, ws->kv_slots_.begin() + dst);
  }
  // Sentinels: inactive requests have no rows and start (and end) at M_live.
  for (int64_t i = n; i < ws->bucket_; ++i) {
    ws->k_[i] = 0;
    ws->offsets_[i + 1] = live_rows;
  }
  // Tail placeholders: token 0 at position 0, reading request 0's anchor slot.
  std::fill(ws->tokens_.begin() + live_rows, ws->tokens_.end(), 0);
  std::fill(ws->positions_.begin() + live_rows, ws->positions_.end(), 0);
  std::fill(ws->kv_slots_.begin() + live_rows, ws->kv_slots_.end(), in.kv_slots[0]);
  ws->live_count_ = static_cast<int32_t>(n);
  ws->live_rows_ = live_rows;
  return Status::Ok();
}

Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget, const PackInput& in,
                                PackWorkspace* ws) {
  if (in.n < 1 || in.n > ws->bucket() || in.width != ws->width()) {
    return InvalidArgument("live count " + std::to_string(in.n) + " and width " +
                           std::to_string(in.width) + " do not fit bucket " +
                           std::to_string(ws->bucket()) + " of width " +
                           std::to_string(ws->width()));
  }
  DSCALE_RETURN_IF_ERROR(CheckBudget(in.n, in.width, budget));
  if (budget > ws->capacity()) {
    return InvalidArgument("verify budget " + std::to_string(budget) +
                           " exceeds the bucket capacity " + std::to_string(ws->capacity()));
  }
  float* q = ws->scores_.data();
  PrefixScoresFromLogits(pred_logits, in.n, in.width, q);
  const int64_t updates =
      AllocateInto(q, in.n, in.width, budget, ws->seed_.data(), ws->k_.data(), ws->offsets_.data());
  PackInput with_k = in;
  with_k.k = std::span<const int32_t>(ws->k_.data(), static_cast<size_t>(in.n));
  DSCALE_RETURN_IF_ERROR(Pack(with_k, ws));
  return updates;
}

WorkspacePool::WorkspacePool(BucketConfig config) : config_(std::move(config)) {
  DSCALE_CHECK_MSG(config_.Validate().ok(), "WorkspacePool needs a validated BucketConfig");
  workspaces_.resize(config_.buckets.size());
}

Result<PackWorkspace*> WorkspacePool::ForLiveCount(int64_t n) {
  DSCALE_ASSIGN_OR_RETURN(const int32_t bucket, SelectBucket(config_.buckets, n));
  const size_t index =
      static_cast<size_t>(std::lower_bound(config_.buckets.begin(), config_.buckets.end(), bucket) -
                          config_.buckets.begin());
  if (!workspaces_[index]) {
    workspaces_[index] =
        std::make_unique<PackWorkspace>(bucket, BucketCapacity(config_, bucket), config_.width);
  }
  return workspaces_[index].get();
}

void WorkspacePool::CreateAll() {
  for (const int32_t bucket : config_.buckets) {
    DSCALE_CHECK(ForLiveCount(bucket).ok());
  }
}

int64_t WorkspacePool::created() const {
  return std::count_if(workspaces_.begin(), workspaces_.end(),
                       [](const auto& ws) { return ws != nullptr; });
}

}  // namespace dscale::dvl
