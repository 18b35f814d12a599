#pragma once
// What a request's parameters do to the target's logits before a token is chosen from them,
// greedy or sampled: OpenAI's logit_bias, presence_penalty and frequency_penalty, and the
// repetition penalty of Hugging Face and vLLM. The rules read the tokens before the row, so row
// j of a verified block [anchor, d_1 .. d_{k−1}] is judged as if d_1 .. d_j were already output:
// exactly what plain decoding sees at that position once they are accepted, so speculative
// output stays plain decoding's, bit for bit.
//
// For token t with bias b, c the times t occurs in the output before the row, and t "seen" when
// it occurs in the prompt or c > 0, the logit x becomes, in float and in this order:
//   x += b                                   logit_bias
//   if seen: x = x > 0 ? x / r : x · r       repetition_penalty r (1: off; prompt and output)
//   x −= c · frequency_penalty + (c > 0 ? presence_penalty : 0)      (output only)
// which is vLLM's order (the bias, then the penalties) and its scopes. Every token's result
// depends on that token's own terms alone, so the order tokens are visited in does not matter.
// vLLM's min_tokens is one more rule, HoldBackStopIds: in a row whose output before it holds
// fewer than min_tokens tokens, every stop id's logit becomes the lowest float (probability 0,
// never the argmax), so no stop id ends the request before it has min_tokens tokens (stop
// strings still end it: the text is cut where one first appears, as OpenAI's `stop` says).
// A thinking budget (vLLM's thinking_token_budget, Anthropic's thinking.budget_tokens) is another,
// CloseReasoningAtBudget: the row that follows reasoning_budget output tokens, none of which is
// the token that closes the reasoning block, allows that token alone (every other logit the
// lowest float), so at most reasoning_budget tokens come before the block's close.
// The log-probabilities a request asks for are those of the rows after the rules (the
// distribution its tokens were chosen from; spec/logprobs.h).

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "spec/json_schema.h"

namespace dscale {

// OpenAI's ranges.
inline constexpr float kMaxPenalty = 2.0f;      // presence and frequency: [−2, 2]
inline constexpr float kMaxLogitBias = 100.0f;  // a bias: [−100, 100]
// repetition_penalty's range (vLLM and Hugging Face take any r > 0): bounded so that x / r and
// x · r of a finite logit stay finite.
inline constexpr float kMinRepetitionPenalty = 0.01f;
inline constexpr float kMaxRepetitionPenalty = 100.0f;
// The most tokens one request may bias: each is visited in every row the request verifies.
inline constexpr int32_t kMaxLogitBiasTokens = 1024;

struct LogitRules {
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, bias), tokens ascending, distinct
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  int32_t min_tokens = 0;  // HoldBackStopIds; 0: off
  // JSON mode (response_format json_object, JsonSchema::AnyObject(), or json_schema): every row
  // held to the tokens that continue a text this schema admits (spec/json_token_mask.h); null:
  // off. The engine applies it, knowing the tokens' texts.
  std::shared_ptr<const JsonSchema> json_schema;
  // With json_schema and thinking on: the chat format's end of its reasoning block ("</think>";
  // static storage, ChatFormatTraits). The value is the answer after it, the reasoning free text
  // up to it (JsonGrammar::Start); empty: the value starts the output.
  std::string_view reasoning_end;
  // CloseReasoningAtBudget: the output tokens the reasoning block may hold before
  // reasoning_close_token (-1: off).
  int32_t reasoning_budget = -1;
  int32_t reasoning_close_token = -1;

  bool empty() const {
    return logit_bias.empty() && presence_penalty == 0.0f && frequency_penalty == 0.0f &&
           repetition_penalty == 1.0f && min_tokens == 0 && json_schema == nullptr &&
           reasoning_budget < 0;
  }
};

// OK when every value is in its range, every biased token is below `vocab`, min_tokens is at
// most max_tokens and a reasoning budget has its closing token; otherwise InvalidArgument naming
// the request field ("logit_bias: ...", "presence_penalty: ...", "thinking_token_budget: ...").
Status CheckLogitRules(const LogitRules& rules, int64_t vocab, int32_t max_tokens);

// Applies `rules` in place to one request's consecutive logits rows [rows.size() / vocab, vocab]:
// row j follows prompt, output and drafts[0, j). drafts holds at least rows − 1 tokens.
void ApplyLogitRules(const LogitRules& rules, std::span<const int32_t> prompt,
                     std::span<const int32_t> output, std::span<const int32_t> drafts,
                     std::span<float> rows, int64_t vocab);

// rules.min_tokens on the same rows: row j follows output_len + j output tokens. Stop ids outside
// the vocabulary are never chosen anyway and are skipped.
void HoldBackStopIds(const LogitRules& rules, int64_t output_len, std::span<const int64_t> stop_ids,
                     std::span<float> rows, int64_t vocab);

// rules.reasoning_budget on the same rows as ApplyLogitRules (row j follows output and
// drafts[0, j)).
void CloseReasoningAtBudget(const LogitRules& rules, std::span<const int32_t> output,
                            std::span<const int32_t> drafts, std::span<float> rows, int64_t vocab);

}  // namespace dscale
