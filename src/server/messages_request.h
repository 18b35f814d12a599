#pragma once
// The body of POST /v1/messages (Anthropic's Messages API, as Claude Code and the Anthropic SDKs
// send it), read as the chat request it amounts to: rewritten as a /v1/chat/completions body and
// parsed by ParseApiRequest, one set of rules for both, every error naming the field as the
// client sent it (FieldMap, responses_request.h).
//
// Accepted fields (anything else is a 400 naming it):
//   model, max_tokens and messages (required), system (a string or text blocks: the system
//   message), stop_sequences (up to 4), temperature, top_p, top_k, stream, tools (client tools:
//   {"name", "description", "input_schema", "type": "custom", "strict", "cache_control"}),
//   tool_choice ({"type": "auto" | "any" | "tool" | "none", "name", "disable_parallel_tool_use"}:
//   chat's "auto", "required", a named function, "none"; parallel_tool_calls false),
//   thinking ({"type": "enabled", "budget_tokens"} or {"type": "disabled"}: thinking on or off in
//   the formats that have it; budget_tokens is chat's thinking_token_budget, the reasoning
//   block closed by then), metadata ({"user_id"}), service_tier.
// Messages alternate "user" and "assistant"; content is a string or blocks:
//   text                 {"text"} (blocks of one message are joined as chat's text parts are: as
//                        written, nothing between them); cache_control and citations accepted
//   tool_use             an assistant's call {"id", "name", "input"}: chat's tool_calls, the input
//                        object written in the order sent
//   tool_result          a user's {"tool_use_id", "content": text or text blocks, "is_error"}: a
//                        tool message each, before the user's text in that message
//   thinking             an assistant's {"thinking", "signature"}: its reasoning_content
//   redacted_thinking    an assistant's: left out (nothing here can read it)

#include <optional>
#include <string_view>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/responses_request.h"

namespace dscale::server {

// kCreate: POST /v1/messages. kCountTokens: POST /v1/messages/count_tokens, which takes the
// fields that shape the prompt (model, messages, system, tools, tool_choice, thinking) and no
// max_tokens.
enum class MessagesBody { kCreate, kCountTokens };

// Parses and validates a Messages body into *out (endpoint kMessages) and *fields.
std::optional<ApiError> ParseMessagesRequest(std::string_view body, MessagesBody kind,
                                             ApiRequest* out, FieldMap* fields);

}  // namespace dscale::server
