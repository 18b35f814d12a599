// Qwen3.5's and Qwen3.6's chat format, written out in code (declared in chat_template.h): what
// the chat_template.jinja of their checkpoints renders for the same text messages and tools.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "io/tokenizer/chat_json.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/chat_template_text.h"

namespace dscale {
namespace {

std::string Content(const ChatMessage& m) { return ContentAsRendered(ChatFormat::kQwen3_5, m); }

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

constexpr std::string_view kToolsPreamble =
    "# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kToolsPostamble =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\n"
    "value_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    "parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
    "<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- "
    "Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge and "
    "do not tell the user about function calls\n</IMPORTANT>";

// The system turn: the tools, then the system message's content (when it has any).
void AppendTools(std::span<const ChatMessage> messages, std::span<const std::string> tools,
                 std::string* out) {
  *out += "<|im_start|>system\n";
  *out += kToolsPreamble;
  for (const std::string& tool : tools) *out += "\n" + tool;
  *out += kToolsPostamble;
  if (messages[0].role == "system" && !Content(messages[0]).empty()) {
    *out += "\n\n";
    *out += Content(messages[0]);
  }
  *out += "<|im_end|>\n";
}

// One call: its arguments, which must be a JSON object, one parameter each (containers as JSON,
// other values as Python's str() writes them).
Status AppendToolCall(const ChatToolCall& call, std::string* out) {
  const auto arguments =
      nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!arguments.is_object()) {
    return InvalidArgument("the arguments of the call to " + call.name +
                           " are not a JSON object (the Qwen3.5 chat template writes each "
                           "argument as a parameter)");
  }
  *out += "<tool_call>\n<function=" + call.name + ">\n";
  for (const auto& [key, value] : arguments.items()) {
    *out += "<parameter=" + key + ">\n";
    *out += value.is_structured() ? TemplateJson(value) : TemplateString(value);
    *out += "\n</parameter>\n";
  }
  *out += "</function>\n</tool_call>";
  return Status::Ok();
}

Status AppendAssistant(const ChatMessage& m, bool after_last_query, std::string* out) {
  const std::string content = Content(m);
  const auto [reasoning, answer] = chat_text::SplitThinking(content, m.reasoning_content);
  *out += "<|im_start|>assistant\n";
  // Every turn after the last query shows its reasoning block, empty or not.
  if (after_last_query) {
    *out += "<think>\n";
    *out += chat_text::Trim(reasoning);
    *out += "\n</think>\n\n";
  }
  *out += answer;
  for (size_t j = 0; j < m.tool_calls.size(); ++j) {
    // The first call is set off from an answer by a blank line, the others by a newline.
    if (j > 0) {
      *out += "\n";
    } else if (!chat_text::Trim(answer).empty()) {
      *out += "\n\n";
    }
    DSCALE_RETURN_IF_ERROR(AppendToolCall(m.tool_calls[j], out));
  }
  *out += "<|im_end|>\n";
  return Status::Ok();
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
  if (!options.tools.empty()) AppendTools(messages, options.tools, &out);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" && !options.tools.empty()) continue;  // in the tools' turn
    if (m.role == "system" || m.role == "user") {
      out += "<|im_start|>" + m.role + "\n";
      out += Content(m);
      out += "<|im_end|>\n";
    } else if (m.role == "assistant") {
      Status appended = AppendAssistant(m, static_cast<int64_t>(i) > last_query, &out);
      if (!appended.ok()) {
        return InvalidArgument("messages[" + std::to_string(i) +
                               "].tool_calls: " + appended.message());
      }
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
