#include "spec/json_token_mask.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace dscale {

JsonTokenMasks::JsonTokenMasks(int64_t vocab,
                               const std::function<std::string_view(int32_t)>& token_text)
    : vocab_(vocab), texts_(static_cast<size_t>(vocab)) {
  for (int32_t id = 0; id < vocab; ++id) {
    texts_[id] = std::string(token_text(id));
    if (!texts_[id].empty()) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(),
            [&](int32_t a, int32_t b) { return texts_[a] < texts_[b]; });
  common_prefix_.resize(sorted_.size(), 0);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = texts_[sorted_[i - 1]];
    const std::string& b = texts_[sorted_[i]];
    const auto [end, _] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    common_prefix_[i] = static_cast<int32_t>(end - a.begin());
  }
}

JsonObjectGrammar JsonTokenMasks::StateAfter(std::span<const int32_t> tokens) const {
  JsonObjectGrammar state;
  for (const int32_t t : tokens) {
    state = Advance(state, t);
    if (state.dead()) break;
  }
  return state;
}

JsonObjectGrammar JsonTokenMasks::Advance(JsonObjectGrammar state, int32_t token) const {
  if (token < 0 || token >= vocab_ || texts_[token].empty()) {
    (void)state.Feed(uint8_t{0});  // not text: refused (a stop id ends the output instead)
    return state;
  }
  (void)state.Feed(texts_[token]);
  return state;
}

std::vector<uint64_t> JsonTokenMasks::Compute(const JsonObjectGrammar& state) const {
  std::vector<uint64_t> bits(static_cast<size_t>((vocab_ + 63) / 64), 0);
  // states[k]: after the first k bytes of the current token; the prefix of length `dead_at`
  // (and every longer one) is refused.
  std::vector<JsonObjectGrammar> states = {state};
  size_t dead_at = std::numeric_limits<size_t>::max();
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const auto shared = static_cast<size_t>(common_prefix_[i]);
    if (shared >= dead_at) continue;  // under a refused prefix
    dead_at = std::numeric_limits<size_t>::max();
    states.resize(shared + 1);
    const std::string& text = texts_[sorted_[i]];
    bool alive = true;
    for (size_t k = shared; k < text.size(); ++k) {
      JsonObjectGrammar next = states[k];
      if (!next.Feed(static_cast<uint8_t>(text[k]))) {
        dead_at = k + 1;
        alive = false;
        break;
      }
      states.push_back(next);
    }
    if (alive) bits[sorted_[i] / 64] |= uint64_t{1} << (sorted_[i] % 64);
  }
  return bits;
}

std::span<const uint64_t> JsonTokenMasks::Allowed(const JsonObjectGrammar& state) {
  const JsonObjectGrammar::Key key = state.key();
  if (const auto it = masks_.find(key); it != masks_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(key, Compute(state));
  masks_[key] = lru_.begin();
  if (lru_.size() > kMaxCachedStates) {
    masks_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return lru_.front().second;
}

void JsonTokenMasks::Mask(const JsonObjectGrammar& state, std::span<const int64_t> stop_ids,
                          std::span<float> logits) {
  if (state.dead()) return;
  const std::span<const uint64_t> allowed = Allowed(state);
  const auto allows = [&](int64_t t) { return ((allowed[t / 64] >> (t % 64)) & 1) != 0; };
  constexpr float kNever = std::numeric_limits<float>::lowest();
  // A stop id ends the output: only once the object is whole, and then whatever its text.
  stop_logits_.clear();
  for (const int64_t stop : stop_ids) {
    if (stop >= 0 && stop < vocab_) stop_logits_.push_back(logits[stop]);
  }
  for (int64_t t = 0; t < vocab_; ++t) {
    if (!allows(t)) logits[t] = kNever;
  }
  size_t k = 0;
  for (const int64_t stop : stop_ids) {
    if (stop >= 0 && stop < vocab_) logits[stop] = state.complete() ? stop_logits_[k++] : kNever;
  }
}

}  // namespace dscale
