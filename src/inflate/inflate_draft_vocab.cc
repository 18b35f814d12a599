#include "inflate/inflate_draft_vocab.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace dscale {

DraftVocab InflateDraftVocab(const DraftVocab& small, const InflatePlan& plan) {
  const int64_t v = plan.small_target.vocab_size, large_v = plan.large_target.vocab_size;
  DSCALE_CHECK(small.target_vocab_size == v);
  DraftVocab large{.target_vocab_size = large_v, .token_ids = {}};
  std::vector<int32_t> pads;
  for (int64_t id = 0; id < large_v; ++id) {
    const int64_t source = plan.vocab[static_cast<size_t>(id)];
    if (source < 0) {
      pads.push_back(static_cast<int32_t>(id));
    } else if (std::binary_search(small.token_ids.begin(), small.token_ids.end(), source)) {
      large.token_ids.push_back(static_cast<int32_t>(id));
    }
  }
  const auto share = static_cast<int64_t>(
      std::llround(static_cast<double>(small.size()) * static_cast<double>(large_v) / double(v)));
  const int64_t pad_count =
      std::clamp<int64_t>(share - small.size(), 0, static_cast<int64_t>(pads.size()));
  // Real ids lie below every pad id (the plan's map is a prefix), so the list stays sorted.
  large.token_ids.insert(large.token_ids.end(), pads.begin(), pads.begin() + pad_count);
  DSCALE_CHECK(std::is_sorted(large.token_ids.begin(), large.token_ids.end()));
  return large;
}

}  // namespace dscale
