#pragma once
// The Messages API's reply (server/messages_request.h): a "message" whose content is a list of
// blocks in the order the model wrote them —
//   its reasoning   {"type": "thinking", "thinking", "signature": ""} (nothing signs it here)
//   its answer      {"type": "text", "text"}
//   each call       {"type": "tool_use", "id": "toolu_…", "name", "input": the arguments object}
// — with stop_reason "end_turn", "tool_use" (it called tools), "stop_sequence" (stop_sequence
// says which) or "max_tokens", and usage: input_tokens (those computed), cache_read_input_tokens
// (those the prefix cache supplied), cache_creation_input_tokens (0: nothing is written on
// request) and output_tokens.
//
// Streamed, Anthropic's events, each "event: <type>\ndata: <json>\n\n": message_start (the
// message with no content yet), per block content_block_start, content_block_delta
// (text_delta, thinking_delta, input_json_delta) and content_block_stop, then message_delta
// (stop_reason, stop_sequence, the whole usage) and message_stop; a request that fails ends
// with an error event instead. Errors before a reply are MessagesErrorJson.
//
// A call's input is its arguments read as JSON: a call cut off by max_tokens, whose arguments
// are no whole object, has the input {} (its partial_json deltas carry what was written).

#include <cstdint>
#include <optional>
#include <string>

#include "server/openai_response.h"
#include "server/output_items.h"

namespace dscale::server {

// {"type": "error", "error": {"type": "invalid_request_error" | "not_found_error" | ...,
// "message"}}: the Messages API's shape of an error, its type by the HTTP status.
ResponseJson MessagesErrorJson(const ApiError& error);

class MessagesOutput : public OutputItems {
 public:
  // `prompt_tokens`: the request's, for message_start; `id_seed` makes the calls' ids.
  MessagesOutput(ResponseMeta meta, int64_t prompt_tokens, uint64_t id_seed);

  std::string Open() override;
  ResponseJson Reply() const override;

 private:
  std::string Opened(Kind kind, const ToolCall* call) override;
  std::string Text(Kind kind, const std::string& text,
                   std::span<const LogprobEntry> logprobs) override;
  std::string Arguments(const std::string& arguments) override;
  std::string Closed(Kind kind, bool cut_off) override;
  std::string Finished(const RequestChannel::Update& update) override;

  ResponseJson UsageJson() const;
  ResponseJson& last_block() { return content_[content_.size() - 1]; }

  ResponseMeta meta_;
  uint64_t id_seed_;
  Usage usage_;
  ResponseJson content_ = ResponseJson::array();
  std::string arguments_;  // the open call's, read as its input when it closes
  int32_t calls_ = 0;
  std::optional<std::string> stop_reason_;
  std::optional<std::string> stop_sequence_;
};

}  // namespace dscale::server
