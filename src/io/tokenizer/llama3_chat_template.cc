// Llama 3.1's chat format, written out in code (declared in chat_template.h): what the Jinja
// chat template of the Llama 3.1 Instruct checkpoints renders for the same messages without
// tools or a custom date.

#include <string_view>

#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale {
namespace {

// The template's date_string default; "Cutting Knowledge Date" is fixed text.
constexpr std::string_view kSystemPreamble =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

// The Unicode code points Python's str.strip() removes (str.isspace()), as UTF-8.
constexpr std::string_view kSpaces[] = {" ",      "\t",     "\n",     "\v",     "\f",     "\r",
                                        "\x1c",   "\x1d",   "\x1e",   "\x1f",   "\u0085", "\u00a0",
                                        "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
                                        "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
                                        "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"};

// Jinja's `trim`: Python's str.strip() on both ends.
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

void AppendTurn(std::string_view role, std::string_view content, std::string* out) {
  *out += "<|start_header_id|>";
  *out += role;
  *out += "<|end_header_id|>\n\n";
  *out += content;
  *out += "<|eot_id|>";
}

}  // namespace

Result<std::string> ApplyLlama3ChatTemplate(std::span<const ChatMessage> messages,
                                            const ChatTemplateOptions& options) {
  if (messages.empty()) return InvalidArgument("messages: expected at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return InvalidArgument("messages[" + std::to_string(i) + "].role: expected system, user, " +
                             "assistant or tool, got \"" + role + "\"");
    }
  }
  // A leading system message goes into the system turn, after the dates; every prompt has one.
  std::string_view system;
  size_t first = 0;
  if (messages[0].role == "system") {
    system = Trim(messages[0].content);
    first = 1;
  }
  std::string out = "<|begin_of_text|>";
  AppendTurn("system", std::string(kSystemPreamble) + std::string(system), &out);
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    // Tool results are the template's "ipython" turns, their content as given.
    if (m.role == "tool") {
      AppendTurn("ipython", m.content, &out);
    } else {
      AppendTurn(m.role, Trim(m.content), &out);
    }
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

Result<std::string> ApplyChatTemplate(ChatFormat format, std::span<const ChatMessage> messages,
                                      const ChatTemplateOptions& options) {
  return format == ChatFormat::kLlama3 ? ApplyLlama3ChatTemplate(messages, options)
                                       : ApplyQwen3ChatTemplate(messages, options);
}

}  // namespace dscale
