#include "io/tokenizer/chat_template.h"

#include <cstdint>
#include <string_view>

namespace dscale {
namespace {

// Python's str.lstrip('\n') / rstrip('\n') / strip('\n'), as the template calls them.
std::string_view LStripNewlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view RStripNewlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view StripNewlines(std::string_view s) { return RStripNewlines(LStripNewlines(s)); }

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool IsToolResponse(std::string_view content) {
  return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

// The index of the last user message that is a real query (not a tool response wrapped as a
// user turn); the template's ns.last_query_index, len - 1 when there is none.
int64_t LastQueryIndex(std::span<const ChatMessage> messages) {
  for (int64_t i = static_cast<int64_t>(messages.size()) - 1; i >= 0; --i) {
    if (messages[i].role == "user" && !IsToolResponse(messages[i].content)) return i;
  }
  return static_cast<int64_t>(messages.size()) - 1;
}

// Splits an assistant message into (reasoning, answer) the way the template does:
// reasoning is between the last "<think>" and the first "</think>", the answer follows the
// last "</think>".
void SplitThinking(const ChatMessage& message, std::string_view* reasoning,
                   std::string_view* content) {
  *content = message.content;
  *reasoning = {};
  if (message.reasoning_content) {
    *reasoning = *message.reasoning_content;
    return;
  }
  const size_t first_close = content->find(kThinkClose);
  if (first_close == std::string_view::npos) return;
  std::string_view before = RStripNewlines(content->substr(0, first_close));
  if (const size_t open = before.rfind(kThinkOpen); open != std::string_view::npos) {
    before = before.substr(open + kThinkOpen.size());
  }
  *reasoning = LStripNewlines(before);
  const size_t last_close = content->rfind(kThinkClose);
  *content = LStripNewlines(content->substr(last_close + kThinkClose.size()));
}

void AppendAssistant(std::span<const ChatMessage> messages, size_t i, int64_t last_query,
                     std::string* out) {
  std::string_view reasoning, content;
  SplitThinking(messages[i], &reasoning, &content);
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
  // The template reads messages[0] unconditionally and fails on an empty list.
  if (messages.empty()) return InvalidArgument("messages: expected at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return InvalidArgument("messages[" + std::to_string(i) +
                             "].role: expected system, user, assistant or tool, got \"" + role +
                             "\"");
    }
  }
  std::string out;
  const int64_t last_query = LastQueryIndex(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
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

}  // namespace dscale
