#include "kv/recurrent_snapshots.h"

#include "core/check.h"

namespace dscale {

void RecurrentSnapshots::Put(int32_t page, std::span<const float> values) {
  if (capacity_ == 0) return;
  if (const auto it = states_.find(page); it != states_.end()) {
    DSCALE_CHECK(it->second.values.size() == values.size());
    Touch(it->second);
    return;
  }
  if (size() == capacity_) Drop(uses_.front());
  uses_.push_back(page);
  states_.emplace(page, State{.values = {values.begin(), values.end()}, .use = --uses_.end()});
}

std::span<const float> RecurrentSnapshots::Use(int32_t page) {
  const auto it = states_.find(page);
  DSCALE_CHECK_MSG(it != states_.end(), "the page carries no recurrent state");
  Touch(it->second);
  return it->second.values;
}

void RecurrentSnapshots::Drop(int32_t page) {
  const auto it = states_.find(page);
  if (it == states_.end()) return;
  uses_.erase(it->second.use);
  states_.erase(it);
}

void RecurrentSnapshots::Touch(State& state) { uses_.splice(uses_.end(), uses_, state.use); }

}  // namespace dscale
