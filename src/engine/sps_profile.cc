#include "engine/sps_profile.h"

#include <algorithm>
#include <chrono>

#include "core/step_batch.h"
#include "kv/paged_kv_cache.h"

namespace dscale {
namespace {

constexpr int32_t kPageSize = 16;

// Median seconds of `repeats` forwards of `batch` after one warm-up.
Result<double> MedianForwardSeconds(TargetModel& target, const StepBatch& batch,
                                    PagedKvCache& cache, int repeats) {
  ForwardOutput out;
  std::vector<double> seconds;
  for (int i = 0; i <= repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    DSCALE_RETURN_IF_ERROR(target.Forward(batch, cache, &out));
    if (i > 0) {
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

std::vector<int64_t> SpsProbeSizes(int64_t max_tokens) {
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= max_tokens; b += b < 32 ? 1 : std::max<int64_t>(1, b / 8)) {
    sizes.push_back(b);
  }
  if (sizes.back() != max_tokens) sizes.push_back(max_tokens);
  return sizes;
}

Result<budget::SpsTable> ProfileStepsPerSecond(TargetModel& target, const SpsProfileOptions& o) {
  if (o.max_tokens < 1 || o.block < 1 || o.context < 0 || o.repeats < 1) {
    return InvalidArgument("SPS profile: max_tokens, block and repeats must be >= 1, context >= 0");
  }
  const int32_t requests = static_cast<int32_t>((o.max_tokens + o.block - 1) / o.block);
  const int32_t per_request = o.context + o.block;
  const int32_t pages = requests * ((per_request + kPageSize - 1) / kPageSize);
  PagedKvCache cache(target.KvShape(kPageSize, pages));
  std::vector<int32_t> seqs;
  for (int32_t r = 0; r < requests; ++r) {
    seqs.push_back(cache.AddSequence());
    DSCALE_RETURN_IF_ERROR(cache.Reserve(seqs.back(), per_request));
  }
  const std::vector<int32_t> tokens(static_cast<size_t>(o.block), 0);
  budget::SpsTable table{.context = o.context, .target = "profiled at start-up"};
  StepBatch batch;
  batch.tile_rows = o.block <= 16 ? 16 : 128;
  batch.capture_layers = o.capture_layers;
  for (const int64_t b : SpsProbeSizes(o.max_tokens)) {
    batch.Clear();
    for (int64_t left = b, r = 0; left > 0; left -= o.block, ++r) {
      const auto rows = static_cast<size_t>(std::min<int64_t>(left, o.block));
      AddRequestRows(batch, seqs[static_cast<size_t>(r)], o.context, std::span(tokens).first(rows),
                     cache, /*all_logits=*/true);
    }
    DSCALE_ASSIGN_OR_RETURN(const double seconds,
                            MedianForwardSeconds(target, batch, cache, o.repeats));
    table.tokens.push_back(b);
    table.steps_per_second.push_back(1.0 / std::max(seconds, 1e-9));
  }
  return table;
}

}  // namespace dscale
