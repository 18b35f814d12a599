// Qwen3.5's and Qwen3.6's chat format, written out in code (declared in chat_template.h): what
// the chat_template.jinja of their checkpoints renders for the same text messages without tools.

#include <cstdint>
#include <string>
#include <string_view>

#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/chat_template_text.h"

namespace dscale {
namespace {

std::string_view Content(const ChatMessage& m) {
  return ContentAsRendered(ChatFormat::kQwen3_5, m);
}

// The template's ns.last_query_index: the last user message whose trimmed content is not a tool
// response; InvalidArgument when there is none (the template raises).
Result<int64_t> LastQueryIndex(std::span<const ChatMessage> messages) {
  for (int64_t i = static_cast<int64_t>(messages.size()) - 1; i >= 0; --i) {
    if (messages[i].role == "user" && !chat_text::IsToolResponse(Content(messages[i]))) {
      return i;
    }
  }
  return InvalidArgument(
      "messages: no user query (the Qwen3.5 chat template needs a user message that is not a "
      "tool response)");
}

void AppendAssistant(const ChatMessage& m, bool after_last_query, std::string* out) {
  const auto [reasoning, answer] = chat_text::SplitThinking(Content(m), m.reasoning_content);
  *out += "<|im_start|>assistant\n";
  // Every turn after the last query shows its reasoning block, empty or not.
  if (after_last_query) {
    *out += "<think>\n";
    *out += chat_text::Trim(reasoning);
    *out += "\n</think>\n\n";
  }
  *out += answer;
  *out += "<|im_end|>\n";
}

void AppendTool(std::span<const ChatMessage> messages, size_t i, std::string* out) {
  // The template opens the user turn only after a message that is not a tool result (a tool
  // message first in the list opens none).
  if (i > 0 && messages[i - 1].role != "tool") *out += "<|im_start|>user";
  *out += "\n<tool_response>\n";
  *out += Content(messages[i]);
  *out += "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") *out += "<|im_end|>\n";
}

}  // namespace

Result<std::string> ApplyQwen3_5ChatTemplate(std::span<const ChatMessage> messages,
                                             const ChatTemplateOptions& options) {
  DSCALE_RETURN_IF_ERROR(chat_text::CheckRoles(messages));
  for (size_t i = 1; i < messages.size(); ++i) {
    if (messages[i].role == "system") {
      return InvalidArgument("messages[" + std::to_string(i) +
                             "].role: a system message must be the first one");
    }
  }
  DSCALE_ASSIGN_OR_RETURN(const int64_t last_query, LastQueryIndex(messages));
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" || m.role == "user") {
      out += "<|im_start|>" + m.role + "\n";
      out += Content(m);
      out += "<|im_end|>\n";
    } else if (m.role == "assistant") {
      AppendAssistant(m, static_cast<int64_t>(i) > last_query, &out);
    } else {
      AppendTool(messages, i, &out);
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    out += options.enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace dscale
