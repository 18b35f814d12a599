#pragma once
// The body of POST /v1/responses (OpenAI's Responses API), read as the chat request it amounts
// to: a Responses request is a chat whose conversation is a list of items. It is rewritten as a
// /v1/chat/completions body and parsed by ParseApiRequest, so one set of rules checks both, and
// every error (those of the prompt and the engine's check too: FieldMap) names the field as the
// client sent it. A request may continue a stored response (previous_response_id: its
// conversation, server/response_store.h, comes before the input; the instructions and tools
// are the request's own, as OpenAI's).
//
// Accepted fields (anything else is a 400 naming it):
//   model (required), input (required: a string, the user's message, or a list of items),
//   instructions (a system message before the input), max_output_tokens, temperature, top_p,
//   top_logprobs (0 to 20; above 0 the output text's log-probabilities are reported), include
//   (the names OpenAI takes; "message.output_text.logprobs" reports the log-probabilities, the
//   others ask for what this server never returns), stream, stream_options
//   ({"include_obfuscation"}: accepted, nothing is obfuscated), tools (function tools:
//   {"type": "function", "name", "description", "parameters", "strict"}), tool_choice ("auto",
//   "none", "required" or {"type": "function", "name"}), parallel_tool_calls, text
//   ({"format": {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name",
//   "schema", "description", "strict"}, "verbosity"}), reasoning ({"effort", "summary"}: thinking
//   on, in the formats that have it, for any effort but "none"), store (default true: the
//   response is kept where the server keeps responses), previous_response_id, metadata, user,
//   safety_identifier, prompt_cache_key, service_tier, truncation ("disabled" only), background
//   (false only), conversation, prompt and max_tool_calls (null only: OpenAI's platform
//   features), and the sampling extensions chat takes (top_k, min_p,
//   repetition_penalty, seed, stop, presence_penalty, frequency_penalty, logit_bias, ignore_eos,
//   min_tokens, stop_token_ids).
// Items (input's list):
//   message              {"role": "user" | "system" | "developer" | "assistant", "content": text or
//                        parts "input_text" / "output_text" ({"text"}) and "refusal"}; "type":
//                        "message", "id" and "status" optional
//   function_call        {"call_id", "name", "arguments"}: an assistant's call; the calls after an
//                        assistant's message (or after each other) are one chat turn
//   function_call_output {"call_id", "output": text or input_text parts}: the tool's message
//   reasoning            {"summary", "content", "encrypted_content"}: its text (the content's
//                        reasoning_text, else the summary's summary_text) is the next assistant
//                        turn's reasoning_content
// The instructions and the system / developer messages that open the input are one system
// message, their texts joined by a blank line (the Qwen3.5 template takes one system message,
// and only first).

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/request_json.h"

namespace dscale::server {

// The conversation a stored response ended (previous_response_id's; ResponseStore), into
// *items, or the error to return (404 for one not stored).
using StoredConversation =
    std::function<std::optional<ApiError>(const std::string& id, nlohmann::ordered_json* items)>;

// Parses and validates a Responses body into *out (endpoint kResponses, `responses` set; the
// echo's temperature, top_p and store are filled in once known) and *fields. `stored`: empty
// where the server keeps no responses (previous_response_id is then refused).
std::optional<ApiError> ParseResponsesRequest(std::string_view body,
                                              const StoredConversation& stored, ApiRequest* out,
                                              FieldMap* fields);

}  // namespace dscale::server
