#include "server/reasoning_stream.h"

#include <span>

#include "core/check.h"
#include "server/output_text.h"

namespace dscale::server {
namespace {

// The length of the run of newlines that ends `text`.
size_t TrailingNewlines(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && text[text.size() - 1 - n] == '\n') ++n;
  return n;
}

}  // namespace

ReasoningStream::ReasoningStream(const ChatFormatTraits& format)
    : open_(format.reasoning_open),
      close_(format.reasoning_close),
      state_(format.prompt_opens_reasoning ? State::kReasoning : State::kStart) {
  DSCALE_CHECK_MSG(format.has_reasoning(), "the chat format has no reasoning block");
}

ReasoningStream::Piece ReasoningStream::Push(std::string_view text) {
  Piece piece;
  pending_ += text;
  Scan(/*final=*/false, &piece);
  return piece;
}

ReasoningStream::Piece ReasoningStream::Finish() {
  Piece piece;
  Scan(/*final=*/true, &piece);
  return piece;
}

void ReasoningStream::Scan(bool final, Piece* piece) {
  while (true) {
    switch (state_) {
      case State::kStart:
        if (pending_.starts_with(open_)) {
          pending_.erase(0, open_.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && open_.starts_with(pending_)) return;  // could still be "<think>"
        state_ = State::kAnswer;
        continue;
      case State::kReasoning: {
        if (!reasoning_begun_) {
          pending_.erase(0, pending_.find_first_not_of('\n'));
          if (pending_.empty()) return;
          reasoning_begun_ = true;
        }
        const size_t close = pending_.find(close_);
        if (close != std::string::npos) {
          std::string_view reasoning = std::string_view(pending_).substr(0, close);
          reasoning.remove_suffix(TrailingNewlines(reasoning));
          piece->reasoning += reasoning;
          pending_.erase(0, close + close_.size());
          state_ = State::kAnswerStart;
          continue;
        }
        // Held: what could begin "</think>", and the newlines before it that it would drop.
        const std::string closing(close_);
        size_t held = final ? 0 : HeldBackForStops(pending_, std::span(&closing, 1));
        const std::string_view before =
            std::string_view(pending_).substr(0, pending_.size() - held);
        held += TrailingNewlines(before);
        piece->reasoning += std::string_view(pending_).substr(0, pending_.size() - held);
        pending_.erase(0, pending_.size() - held);
        if (final) pending_.clear();  // newlines at the end of unfinished reasoning
        return;
      }
      case State::kAnswerStart:
        pending_.erase(0, pending_.find_first_not_of('\n'));
        if (pending_.empty()) return;
        state_ = State::kAnswer;
        continue;
      case State::kAnswer:
        piece->answer += pending_;
        pending_.clear();
        return;
    }
  }
}

}  // namespace dscale::server
