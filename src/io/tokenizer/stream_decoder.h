#pragma once
// Incremental detokenization for streaming: feed generated ids one at a time and get back
// text that is always valid UTF-8, so a server can send each piece as it comes.
//
// A token may end inside a multi-byte character (emoji and CJK often span two or three
// byte-level tokens). Such a partial character is held back until the tokens that complete
// it arrive. Bytes that can never become a character (a stray continuation byte, a sequence
// cut short by the next token) are emitted as U+FFFD, one per maximal ill-formed
// subsequence, as the reference decoder's lossy UTF-8 conversion does. Concatenating every
// Push and the final Finish gives utf8::ToValidUtf8(tokenizer.Decode(all ids)).
//
// Not thread-safe: one decoder per stream. The tokenizer must outlive it.

#include <cstdint>
#include <string>

#include "core/status.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {})
      : tokenizer_(&tokenizer), options_(options) {}

  // Appends to *out the text that `id` completes (possibly nothing). InvalidArgument, with
  // nothing appended and the state unchanged, when `id` is not a token.
  Status Push(int32_t id, std::string* out);

  // Appends what is held back, a partial character becoming U+FFFD, and resets the decoder.
  void Finish(std::string* out);

  // Bytes held back waiting for the rest of a character (at most 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // the start of an incomplete but so far well-formed character
};

}  // namespace dscale
