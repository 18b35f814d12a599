#pragma once
// The text of one request's output as it is generated: token ids in, UTF-8 pieces out, with
// OpenAI's stop-string semantics (the text ends before the first stop string, which is not
// sent). Streaming never sends bytes that are later taken back:
//   - a token that ends inside a character is held back until the character completes
//     (StreamDecoder);
//   - text that could be the start of a stop string is held back until it no longer can.
// Special tokens (e.g. "<|im_end|>") are left out of the text; ids that are not tokens give
// no text. Each piece says which tokens it reports (their log-probabilities go with it): a token
// is reported when its text starts inside the text sent, so a token that adds no text (an end of
// turn), and the tokens of a stop string and after it, are never reported, and a token's report
// waits with its text. Not thread-safe: one per request, on the engine thread.

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "io/tokenizer/stream_decoder.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale::server {

class OutputText {
 public:
  // What may be sent now: text (possibly empty), and the verdicts on the oldest tokens not yet
  // decided, in order: true for a token reported with this text, false for one never reported.
  struct Piece {
    std::string text;
    std::vector<bool> reported;
  };

  OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Appends new output tokens.
  Piece Push(std::span<const int32_t> ids);
  // The output ended: the rest of the text (held-back bytes, cut at a stop string), and a
  // verdict on every token still undecided.
  Piece Finish();

  // A stop string was found; nothing more is sent.
  bool stopped() const { return stopped_; }
  // The one found (the first found as the text arrives; the earliest in it where several are).
  const std::string& stop_string() const { return stop_string_; }

 private:
  // A token whose verdict waits: where its text starts in the decoded stream, and whether it
  // has any.
  struct HeldToken {
    int64_t start = 0;
    bool has_text = false;
  };

  // Moves what is safe from pending_ out, cutting at a stop string when one appears, and decides
  // the held tokens that it settles.
  Piece Release(bool final);
  // Verdicts for the held tokens, oldest first, as far as `final` or the text sent settles them.
  std::vector<bool> Decide(bool final);

  const Tokenizer& tokenizer_;
  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;  // decoded but not yet sent
  int64_t decoded_ = 0;  // bytes decoded (sent + pending_)
  int64_t sent_ = 0;     // bytes sent
  std::deque<HeldToken> held_;
  bool stopped_ = false;
  std::string stop_string_;
};

// The whole text of `ids` as OutputText spells it (no stop strings): special tokens and ids that
// are not tokens left out, ill-formed UTF-8 replaced.
std::string OutputTextOf(const Tokenizer& tokenizer, std::span<const int32_t> ids);

// The bytes token `id` adds to that text before ill-formed UTF-8 is replaced: none for a special
// token or an id that is not a token. The engine's stop-string check reads it
// (EngineConfig::token_text).
std::string_view OutputTokenText(const Tokenizer& tokenizer, int32_t id);

// The length of the longest suffix of `text` that is a proper prefix of one of `stops`.
size_t HeldBackForStops(std::string_view text, std::span<const std::string> stops);

}  // namespace dscale::server
