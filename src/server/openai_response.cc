#include "server/openai_response.h"

#include <cstdio>

namespace dscale::server {
namespace {

bool IsChat(const ResponseMeta& meta) { return meta.endpoint == Endpoint::kChatCompletions; }

ResponseJson Envelope(const ResponseMeta& meta, const char* object, ResponseJson choices) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", std::move(choices)}};
}

ResponseJson FinishReason(const std::optional<std::string>& reason) {
  return reason ? ResponseJson(*reason) : ResponseJson(nullptr);
}

// A choice's "logprobs": null unless the request asked and there are tokens to report.
ResponseJson LogprobsField(const ResponseMeta& meta, std::span<const LogprobEntry> entries,
                           int64_t text_offset) {
  if (!meta.logprobs || entries.empty()) return nullptr;
  return IsChat(meta) ? ChatLogprobsJson(entries) : CompletionLogprobsJson(entries, text_offset);
}

// {"id", "type": "function", "function": {"name", "arguments"}}, with "index" in a stream's delta.
ResponseJson ToolCallJson(const ToolCall& call, std::optional<int32_t> index) {
  ResponseJson out = ResponseJson::object();
  if (index) out["index"] = *index;
  out["id"] = call.id;
  out["type"] = "function";
  out["function"] = {{"name", call.call.name}, {"arguments", call.call.arguments}};
  return out;
}

ResponseJson ChatMessageJson(const Choice& c) {
  ResponseJson message = {{"role", "assistant"}, {"content", c.text}};
  if (c.reasoning) {
    message["reasoning_content"] =
        c.reasoning->empty() ? ResponseJson(nullptr) : ResponseJson(*c.reasoning);
  }
  if (c.tool_calls.empty()) return message;
  if (c.text.empty()) message["content"] = nullptr;
  ResponseJson calls = ResponseJson::array();
  for (const ToolCall& call : c.tool_calls) calls.push_back(ToolCallJson(call, std::nullopt));
  message["tool_calls"] = std::move(calls);
  return message;
}

}  // namespace

std::string ResponseId(Endpoint endpoint, uint64_t serial, uint64_t salt) {
  // SplitMix64 finaliser: ids look random but are unique per (serial, salt).
  uint64_t z = serial + salt * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%08llx%016llx", static_cast<unsigned long long>(serial),
                static_cast<unsigned long long>(z));
  const char* prefix = endpoint == Endpoint::kCompletions       ? "cmpl-"
                       : endpoint == Endpoint::kChatCompletions ? "chatcmpl-"
                       : endpoint == Endpoint::kResponses       ? "resp_"
                                                                : "msg_";
  return prefix + std::string(hex);
}

void AddChoiceUsage(const Usage& choice, int32_t index, Usage* request) {
  request->prompt_tokens = choice.prompt_tokens;
  if (index == 0) request->cached_prompt_tokens = choice.cached_prompt_tokens;
  request->completion_tokens += choice.completion_tokens;
  request->reasoning_tokens += choice.reasoning_tokens;
}

ResponseJson UsageJson(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", usage.reasoning_tokens}}}};
}

ResponseJson CompletionJson(const ResponseMeta& meta, std::span<const Choice> choices,
                            const Usage& usage) {
  ResponseJson list = ResponseJson::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    ResponseJson choice = {{"index", i},
                           {"logprobs", LogprobsField(meta, c.logprobs, 0)},
                           {"finish_reason", c.finish_reason}};
    if (IsChat(meta)) {
      choice["message"] = ChatMessageJson(c);
    } else {
      choice["text"] = c.text;
    }
    list.push_back(std::move(choice));
  }
  ResponseJson out =
      Envelope(meta, IsChat(meta) ? "chat.completion" : "text_completion", std::move(list));
  out["usage"] = UsageJson(usage);
  return out;
}

ResponseJson CompletionJson(const ResponseMeta& meta, const std::string& text,
                            const std::string& finish_reason, const Usage& usage,
                            std::span<const LogprobEntry> logprobs) {
  const Choice choice{
      .text = text, .finish_reason = finish_reason, .logprobs = {logprobs.begin(), logprobs.end()}};
  return CompletionJson(meta, std::span(&choice, 1), usage);
}

ResponseJson ChunkJson(const ResponseMeta& meta, const ChunkFields& fields) {
  ResponseJson choice = {{"index", fields.index},
                         {"logprobs", LogprobsField(meta, fields.logprobs, fields.text_offset)},
                         {"finish_reason", FinishReason(fields.finish_reason)}};
  if (IsChat(meta)) {
    ResponseJson delta = ResponseJson::object();
    if (fields.role) delta["role"] = "assistant";
    if (!fields.text.empty() || fields.role) delta["content"] = fields.text;
    if (!fields.reasoning.empty()) delta["reasoning_content"] = fields.reasoning;
    if (!fields.tool_calls.empty()) {
      ResponseJson calls = ResponseJson::array();
      for (size_t k = 0; k < fields.tool_calls.size(); ++k) {
        calls.push_back(
            ToolCallJson(fields.tool_calls[k], fields.first_tool_call + static_cast<int32_t>(k)));
      }
      delta["tool_calls"] = std::move(calls);
    }
    if (!fields.call_arguments.empty()) {
      delta["tool_calls"] =
          ResponseJson::array({{{"index", fields.call_arguments_of},
                                {"function", {{"arguments", fields.call_arguments}}}}});
    }
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = fields.text;
  }
  ResponseJson out = Envelope(meta, IsChat(meta) ? "chat.completion.chunk" : "text_completion",
                              ResponseJson::array({std::move(choice)}));
  if (fields.with_usage_null) out["usage"] = nullptr;
  return out;
}

ResponseJson UsageChunkJson(const ResponseMeta& meta, const Usage& usage) {
  ResponseJson out = Envelope(meta, IsChat(meta) ? "chat.completion.chunk" : "text_completion",
                              ResponseJson::array());
  out["usage"] = UsageJson(usage);
  return out;
}

std::string Dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string Dump(const ResponseJson& value) {
  return value.dump(-1, ' ', false, ResponseJson::error_handler_t::replace);
}

std::string SseEvent(const nlohmann::json& value) { return "data: " + Dump(value) + "\n\n"; }

std::string SseEvent(const ResponseJson& value) { return "data: " + Dump(value) + "\n\n"; }

}  // namespace dscale::server
