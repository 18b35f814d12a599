#pragma once
// What a caller submits and what it gets back.

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "spec/logprobs.h"
#include "spec/sampling.h"

namespace dscale {

using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;

inline double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// kError: the request could not be continued (its logits defined no distribution to sample
// from); it ends alone, with RequestResult::error saying why, and the others go on.
enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "cancelled", "error"

// New output tokens of one request, delivered after each step that produced some. Called on the
// engine's thread; must not call back into the engine.
struct TokenEvent {
  RequestId id = 0;
  std::span<const int32_t> new_tokens;
  // One per new token when the request asked for logprobs (GenerationParams::logprobs), else empty.
  std::span<const TokenLogprobs> new_logprobs;
  FinishReason finished = FinishReason::kNone;  // kNone while the request continues
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct GenerationParams {
  int32_t max_tokens = 16;
  SamplingParams sampling;
  std::vector<int64_t> stop_ids;  // generation ends after one of these (it is kept in the output)
  std::vector<std::string> stop_strings;  // ends before the first occurrence (needs a text decoder)
  LogprobsRequest
      logprobs;             // the target's log-probabilities of each output token (spec/logprobs.h)
  TokenCallback on_tokens;  // optional streaming
  // The client request this one is a choice of (the server's n choices share one); 0: its own.
  // A group's requests run at most ⌈max_running / 2⌉ at once (Engine::Admit).
  uint64_t group = 0;
};

struct RequestResult {
  RequestId id = 0;
  std::vector<int32_t> output_ids;
  std::vector<TokenLogprobs> logprobs;  // one per output id when GenerationParams::logprobs asked
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // kError: why
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // of prompt_tokens, reused from the prefix cache
  int32_t steps = 0;              // verification steps after the prompt
  std::vector<int32_t> accepted;  // drafts accepted at each step
  Clock::time_point submitted, first_token, finished;
};

}  // namespace dscale
