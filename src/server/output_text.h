#pragma once
// The text of one request's output as it is generated: token ids in, UTF-8 pieces out, with
// OpenAI's stop-string semantics (the text ends before the first stop string, which is not
// sent). Streaming never sends bytes that are later taken back:
//   - a token that ends inside a character is held back until the character completes
//     (StreamDecoder);
//   - text that could be the start of a stop string is held back until it no longer can.
// Special tokens (e.g. "<|im_end|>") are left out of the text; ids that are not tokens give
// no text. Not thread-safe: one per request, on the engine thread.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/tokenizer/stream_decoder.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale::server {

class OutputText {
 public:
  OutputText(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Appends new output tokens; returns the text that may be sent now (possibly empty).
  std::string Push(std::span<const int32_t> ids);
  // The output ended: returns the rest of the text (held-back bytes, cut at a stop string).
  std::string Finish();

  // A stop string was found; nothing more is sent.
  bool stopped() const { return stopped_; }

 private:
  // Moves what is safe from pending_ out, cutting at a stop string when one appears.
  std::string Release(bool final);

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;  // decoded but not yet sent
  bool stopped_ = false;
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
