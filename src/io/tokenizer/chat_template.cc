// Qwen3's chat format, written out in code (declared in chat_template.h), and the dispatch by
// format.

#include "io/tokenizer/chat_template.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "io/tokenizer/chat_json.h"
#include "io/tokenizer/chat_template_text.h"

namespace dscale {
namespace {

using chat_text::LStripNewlines;
using chat_text::StripNewlines;

// The index of the last user message that is a real query (not a tool response wrapped as a
// user turn); the template's ns.last_query_index, len - 1 when there is none.
int64_t LastQueryIndex(std::span<const ChatMessage> messages) {
  for (int64_t i = static_cast<int64_t>(messages.size()) - 1; i >= 0; --i) {
    if (messages[i].role == "user" && !chat_text::IsToolResponse(messages[i].content)) return i;
  }
  return static_cast<int64_t>(messages.size()) - 1;
}

// The system turn that lists the tools, with the leading system message's content first.
void AppendTools(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                 std::string* out) {
  *out += "<|im_start|>system\n";
  if (messages[0].role == "system") *out += messages[0].content + "\n\n";
  *out += chat_text::kToolsPreamble;
  for (const std::string& tool : tools) *out += "\n" + tool;
  *out += chat_text::kToolsPostamble;
}

void AppendToolCalls(std::string_view content, std::span<const ChatToolCall> calls,
                     std::string* out) {
  for (size_t j = 0; j < calls.size(); ++j) {
    if (j > 0 || !content.empty()) *out += "\n";
    *out += "<tool_call>\n{\"name\": \"" + calls[j].name + "\", \"arguments\": ";
    *out += calls[j].arguments;
    *out += "}\n</tool_call>";
  }
}

void AppendAssistant(std::span<const ChatMessage> messages, size_t i, int64_t last_query,
                     std::string* out) {
  const auto [reasoning, content] =
      chat_text::SplitThinking(messages[i].content, messages[i].reasoning_content);
  const bool is_last = i + 1 == messages.size();
  *out += "<|im_start|>assistant\n";
  // Reasoning is shown only for turns after the last query, i.e. the turn being continued
  // and, in tool loops, the steps within it.
  if (static_cast<int64_t>(i) > last_query && (is_last || !reasoning.empty())) {
    *out += "<think>\n";
    *out += StripNewlines(reasoning);
    *out += "\n</think>\n\n";
    *out += LStripNewlines(content);
  } else {
    *out += content;
  }
  AppendToolCalls(content, messages[i].tool_calls, out);
  *out += "<|im_end|>\n";
}

void AppendTool(std::span<const ChatMessage> messages, size_t i, std::string* out) {
  if (i == 0 || messages[i - 1].role != "tool") *out += "<|im_start|>user";
  *out += "\n<tool_response>\n";
  *out += messages[i].content;
  *out += "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") *out += "<|im_end|>\n";
}

}  // namespace

Result<std::string> ApplyQwen3ChatTemplate(std::span<const ChatMessage> messages,
                                           const ChatTemplateOptions& options) {
  DSCALE_RETURN_IF_ERROR(chat_text::CheckRoles(messages));
  std::string out;
  if (!options.tools.empty()) AppendTools(messages, options.tools, &out);
  const int64_t last_query = LastQueryIndex(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && m.role == "system" && !options.tools.empty()) continue;  // in the tools' turn
    if (m.role == "user" || m.role == "system") {
      // The leading system message takes the same form.
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      AppendAssistant(messages, i, last_query, &out);
    } else {
      AppendTool(messages, i, &out);
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string ContentAsRendered(ChatFormat format, const ChatMessage& message) {
  switch (format) {
    case ChatFormat::kQwen3_5:
      return std::string(chat_text::Trim(message.content));
    case ChatFormat::kLlama3:
      if (message.role == "tool") {
        // tojson of a string, less the quotes.
        const std::string quoted = TemplateJson(message.content);
        return quoted.substr(1, quoted.size() - 2);
      }
      return std::string(chat_text::Trim(message.content));
    case ChatFormat::kQwen3:
      break;
  }
  return message.content;
}

std::string ToolAsRendered(ChatFormat format, const std::string& tool) {
  if (format != ChatFormat::kLlama3) return tool;
  const auto parsed = nlohmann::ordered_json::parse(tool, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? tool : TemplateJson(parsed, /*indent=*/4);
}

Result<std::string> ApplyChatTemplate(ChatFormat format, std::span<const ChatMessage> messages,
                                      const ChatTemplateOptions& options) {
  switch (format) {
    case ChatFormat::kLlama3:
      return ApplyLlama3ChatTemplate(messages, options);
    case ChatFormat::kQwen3_5:
      return ApplyQwen3_5ChatTemplate(messages, options);
    case ChatFormat::kQwen3:
      break;
  }
  return ApplyQwen3ChatTemplate(messages, options);
}

}  // namespace dscale
