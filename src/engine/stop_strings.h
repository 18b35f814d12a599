#pragma once
// Stop strings found in a request's output as its tokens are committed, at a cost per token that
// does not grow with the output: only the last (longest stop − 1) bytes of the text so far are
// kept, since a stop string that appears with a new token ends within that token's bytes and
// starts at most that far before them.
//
// The text is the concatenation of each token's bytes (EngineConfig::token_text). Stop strings
// are whole UTF-8 characters, so they are found in those bytes exactly where they stand in the
// text made valid (a partial character never completes a stop string, and bytes replaced as
// ill-formed never belong to one).

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace dscale {

class StopStringScanner {
 public:
  // Appends the bytes one committed token adds to the text. True when the text now contains one
  // of `stops` (non-empty strings; the same list at every call) and did not before this token:
  // the output ends at this token.
  bool Push(std::span<const std::string> stops, std::string_view token_text);

 private:
  std::string tail_;  // the text's last bytes, fewer than the longest stop string
};

}  // namespace dscale
