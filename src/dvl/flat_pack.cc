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

BucketStep::BucketStep(int32_t bucket, int64_t capacity, int width)
    : bucket_(bucket),
      capacity_(capacity),
      width_(width),
      batch_(static_cast<int32_t>(capacity), bucket),
      k_(static_cast<size_t>(bucket)),
      offsets_(static_cast<size_t>(bucket) + 1),
      seed_(static_cast<size_t>(bucket)),
      scores_(static_cast<size_t>(bucket) * width) {
  DSCALE_CHECK(bucket >= 1 && capacity >= bucket && width >= 2);
}

namespace {

Status CheckPackInput(const StepBatch& blocks, std::span<const int32_t> k, const BucketStep& out) {
  const int32_t n = blocks.num_spans();
  if (n < 1 || n > out.bucket()) {
    return InvalidArgument("live count " + std::to_string(n) + " does not fit bucket " +
                           std::to_string(out.bucket()));
  }
  if (k.size() != static_cast<size_t>(n)) {
    return InvalidArgument("k must have one entry per block (" + std::to_string(n) + ")");
  }
  int64_t total = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t rows = blocks.spans()[i].q_len;
    if (k[i] < 1 || k[i] > rows) {
      return InvalidArgument("k[" + std::to_string(i) + "] = " + std::to_string(k[i]) +
                             " is outside [1, " + std::to_string(rows) + "]");
    }
    total += k[i];
  }
  if (total > out.capacity()) {
    return InvalidArgument("sum of k (" + std::to_string(total) + ") exceeds the bucket capacity " +
                           std::to_string(out.capacity()));
  }
  return Status::Ok();
}

// Copies rows [first, first + count) of `from` to rows [to, to + count) of `out`, owned by span
// `owner`, every one a logit row.
void CopyRows(const StepBatch& from, int32_t first, int32_t count, int32_t to, int32_t owner,
              StepBatch& out) {
  const auto src = static_cast<size_t>(first), dst = static_cast<size_t>(to);
  const auto len = static_cast<size_t>(count);
  std::copy_n(from.tokens().begin() + src, len, out.token_storage().begin() + dst);
  std::copy_n(from.positions().begin() + src, len, out.position_storage().begin() + dst);
  std::copy_n(from.kv_slots().begin() + src, len, out.kv_slot_storage().begin() + dst);
  std::fill_n(out.owner_storage().begin() + dst, len, owner);
  for (int32_t r = to; r < to + count; ++r) out.logit_row_storage()[static_cast<size_t>(r)] = r;
}

// Rows [live_rows, capacity): token 0 at position 0, reading request 0's anchor slot.
void FillTail(int32_t live_rows, int32_t anchor_slot, StepBatch& out) {
  const auto first = static_cast<size_t>(live_rows);
  std::fill(out.token_storage().begin() + first, out.token_storage().end(), 0);
  std::fill(out.position_storage().begin() + first, out.position_storage().end(), 0);
  std::fill(out.kv_slot_storage().begin() + first, out.kv_slot_storage().end(), anchor_slot);
  std::fill(out.owner_storage().begin() + first, out.owner_storage().end(), -1);
}

}  // namespace

Status Pack(const StepBatch& blocks, std::span<const int32_t> k, BucketStep* out) {
  DSCALE_RETURN_IF_ERROR(CheckPackInput(blocks, k, *out));
  const int32_t n = blocks.num_spans();
  StepBatch& batch = out->batch_;
  const std::span<StepSpan> spans = batch.span_storage();
  out->offsets_[0] = 0;
  for (int32_t i = 0; i < n; ++i) {
    const StepSpan& block = blocks.spans()[i];
    const int32_t offset = out->offsets_[i];
    CopyRows(blocks, block.q_start, k[i], offset, i, batch);
    // A block's first row is the request's next token, committed whatever is accepted: a span
    // of it alone is always kept.
    spans[i] = {.q_start = offset,
                .q_len = k[i],
                .ctx_len = block.ctx_len,
                .page_table = block.page_table,
                .seq = block.seq,
                .always_kept = k[i] == 1};
    out->k_[i] = k[i];
    out->offsets_[i + 1] = offset + k[i];
  }
  // Sentinels: inactive requests have no rows and start (and end) at M_live.
  const int32_t live_rows = out->offsets_[n];
  for (int32_t i = n; i < out->bucket_; ++i) {
    spans[i] = {.q_start = live_rows, .q_len = 0, .ctx_len = 0, .page_table = nullptr, .seq = -1};
    out->k_[i] = 0;
    out->offsets_[i + 1] = live_rows;
  }
  FillTail(live_rows, blocks.kv_slots()[0], batch);
  batch.SetLive(live_rows, n, live_rows);
  return Status::Ok();
}

Result<int64_t> AllocateAndPack(const float* pred_logits, int64_t budget, const StepBatch& blocks,
                                BucketStep* out) {
  const int32_t n = blocks.num_spans();
  if (n < 1 || n > out->bucket()) {
    return InvalidArgument("live count " + std::to_string(n) + " does not fit bucket " +
                           std::to_string(out->bucket()));
  }
  for (const StepSpan& block : blocks.spans()) {
    if (block.q_len != out->width()) {
      return InvalidArgument("every block must hold W = " + std::to_string(out->width()) +
                             " rows, got " + std::to_string(block.q_len));
    }
  }
  DSCALE_RETURN_IF_ERROR(CheckBudget(n, out->width(), budget));
  if (budget > out->capacity()) {
    return InvalidArgument("verify budget " + std::to_string(budget) +
                           " exceeds the bucket capacity " + std::to_string(out->capacity()));
  }
  float* q = out->scores_.data();
  PrefixScoresFromLogits(pred_logits, n, out->width(), q);
  const int64_t updates = AllocateInto(q, n, out->width(), budget, out->seed_.data(),
                                       out->k_.data(), out->offsets_.data());
  DSCALE_RETURN_IF_ERROR(Pack(blocks, std::span(out->k_).first(static_cast<size_t>(n)), out));
  return updates;
}

WorkspacePool::WorkspacePool(BucketConfig config) : config_(std::move(config)) {
  DSCALE_CHECK_MSG(config_.Validate().ok(), "WorkspacePool needs a validated BucketConfig");
  workspaces_.resize(config_.buckets.size());
}

Result<BucketStep*> WorkspacePool::ForLiveCount(int64_t n) {
  DSCALE_ASSIGN_OR_RETURN(const int32_t bucket, SelectBucket(config_.buckets, n));
  const size_t index =
      static_cast<size_t>(std::lower_bound(config_.buckets.begin(), config_.buckets.end(), bucket) -
                          config_.buckets.begin());
  if (!workspaces_[index]) {
    workspaces_[index] =
        std::make_unique<BucketStep>(bucket, BucketCapacity(config_, bucket), config_.width);
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
