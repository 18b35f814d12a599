// Llama 3.1's chat format, written out in code (declared in chat_template.h): what the Jinja
// chat template of the Llama 3.1 Instruct checkpoints renders for the same messages and tools,
// with its default date and tools in the first user message.

#include <nlohmann/json.hpp>
#include <string_view>

#include "io/tokenizer/chat_json.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/chat_template_text.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale {
namespace {

// The template's date_string default; "Cutting Knowledge Date" is fixed text.
constexpr std::string_view kSystemPreamble =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
constexpr std::string_view kToolsEnvironment = "Environment: ipython\n";
constexpr std::string_view kToolsInstruction =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
    "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";

void AppendTurn(std::string_view role, std::string_view content, std::string* out) {
  *out += "<|start_header_id|>";
  *out += role;
  *out += "<|end_header_id|>\n\n";
  *out += content;
  *out += "<|eot_id|>";
}

// The first user turn with the tools before its content.
void AppendToolsTurn(std::span<const std::string> tools, const ChatMessage& first,
                     std::string* out) {
  std::string content(kToolsInstruction);
  for (const std::string& tool : tools) {
    content += ToolAsRendered(ChatFormat::kLlama3, tool) + "\n\n";
  }
  content += ContentAsRendered(ChatFormat::kLlama3, first);
  AppendTurn("user", content, out);
}

// An assistant message that called a tool: the call alone.
Status AppendCall(const ChatMessage& m, size_t i, std::string* out) {
  const std::string where = "messages[" + std::to_string(i) + "].tool_calls";
  if (m.tool_calls.size() != 1) {
    return InvalidArgument(where + ": the Llama 3.1 chat template takes one call a message");
  }
  const ChatToolCall& call = m.tool_calls[0];
  const auto arguments =
      nlohmann::ordered_json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!arguments.is_object())
    return InvalidArgument(where + ": the arguments are not a JSON object");
  AppendTurn("assistant",
             "{\"name\": \"" + call.name + "\", \"parameters\": " + TemplateJson(arguments) + "}",
             out);
  return Status::Ok();
}

}  // namespace

Result<std::string> ApplyLlama3ChatTemplate(std::span<const ChatMessage> messages,
                                            const ChatTemplateOptions& options) {
  DSCALE_RETURN_IF_ERROR(chat_text::CheckRoles(messages));
  const bool tools = !options.tools.empty();
  // A leading system message goes into the system turn, after the dates; every prompt has one.
  std::string system;
  size_t first = 0;
  if (messages[0].role == "system") {
    system = ContentAsRendered(ChatFormat::kLlama3, messages[0]);
    first = 1;
  }
  std::string out = "<|begin_of_text|>";
  AppendTurn("system",
             (tools ? std::string(kToolsEnvironment) : std::string()) +
                 std::string(kSystemPreamble) + system,
             &out);
  if (tools) {
    if (first == messages.size() || messages[first].role != "user") {
      return InvalidArgument(
          "messages: with tools, the Llama 3.1 chat template puts them before the first user "
          "message, which must follow the system message");
    }
    AppendToolsTurn(options.tools, messages[first], &out);
    ++first;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!m.tool_calls.empty()) {
      DSCALE_RETURN_IF_ERROR(AppendCall(m, i, &out));
    } else if (m.role == "tool") {
      // Tool results are the template's "ipython" turns, each a JSON string.
      AppendTurn("ipython", "\"" + ContentAsRendered(ChatFormat::kLlama3, m) + "\"", &out);
    } else {
      AppendTurn(m.role, ContentAsRendered(ChatFormat::kLlama3, m), &out);
    }
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace dscale
