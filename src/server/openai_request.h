#pragma once
// The bodies of POST /v1/completions and /v1/chat/completions: parsing and validation as pure
// functions over the raw bytes (no sockets, no model), so every kind of bad input is
// unit-testable. Nothing here throws; each problem becomes an ApiError naming the field.
//
// Accepted fields (anything else is a 400 naming it):
//   both      model (required), max_tokens, temperature [0, 2], top_p (0, 1], top_k (-1 or
//             0 = off), min_p [0, 1], seed, stop (string or up to 4 strings), n (1 to
//             kMaxChoices), stream, stream_options {include_usage}, user, metadata, store,
//             presence_penalty / frequency_penalty [-2, 2], repetition_penalty [0.01, 100] (1 =
//             off), logit_bias ({"token id": bias in [-100, 100]}, at most kMaxLogitBiasTokens; the
//             rules of spec/logit_rules.h), ignore_eos (vLLM's extension: generate max_tokens
//             tokens even past end-of-sequence tokens, as benchmarks need), stop_token_ids
//             (up to kMaxStopTokenIds ids that end the output as EOS does), min_tokens (0 to
//             max_tokens: no stop id ends the output before it holds that many); top_k, min_p,
//             repetition_penalty, stop_token_ids and min_tokens are vLLM's extensions (the
//             first three SGLang's too), response_format ({"type": "text"},
//             {"type": "json_object"}: JSON mode, the output held to a JSON object's text, or
//             {"type": "json_schema"}: held to a schema, spec/json_schema.h; on completions
//             as vLLM takes it), structured_outputs (vLLM's: {"json": schema}, {"regex": ...}
//             matching the whole output, or {"choice": [...]}; not beside response_format)
//   completions  prompt (required: a string, token ids, or a one-element array of either),
//             logprobs (null, or 0 to 20: the chosen token's and that many top tokens'),
//             echo (false only), best_of (1 only), suffix (empty only)
//   chat      messages (required), max_completion_tokens (alias of max_tokens),
//             logprobs (boolean), top_logprobs (0 to 20, with logprobs true), tools (up to
//             kMaxTools functions), tool_choice ("auto", "none", "required" or a named
//             function: server/tool_choice.h), parallel_tool_calls, chat_template_kwargs
//             ({"enable_thinking"}), prompt_cache_key, safety_identifier and service_tier
//             (strings, accepted: the prefix cache needs no key), reasoning_effort (OpenAI's:
//             thinking on for any effort but "none"; not against enable_thinking),
//             separate_reasoning (SGLang's), thinking_token_budget (vLLM's: 0 or more; with
//             thinking on, the reasoning block closes by then); an assistant message may carry
//             tool_calls, a tool message a tool_call_id
// Fields a client sends as null mean "the default". Where a field takes an integer (max_tokens,
// n, seed, top_k, min_tokens, logprobs, top_logprobs, token ids), a float without a fractional part
// is that integer (1.0 is 1), under the same range checks.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer/chat_template.h"
#include "server/api_error.h"
#include "server/tool_choice.h"
#include "spec/logit_rules.h"

namespace dscale::server {

// kResponses: OpenAI's Responses API (server/responses_request.h), kMessages: Anthropic's
// Messages API (server/messages_request.h); each a chat for everything but the shape of its
// body and reply.
enum class Endpoint { kCompletions, kChatCompletions, kResponses, kMessages };

// Deeper bodies are refused before parsing.
inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxStopStrings = 4;
// The most choices (`n`) one request may ask for: each is a request of its own in the engine.
inline constexpr int32_t kMaxChoices = 16;
inline constexpr size_t kMaxStopTokenIds = 64;
// OpenAI's bounds on a request's tools and a function's name.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxFunctionNameBytes = 64;
// OpenAI's bound on temperature (a model's recommended default is held to it too).
inline constexpr double kMaxTemperature = 2.0;

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // /v1/completions: the prompt as text, or as token ids (prompt_is_ids).
  std::string prompt_text;
  std::vector<int64_t> prompt_ids;
  bool prompt_is_ids = false;
  // /v1/chat/completions: the conversation ("developer" already mapped to "system").
  std::vector<ChatMessage> messages;

  std::optional<int64_t> max_tokens;  // unset: the server's default, within the context
  // Unset: the model's default (server/sampling_defaults.h), else OpenAI's (PrepareRequest).
  std::optional<float> temperature;  // 0 is greedy
  std::optional<float> top_p;
  std::optional<int32_t> top_k;  // 0: off
  std::optional<float> min_p;    // 0: off
  std::optional<float> repetition_penalty;
  LogitRules rules;  // logit_bias, the presence and frequency penalties, min_tokens, JSON mode
  std::vector<int64_t> stop_token_ids;  // vLLM's: ids that end the output too
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;
  int32_t n = 1;             // choices: independent completions of the same prompt
  bool logprobs = false;     // report each output token's log-probability (spec/logprobs.h)
  int32_t top_logprobs = 0;  // and this many most likely tokens' (0 .. kMaxTopLogprobs)
  // /v1/chat/completions: chat_template_kwargs.enable_thinking, as vLLM and SGLang take it (the
  // chat format's generation prompt opens a reasoning block, or closes an empty one).
  bool enable_thinking = false;
  // vLLM's thinking_token_budget: with thinking on, at most this many output tokens before the
  // reasoning block closes (LogitRules::reasoning_budget); unset: no bound.
  std::optional<int32_t> thinking_token_budget;
  // With thinking on, the reasoning block is returned as reasoning_content (SGLang's
  // separate_reasoning; false keeps it in the content, markers and all).
  bool separate_reasoning = true;
  // /v1/chat/completions: the tools' definitions as the chat template's tojson writes them
  // (chat_json.h; members in the order sent), and tool_choice (server/tool_choice.h): calls in
  // the output returned as tool_calls ("auto", the default) or left in the text ("none"), or the
  // answer held to calls ("required", or the function named tool_choice_function; the schema is
  // in rules.json_schema).
  std::vector<std::string> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_function;
  // OpenAI's parallel_tool_calls: false, at most one call where the calls are held ("required",
  // or "auto" with a strict tool; server/tool_choice.h).
  bool parallel_tool_calls = true;
  // response_format {"type": "json_schema"} (or structured_outputs {"json"}) was sent: its schema
  // is compiled into rules.json_schema once the body is read in order, from `schema_field`.
  bool json_schema_sent = false;
  std::string schema_field;
  // structured_outputs was sent (vLLM's: json, regex or choice); response_format may not be.
  bool structured_outputs_sent = false;
  // Endpoint::kResponses (server/responses_request.h): what its reply and the response store
  // need of the request.
  struct Responses {
    nlohmann::ordered_json echo;       // the settings the response object repeats
    nlohmann::ordered_json input;      // its input items (a string input as the user's message)
    std::string previous_response_id;  // the stored response it continues, if any
    bool store = true;
  } responses;
};

// 415 unless the Content-Type is application/json (parameters such as charset allowed).
std::optional<ApiError> CheckContentType(std::string_view content_type);

// Deepest nesting of arrays and objects in `body`, scanning no further than past `limit`
// (strings and escapes are skipped, so brackets inside strings do not count).
int JsonDepth(std::string_view body, int limit);

// What every body must be before it is read as JSON: not empty, UTF-8, nested at most
// kMaxJsonDepth deep.
std::optional<ApiError> CheckBodyBytes(std::string_view body);

// Parses and validates a request body for `endpoint` (not kResponses) into *out.
std::optional<ApiError> ParseApiRequest(Endpoint endpoint, std::string_view body, ApiRequest* out);

}  // namespace dscale::server
