#include "server/openai_response.h"

#include <cstdio>

namespace dscale::server {
namespace {

using json = nlohmann::json;

bool IsChat(const ResponseMeta& meta) { return meta.endpoint == Endpoint::kChatCompletions; }

json Envelope(const ResponseMeta& meta, const char* object, json choices) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", std::move(choices)}};
}

json FinishReason(const std::optional<std::string>& reason) {
  return reason ? json(*reason) : json(nullptr);
}

// A choice's "logprobs": null unless the request asked and there are tokens to report.
json LogprobsField(const ResponseMeta& meta, std::span<const LogprobEntry> entries,
                   int64_t text_offset) {
  if (!meta.logprobs || entries.empty()) return nullptr;
  return IsChat(meta) ? ChatLogprobsJson(entries) : CompletionLogprobsJson(entries, text_offset);
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
  return (endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + std::string(hex);
}

json UsageJson(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

json CompletionJson(const ResponseMeta& meta, std::span<const Choice> choices, const Usage& usage) {
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    json choice = {{"index", i},
                   {"logprobs", LogprobsField(meta, c.logprobs, 0)},
                   {"finish_reason", c.finish_reason}};
    if (IsChat(meta)) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    list.push_back(std::move(choice));
  }
  json out = Envelope(meta, IsChat(meta) ? "chat.completion" : "text_completion", std::move(list));
  out["usage"] = UsageJson(usage);
  return out;
}

json CompletionJson(const ResponseMeta& meta, const std::string& text,
                    const std::string& finish_reason, const Usage& usage,
                    std::span<const LogprobEntry> logprobs) {
  const Choice choice{
      .text = text, .finish_reason = finish_reason, .logprobs = {logprobs.begin(), logprobs.end()}};
  return CompletionJson(meta, std::span(&choice, 1), usage);
}

json ChunkJson(const ResponseMeta& meta, const ChunkFields& fields) {
  json choice = {{"index", fields.index},
                 {"logprobs", LogprobsField(meta, fields.logprobs, fields.text_offset)},
                 {"finish_reason", FinishReason(fields.finish_reason)}};
  if (IsChat(meta)) {
    json delta = json::object();
    if (fields.role) delta["role"] = "assistant";
    if (!fields.text.empty() || fields.role) delta["content"] = fields.text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = fields.text;
  }
  json out = Envelope(meta, IsChat(meta) ? "chat.completion.chunk" : "text_completion",
                      json::array({std::move(choice)}));
  if (fields.with_usage_null) out["usage"] = nullptr;
  return out;
}

json UsageChunkJson(const ResponseMeta& meta, const Usage& usage) {
  json out =
      Envelope(meta, IsChat(meta) ? "chat.completion.chunk" : "text_completion", json::array());
  out["usage"] = UsageJson(usage);
  return out;
}

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string SseEvent(const json& value) { return "data: " + Dump(value) + "\n\n"; }

}  // namespace dscale::server
