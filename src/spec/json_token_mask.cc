#include "spec/json_token_mask.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

namespace dscale {

JsonTokenMasks::JsonTokenMasks(int64_t vocab,
                               const std::function<std::string_view(int32_t)>& token_text)
    : vocab_(vocab),
      texts_(static_cast<size_t>(vocab)),
      plain_(static_cast<size_t>((vocab + 63) / 64), 0),
      plain_characters_(static_cast<size_t>(vocab), 0) {
  std::vector<int32_t> with_text, not_plain;
  for (int32_t id = 0; id < vocab; ++id) {
    texts_[id] = std::string(token_text(id));
    if (texts_[id].empty()) continue;
    with_text.push_back(id);
    longest_ = std::max(longest_, texts_[id].size());
    if (JsonGrammar::IsPlainStringText(texts_[id])) {
      plain_[id / 64] |= uint64_t{1} << (id % 64);
      plain_characters_[id] = JsonGrammar::CharactersIn(texts_[id]);
      longest_plain_first_.push_back(id);
    } else {
      not_plain.push_back(id);
    }
  }
  std::stable_sort(
      longest_plain_first_.begin(), longest_plain_first_.end(),
      [&](int32_t a, int32_t b) { return plain_characters_[a] > plain_characters_[b]; });
  all_ = MakeWalk(std::move(with_text));
  not_plain_ = MakeWalk(std::move(not_plain));
}

JsonTokenMasks::Walk JsonTokenMasks::MakeWalk(std::vector<int32_t> ids) const {
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return texts_[a] < texts_[b]; });
  std::vector<int32_t> common_prefix(ids.size(), 0);
  for (size_t i = 1; i < ids.size(); ++i) {
    const std::string& a = texts_[ids[i - 1]];
    const std::string& b = texts_[ids[i]];
    const auto [end, _] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    common_prefix[i] = static_cast<int32_t>(end - a.begin());
  }
  const auto n = static_cast<int32_t>(ids.size());
  std::vector<std::array<int32_t, kSkipDepth>> skip(ids.size());
  for (int32_t i = n - 1; i >= 0; --i) {
    for (size_t d = 0; d < kSkipDepth; ++d) {
      const bool next_shares = i + 1 < n && static_cast<size_t>(common_prefix[i + 1]) > d;
      skip[i][d] = next_shares ? skip[i + 1][d] : i + 1;
    }
  }
  return {
      .ids = std::move(ids), .common_prefix = std::move(common_prefix), .skip = std::move(skip)};
}

JsonGrammar JsonTokenMasks::StateAfter(JsonGrammar start, std::span<const int32_t> tokens) const {
  JsonGrammar state = start;
  for (const int32_t t : tokens) {
    state = Advance(state, t);
    if (state.dead()) break;
  }
  return state;
}

JsonGrammar JsonTokenMasks::Advance(JsonGrammar state, int32_t token) const {
  // Not text: refused, free text too (a stop id ends the output instead).
  if (token < 0 || token >= vocab_ || texts_[token].empty()) return JsonGrammar();
  (void)state.Feed(texts_[token]);
  return state;
}

// Every plain text but those longer than `room`, the longest first: few tokens are long.
std::vector<uint64_t> JsonTokenMasks::PlainTextWithin(int64_t room) const {
  std::vector<uint64_t> bits = plain_;
  for (const int32_t id : longest_plain_first_) {
    if (plain_characters_[id] <= room) break;
    bits[id / 64] &= ~(uint64_t{1} << (id % 64));
  }
  return bits;
}

const JsonTokenMasks::FreeTextSplit& JsonTokenMasks::FreeText(int byte) {
  if (const auto it = free_text_.find(byte); it != free_text_.end()) return it->second;
  FreeTextSplit split{.without = std::vector<uint64_t>(static_cast<size_t>((vocab_ + 63) / 64), 0)};
  std::vector<int32_t> with;
  for (const int32_t id : all_.ids) {
    if (byte >= 0 && texts_[id].find(static_cast<char>(byte)) != std::string::npos) {
      with.push_back(id);
    } else {
      split.without[id / 64] |= uint64_t{1} << (id % 64);
    }
  }
  split.with = MakeWalk(std::move(with));
  return free_text_.emplace(byte, std::move(split)).first->second;
}

const JsonTokenMasks::Walk& JsonTokenMasks::NotPlainOrHolding(int byte) {
  if (const auto it = not_plain_or_holding_.find(byte); it != not_plain_or_holding_.end()) {
    return it->second;
  }
  std::vector<int32_t> ids;
  for (const int32_t id : all_.ids) {
    if ((plain_[id / 64] >> (id % 64) & 1) == 0 ||
        texts_[id].find(static_cast<char>(byte)) != std::string::npos) {
      ids.push_back(id);
    }
  }
  return not_plain_or_holding_.emplace(byte, MakeWalk(std::move(ids))).first->second;
}

std::vector<uint64_t> JsonTokenMasks::Compute(const JsonGrammar& state) {
  // In a string, plain text changes at most a count of characters: those tokens are allowed
  // by their count without a step. In free text, text without the marker's first byte changes
  // nothing.
  const int64_t room = state.plain_text_room();
  const int trigger = state.free_text_trigger();
  const FreeTextSplit* free = trigger != JsonGrammar::kNotFree ? &FreeText(trigger) : nullptr;
  std::vector<uint64_t> bits =
      free != nullptr ? free->without
      : room >= 0     ? PlainTextWithin(room)
                      : std::vector<uint64_t>(static_cast<size_t>((vocab_ + 63) / 64), 0);
  // In a call's value a closer's first byte may begin one: plain text holding it is walked.
  const bool closers = room >= 0 && state.in_call_value();
  if (closers) {
    const std::vector<uint64_t>& without = FreeText(state.closer_lead()).without;
    for (size_t w = 0; w < bits.size(); ++w) bits[w] &= without[w];
  }
  const Walk& walk = free != nullptr ? free->with
                     : closers       ? NotPlainOrHolding(state.closer_lead())
                     : room >= 0     ? not_plain_
                                     : all_;
  // states[k]: after the first k bytes of the current token (valid up to its length); the prefix
  // of length `dead_at` (and every longer one) is refused.
  std::vector<JsonGrammar> states(longest_ + 1);
  states[0] = state;
  size_t dead_at = std::numeric_limits<size_t>::max();
  // Past the tokens under the refused prefix of length dead_at.
  const auto past_refused = [&](size_t i) {
    return dead_at <= kSkipDepth ? static_cast<size_t>(walk.skip[i][dead_at - 1]) : i + 1;
  };
  for (size_t i = 0; i < walk.ids.size();) {
    const auto shared = static_cast<size_t>(walk.common_prefix[i]);
    if (shared >= dead_at) {  // under a refused prefix
      i = past_refused(i);
      continue;
    }
    dead_at = std::numeric_limits<size_t>::max();
    const std::string& text = texts_[walk.ids[i]];
    size_t k = shared;
    for (; k < text.size(); ++k) {
      states[k + 1] = states[k];
      if (!states[k + 1].Feed(static_cast<uint8_t>(text[k]))) break;
    }
    if (k < text.size()) {
      dead_at = k + 1;
      i = past_refused(i);
      continue;
    }
    bits[walk.ids[i] / 64] |= uint64_t{1} << (walk.ids[i] % 64);
    ++i;
  }
  return bits;
}

std::span<const uint64_t> JsonTokenMasks::Allowed(const JsonGrammar& state) {
  std::string key = state.key();
  if (const auto it = masks_.find(key); it != masks_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  lru_.emplace_front(key, Compute(state));
  masks_[std::move(key)] = lru_.begin();
  if (lru_.size() > kMaxCachedStates) {
    masks_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return lru_.front().second;
}

void JsonTokenMasks::Mask(const JsonGrammar& state, std::span<const int64_t> stop_ids,
                          std::span<float> logits) {
  if (state.dead()) return;
  const std::span<const uint64_t> allowed = Allowed(state);
  constexpr float kNever = std::numeric_limits<float>::lowest();
  // A stop id ends the output: only once the value is whole, and then whatever its text.
  stop_logits_.clear();
  for (const int64_t stop : stop_ids) {
    if (stop >= 0 && stop < vocab_) stop_logits_.push_back(logits[stop]);
  }
  // Word by word: most words of a row in a string allow all 64 tokens.
  for (size_t w = 0; w < allowed.size(); ++w) {
    uint64_t refused = ~allowed[w];
    if (w + 1 == allowed.size() && vocab_ % 64 != 0) refused &= (uint64_t{1} << (vocab_ % 64)) - 1;
    while (refused != 0) {
      logits[static_cast<int64_t>(w) * 64 + std::countr_zero(refused)] = kNever;
      refused &= refused - 1;
    }
  }
  size_t k = 0;
  for (const int64_t stop : stop_ids) {
    if (stop >= 0 && stop < vocab_) logits[stop] = state.complete() ? stop_logits_[k++] : kNever;
  }
}

}  // namespace dscale
