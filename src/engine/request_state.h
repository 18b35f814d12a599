#pragma once
// A request inside the engine, from submission to retirement.

#include <cstdint>
#include <span>
#include <vector>

#include "engine/held_context.h"
#include "engine/request.h"
#include "engine/stop_strings.h"
#include "spec/json_grammar.h"

namespace dscale {

struct RequestState {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt, then output; the last output token is the anchor
  int32_t prompt_len = 0;
  int32_t prefilled = 0;  // prompt positions in the KV cache
  int32_t committed = 0;  // positions in the KV cache once decoding (tokens.size() − 1)
  GenerationParams params;
  int32_t seq = -1;
  // The drafter holds every committed position of this request, or it waits in held_context
  // until the request next drafts.
  bool draft_context = false;
  HeldContext held_context;
  bool cancelled = false;
  // Times a later request started while this one waited for KV pages (Engine::Admit).
  int32_t passed_over = 0;
  // Decode steps its prompt waited for others to share its pass (Engine::PromptWaitsForCompany).
  int32_t prompt_waits = 0;
  // A hybrid target's prefix caching: prompt positions (page ends, ascending, past `prefilled`)
  // after which the prompt's recurrent state is kept (Engine::PlanKeptStates), copied by the
  // forward of the chunk that passes them.
  std::vector<int32_t> state_points;
  FinishReason finish = FinishReason::kNone;
  RequestResult result;
  std::vector<TokenLogprobs> logprobs;  // one per output token when params.logprobs asked
  StopStringScanner stop_scanner;       // params.stop_strings in the output so far
  // JSON mode: the grammar's state after the first json_tokens output tokens, advanced over the
  // tokens committed since at each step (Engine::HoldToJson).
  JsonGrammar json_state;
  int32_t json_tokens = 0;

  bool prefill_done() const { return prefilled == prompt_len; }
  // Decoding: the prompt is in the KV cache, the last output token is the anchor, and the
  // request has neither finished nor been cancelled.
  bool decoding() const { return prefill_done() && finish == FinishReason::kNone && !cancelled; }
  int32_t anchor() const { return tokens.back(); }
  // The output so far: held once, in `tokens`, and copied into the result at retirement.
  std::span<const int32_t> output() const { return std::span(tokens).subspan(prompt_len); }
  // The output tokens it may still commit (max_tokens less the output so far; ≥ 1 while
  // decoding): a verification of more rows than this commits no more.
  int32_t tokens_left() const { return params.max_tokens - static_cast<int32_t>(output().size()); }
};

}  // namespace dscale
