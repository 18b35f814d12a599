#include "io/tokenizer/chat_template_text.h"

#include "io/tokenizer/chat_format.h"

namespace dscale::chat_text {
namespace {

// The Unicode code points Python's str.strip() removes (str.isspace()), as UTF-8.
constexpr std::string_view kSpaces[] = {" ",      "\t",     "\n",     "\v",     "\f",     "\r",
                                        "\x1c",   "\x1d",   "\x1e",   "\x1f",   "\u0085", "\u00a0",
                                        "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
                                        "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
                                        "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"};

// The reasoning block's markers: the Qwen formats' (the texts here are theirs).
std::string_view ThinkOpen() { return TraitsOf(ChatFormat::kQwen3).reasoning_open; }
std::string_view ThinkClose() { return TraitsOf(ChatFormat::kQwen3).reasoning_close; }

}  // namespace

std::string_view Trim(std::string_view s) {
  bool changed = true;
  while (changed && !s.empty()) {
    changed = false;
    for (const std::string_view space : kSpaces) {
      if (s.starts_with(space)) {
        s.remove_prefix(space.size());
        changed = true;
      }
      if (s.ends_with(space)) {
        s.remove_suffix(space.size());
        changed = true;
      }
    }
  }
  return s;
}

std::string_view LStripNewlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view RStripNewlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

std::string_view StripNewlines(std::string_view s) { return RStripNewlines(LStripNewlines(s)); }

bool IsToolResponse(std::string_view content) {
  return content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
}

SplitMessage SplitThinking(std::string_view content,
                           const std::optional<std::string>& reasoning_content) {
  if (reasoning_content) return {.reasoning = *reasoning_content, .answer = content};
  const size_t first_close = content.find(ThinkClose());
  if (first_close == std::string_view::npos) return {.reasoning = {}, .answer = content};
  std::string_view before = RStripNewlines(content.substr(0, first_close));
  if (const size_t open = before.rfind(ThinkOpen()); open != std::string_view::npos) {
    before = before.substr(open + ThinkOpen().size());
  }
  const size_t last_close = content.rfind(ThinkClose());
  return {.reasoning = LStripNewlines(before),
          .answer = LStripNewlines(content.substr(last_close + ThinkClose().size()))};
}

Status CheckRoles(std::span<const ChatMessage> messages) {
  // The templates read messages[0] unconditionally and fail on an empty list.
  if (messages.empty()) return InvalidArgument("messages: expected at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return InvalidArgument("messages[" + std::to_string(i) +
                             "].role: expected system, user, assistant or tool, got \"" + role +
                             "\"");
    }
  }
  return Status::Ok();
}

}  // namespace dscale::chat_text
