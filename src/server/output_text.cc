#include "server/output_text.h"

#include <algorithm>

#include "io/tokenizer/utf8.h"

namespace dscale::server {

std::string OutputTextOf(const Tokenizer& tokenizer, std::span<const int32_t> ids) {
  std::string bytes;
  for (const int32_t id : ids) {
    const std::string* token = tokenizer.TokenBytes(id);
    if (token != nullptr && !tokenizer.IsSpecial(id)) bytes += *token;
  }
  return utf8::ToValidUtf8(bytes);
}

std::string_view OutputTokenText(const Tokenizer& tokenizer, int32_t id) {
  const std::string* token = tokenizer.TokenBytes(id);
  return token != nullptr && !tokenizer.IsSpecial(id) ? std::string_view(*token)
                                                      : std::string_view();
}

size_t HeldBackForStops(std::string_view text, std::span<const std::string> stops) {
  size_t longest = 0;
  for (const std::string& stop : stops) {
    const size_t max_len = std::min(text.size(), stop.size() - 1);
    for (size_t len = max_len; len > longest; --len) {
      if (text.substr(text.size() - len) == std::string_view(stop).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

OutputText::OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer),
      decoder_(tokenizer, {.skip_special = true}),
      stops_(std::move(stop_strings)) {}

OutputText::Piece OutputText::Push(std::span<const int32_t> ids) {
  if (stopped_) return {.reported = std::vector<bool>(ids.size(), false)};
  for (const int32_t id : ids) {
    // An id that is not a token (a model vocabulary can be larger than the tokenizer's)
    // contributes nothing.
    const std::string_view raw = OutputTokenText(tokenizer_, id);
    const int64_t decoded_before = decoded_;
    const size_t before = pending_.size();
    (void)decoder_.Push(id, &pending_);
    decoded_ += static_cast<int64_t>(pending_.size() - before);
    // The token's own bytes end the decoded text but for those the decoder still holds; what
    // precedes them (an earlier token's character, completed or replaced by U+FFFD, whose
    // length differs from the bytes it replaces) is not the token's. Exact for well-formed
    // bytes; within the token's own text otherwise.
    const auto own = static_cast<int64_t>(raw.size()) -
                     static_cast<int64_t>(std::min(decoder_.pending_bytes(), raw.size()));
    held_.push_back({.start = std::max(decoded_ - own, decoded_before), .has_text = !raw.empty()});
  }
  return Release(/*final=*/false);
}

OutputText::Piece OutputText::Finish() {
  if (stopped_) return {.reported = Decide(/*final=*/true)};
  const size_t before = pending_.size();
  decoder_.Finish(&pending_);
  decoded_ += static_cast<int64_t>(pending_.size() - before);
  return Release(/*final=*/true);
}

OutputText::Piece OutputText::Release(bool final) {
  size_t cut = std::string::npos;
  const std::string* first_stop = nullptr;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at < cut) {
      cut = at;
      first_stop = &stop;
    }
  }
  Piece piece;
  if (cut != std::string::npos) {
    piece.text = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
    stop_string_ = *first_stop;
  } else {
    const size_t keep = final ? 0 : HeldBackForStops(pending_, stops_);
    piece.text = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
  }
  sent_ += static_cast<int64_t>(piece.text.size());
  piece.reported = Decide(final || stopped_);
  return piece;
}

std::vector<bool> OutputText::Decide(bool final) {
  std::vector<bool> verdicts;
  while (!held_.empty()) {
    const HeldToken& t = held_.front();
    const bool reported = t.has_text && t.start < sent_;
    if (!reported && t.has_text && !final) break;  // its text may still be sent
    verdicts.push_back(reported);
    held_.pop_front();
  }
  return verdicts;
}

}  // namespace dscale::server
