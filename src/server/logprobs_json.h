#pragma once
// The `logprobs` of OpenAI responses, from the engine's TokenLogprobs (spec/logprobs.h).
//
//   /v1/completions       {"tokens": [s], "token_logprobs": [f], "top_logprobs": [{s: f}],
//                          "text_offset": [n]}
//   /v1/chat/completions  {"content": [{"token": s, "logprob": f, "bytes": [b],
//                                       "top_logprobs": [{"token", "logprob", "bytes"}]}]}
//
// A token's string is its text when its bytes are well-formed UTF-8 and "bytes:\xNN…" otherwise
// (a byte-level token may end inside a character; chat's `bytes` carry the exact bytes).
// text_offset counts characters (code points) of the completion's text before the token: the
// sum of the earlier tokens' character counts. Only tokens whose text starts in the returned text
// are listed (OutputText decides which): no end-of-turn token, nothing of a stop string.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/tokenizer/tokenizer.h"
#include "spec/logprobs.h"

namespace dscale::server {

// One output token's log-probabilities with the bytes of each token named.
struct LogprobEntry {
  std::string bytes;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // (bytes, logprob), most likely first
};

// Names the tokens of `logprobs` through `tokenizer` (an id that is not a token has no bytes).
std::vector<LogprobEntry> LogprobEntries(std::span<const TokenLogprobs> logprobs,
                                         const Tokenizer& tokenizer);

// The token string of `bytes` (see the top of this file).
std::string TokenString(const std::string& bytes);

// Characters (code points) the entries' tokens add to the text: how far they move text_offset.
int64_t TextLength(std::span<const LogprobEntry> entries);

// Members in the order written: a completion's top_logprobs object lists its tokens most likely
// first, as OpenAI's does.
using ResponseJson = nlohmann::ordered_json;

ResponseJson ChatLogprobsJson(std::span<const LogprobEntry> entries);
// `text_offset`: the offset of the first entry's token.
ResponseJson CompletionLogprobsJson(std::span<const LogprobEntry> entries, int64_t text_offset);

}  // namespace dscale::server
