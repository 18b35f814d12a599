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
    : decoder_(tokenizer, {.skip_special = true}), stops_(std::move(stop_strings)) {}

std::string OutputText::Push(std::span<const int32_t> ids) {
  if (stopped_) return {};
  for (const int32_t id : ids) {
    // An id that is not a token (a model vocabulary can be larger than the tokenizer's)
    // contributes nothing.
    (void)decoder_.Push(id, &pending_);
  }
  return Release(/*final=*/false);
}

std::string OutputText::Finish() {
  if (stopped_) return {};
  decoder_.Finish(&pending_);
  return Release(/*final=*/true);
}

std::string OutputText::Release(bool final) {
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) cut = std::min(cut, pending_.find(stop));
  std::string out;
  if (cut != std::string::npos) {
    out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
    return out;
  }
  const size_t keep = final ? 0 : HeldBackForStops(pending_, stops_);
  out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

}  // namespace dscale::server
