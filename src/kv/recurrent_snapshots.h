#pragma once
// Prefix caching for a hybrid target: the recurrent state (kv/recurrent_state.h) after a
// published page's last position, so that a request whose prompt starts with that page's prefix
// starts its linear-attention layers there instead of at position 0. A page's K/V rows are
// small beside such a state (a Qwen3.5-9B state is about 50 MB, as much as 1,600 positions of
// its K/V), so only some pages carry one: at most `capacity` states are kept, the least
// recently used dropped first, and a page evicted from the prefix cache drops its state.
// Not thread-safe (owned by the engine thread).

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/huge_pages.h"

namespace dscale {

class RecurrentSnapshots {
 public:
  explicit RecurrentSnapshots(int32_t capacity = 0) : capacity_(capacity) {}

  int32_t capacity() const { return capacity_; }
  int32_t size() const { return static_cast<int32_t>(states_.size()); }
  // Whether `page` carries a state (no change to the order of use).
  bool Has(int32_t page) const { return states_.contains(page); }
  // `page` carries `values` from now on (kept as they are if it carries one already: the same
  // prefix gives the same state); the least recently used state goes beyond the capacity.
  void Put(int32_t page, std::span<const float> values);
  // The state `page` carries (CHECKed), now the most recently used.
  std::span<const float> Use(int32_t page);
  // `page` no longer stands for its prefix (evicted): its state, if any, goes.
  void Drop(int32_t page);

 private:
  struct State {
    HugePageVector<float> values;
    std::list<int32_t>::iterator use;  // in uses_
  };
  void Touch(State& state);

  int32_t capacity_;
  std::unordered_map<int32_t, State> states_;  // by page
  std::list<int32_t> uses_;                    // pages with a state, least recently used first
};

}  // namespace dscale
