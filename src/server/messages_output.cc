#include "server/messages_output.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "server/tool_call_stream.h"

namespace dscale::server {
namespace messages_reply {

const char* ErrorType(int status) {
  switch (status) {
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string Event(const char* type, ResponseJson data) {
  ResponseJson event = {{"type", type}};
  for (auto& [key, value] : data.items()) event[key] = std::move(value);
  return std::string("event: ") + type + "\ndata: " + Dump(event) + "\n\n";
}

ResponseJson OrNull(const std::optional<std::string>& v) {
  return v ? ResponseJson(*v) : ResponseJson(nullptr);
}

}  // namespace messages_reply

ResponseJson MessagesErrorJson(const ApiError& error) {
  return {
      {"type", "error"},
      {"error", {{"type", messages_reply::ErrorType(error.status)}, {"message", error.message}}}};
}

MessagesOutput::MessagesOutput(ResponseMeta meta, int64_t prompt_tokens, uint64_t id_seed)
    : meta_(std::move(meta)), id_seed_(id_seed), usage_{.prompt_tokens = prompt_tokens} {}

std::string MessagesOutput::Open() {
  return messages_reply::Event("message_start", {{"message", Reply()}});
}

std::string MessagesOutput::Opened(Kind kind, const ToolCall* call) {
  ResponseJson block;
  if (kind == Kind::kReasoning) {
    block = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  } else if (kind == Kind::kText) {
    block = {{"type", "text"}, {"text", ""}};
  } else {
    DSCALE_CHECK(kind == Kind::kCall && call != nullptr);
    block = {{"type", "tool_use"},
             {"id", ResponsePartId("toolu", id_seed_, calls_++)},
             {"name", call->call.name},
             {"input", ResponseJson::object()}};
    arguments_.clear();
  }
  content_.push_back(block);
  return messages_reply::Event(
      "content_block_start", {{"index", content_.size() - 1}, {"content_block", std::move(block)}});
}

std::string MessagesOutput::Text(Kind kind, const std::string& text,
                                 std::span<const LogprobEntry>) {
  const char* key = kind == Kind::kReasoning ? "thinking" : "text";
  last_block()[key].get_ref<std::string&>() += text;
  return messages_reply::Event(
      "content_block_delta",
      {{"index", content_.size() - 1},
       {"delta",
        {{"type", kind == Kind::kReasoning ? "thinking_delta" : "text_delta"}, {key, text}}}});
}

std::string MessagesOutput::Arguments(const std::string& arguments) {
  arguments_ += arguments;
  return messages_reply::Event(
      "content_block_delta",
      {{"index", content_.size() - 1},
       {"delta", {{"type", "input_json_delta"}, {"partial_json", arguments}}}});
}

std::string MessagesOutput::Closed(Kind kind, bool) {
  if (kind == Kind::kCall) {
    ResponseJson input = ResponseJson::parse(arguments_, nullptr, /*allow_exceptions=*/false);
    if (input.is_object()) last_block()["input"] = std::move(input);
  }
  return messages_reply::Event("content_block_stop", {{"index", content_.size() - 1}});
}

std::string MessagesOutput::Finished(const RequestChannel::Update& update) {
  if (update.outcome == Outcome::kError || update.outcome == Outcome::kCancelled) {
    const ApiError error =
        update.error.value_or(ApiError{.status = 500, .message = "the request was cancelled"});
    return messages_reply::Event("error", {{"error", MessagesErrorJson(error)["error"]}});
  }
  usage_ = update.usage;
  if (update.outcome == Outcome::kLength) {
    stop_reason_ = "max_tokens";
  } else if (calls_ > 0) {
    stop_reason_ = "tool_use";
  } else if (!update.stop_string.empty()) {
    stop_reason_ = "stop_sequence";
    stop_sequence_ = update.stop_string;
  } else {
    stop_reason_ = "end_turn";
  }
  std::string out = messages_reply::Event(
      "message_delta", {{"delta",
                         {{"stop_reason", messages_reply::OrNull(stop_reason_)},
                          {"stop_sequence", messages_reply::OrNull(stop_sequence_)}}},
                        {"usage", UsageJson()}});
  return out + messages_reply::Event("message_stop", ResponseJson::object());
}

ResponseJson MessagesOutput::UsageJson() const {
  return {{"input_tokens", usage_.prompt_tokens - usage_.cached_prompt_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", usage_.cached_prompt_tokens},
          {"output_tokens", usage_.completion_tokens}};
}

ResponseJson MessagesOutput::Reply() const {
  return {{"id", meta_.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", meta_.model},
          {"content", content_},
          {"stop_reason", messages_reply::OrNull(stop_reason_)},
          {"stop_sequence", messages_reply::OrNull(stop_sequence_)},
          {"usage", UsageJson()}};
}

}  // namespace dscale::server
