#pragma once
// Response bodies in the OpenAI shape, and Server-Sent Events framing for streams. Objects keep
// their members in the order written (ResponseJson): OpenAI's order, and completions'
// top_logprobs most likely first.
//
// Non-streaming: one "text_completion" or "chat.completion" object with usage.
// Streaming: "data: <chunk>\n\n" events. Chat streams open with a delta carrying the role;
// each later chunk carries new text; the last content chunk carries finish_reason; with
// stream_options.include_usage every chunk has "usage": null and a final chunk with empty
// choices carries the usage; the stream ends with "data: [DONE]\n\n".

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/logprobs_json.h"
#include "server/openai_request.h"
#include "server/tool_call_stream.h"

namespace dscale::server {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // of prompt_tokens, reused from the prefix cache
  int64_t reasoning_tokens = 0;      // of completion_tokens, those of the reasoning block
};

// What every object of one response shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;       // "cmpl-...", "chatcmpl-...", "resp_..." or "msg_..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;  // choices carry the tokens' logprobs (else "logprobs": null)
};

// "cmpl-" / "chatcmpl-" / "resp_" / "msg_" followed by 24 hex digits of `serial` mixed with `salt`.
std::string ResponseId(Endpoint endpoint, uint64_t serial, uint64_t salt);

// Adds choice `index`'s usage to its request's: the prompt counted once (its cached tokens
// those the first choice found: the others reuse the prompt it computed), the output summed.
void AddChoiceUsage(const Usage& choice, int32_t index, Usage* request);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}, "completion_tokens_details": {"reasoning_tokens"}}, as OpenAI's.
ResponseJson UsageJson(const Usage& usage);

// One choice of a non-streaming response; `logprobs`: one per output token when meta.logprobs.
// A chat choice that called tools has them in `tool_calls` (its content is null when `text` is
// empty); one whose reasoning was split off has `reasoning` (reasoning_content: null when empty).
struct Choice {
  std::string text;
  std::string finish_reason;
  std::vector<LogprobEntry> logprobs;
  std::vector<ToolCall> tool_calls;
  std::optional<std::string> reasoning;
};

// The whole response of a non-streaming request: choices[i] has "index": i.
ResponseJson CompletionJson(const ResponseMeta& meta, std::span<const Choice> choices,
                            const Usage& usage);
// The same with one choice.
ResponseJson CompletionJson(const ResponseMeta& meta, const std::string& text,
                            const std::string& finish_reason, const Usage& usage,
                            std::span<const LogprobEntry> logprobs = {});

// One streaming chunk: `text` new text (chat: the delta's content), `finish_reason` set on
// the last one, `role` set on a chat stream's first chunk. `with_usage_null` adds
// "usage": null (stream_options.include_usage). With meta.logprobs, a chunk with new tokens
// carries their `logprobs` (completions: their text offsets from `text_offset`).
// A chat chunk with `tool_calls` carries them in its delta, with their arguments so far,
// numbered from `first_tool_call` (their index among the choice's calls); one with
// `call_arguments` carries more of call `call_arguments_of`'s arguments
// ({"index", "function": {"arguments"}}).
// A chat chunk with `reasoning` carries it as the delta's reasoning_content.
struct ChunkFields {
  int32_t index = 0;  // the choice
  std::string text;
  std::string reasoning;
  std::span<const LogprobEntry> logprobs;
  int64_t text_offset = 0;
  std::span<const ToolCall> tool_calls;
  int32_t first_tool_call = 0;
  std::string call_arguments;
  int32_t call_arguments_of = 0;
  std::optional<std::string> finish_reason;
  bool role = false;
  bool with_usage_null = false;
};
ResponseJson ChunkJson(const ResponseMeta& meta, const ChunkFields& fields);

// The final usage chunk of a stream with include_usage: empty choices and the usage.
ResponseJson UsageChunkJson(const ResponseMeta& meta, const Usage& usage);

// Serialises without throwing (ill-formed UTF-8, which never should occur, is replaced).
std::string Dump(const nlohmann::json& value);
std::string Dump(const ResponseJson& value);

// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& value);
std::string SseEvent(const ResponseJson& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// An SSE comment: clients ignore it. A stream that has been silent for a while (a long queue
// wait or prefill) sends one so that proxies do not time it out.
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

}  // namespace dscale::server
