#pragma once
// The steps of text the chat templates share, as their Jinja templates spell them with Python's
// str methods (chat_template.h's formats are written out from them).

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "io/tokenizer/chat_template.h"

namespace dscale::chat_text {

// Jinja's `trim`: Python's str.strip() on both ends (every str.isspace() code point).
std::string_view Trim(std::string_view s);
// Python's str.lstrip('\n') / rstrip('\n') / strip('\n').
std::string_view LStripNewlines(std::string_view s);
std::string_view RStripNewlines(std::string_view s);
std::string_view StripNewlines(std::string_view s);

// The Qwen templates' system text around the tools' definitions (one per line between them).
inline constexpr std::string_view kToolsPreamble =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
inline constexpr std::string_view kToolsPostamble =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

// A user turn that only carries tool output: "<tool_response>...</tool_response>".
bool IsToolResponse(std::string_view content);

// An assistant message split into (reasoning, answer) the way the Qwen templates do: the given
// reasoning_content when there is one (the answer is then `content` whole); else, when content
// has a "</think>", the reasoning is between the last "<think>" before the first "</think>" and
// it (newlines stripped at both ends) and the answer follows the last "</think>" (leading
// newlines stripped); else no reasoning.
struct SplitMessage {
  std::string_view reasoning;
  std::string_view answer;
};
SplitMessage SplitThinking(std::string_view content,
                           const std::optional<std::string>& reasoning_content);

// InvalidArgument for an empty list and, naming the message, for a role that is not system,
// user, assistant or tool.
Status CheckRoles(std::span<const ChatMessage> messages);

}  // namespace dscale::chat_text
