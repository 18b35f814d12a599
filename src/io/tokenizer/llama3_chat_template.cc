// Llama 3.1's chat format, written out in code (declared in chat_template.h): what the Jinja
// chat template of the Llama 3.1 Instruct checkpoints renders for the same messages without
// tools or a custom date.

#include <string_view>

#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/chat_template_text.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale {
namespace {

// The template's date_string default; "Cutting Knowledge Date" is fixed text.
constexpr std::string_view kSystemPreamble =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";

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
  DSCALE_RETURN_IF_ERROR(chat_text::CheckRoles(messages));
  // A leading system message goes into the system turn, after the dates; every prompt has one.
  std::string_view system;
  size_t first = 0;
  if (messages[0].role == "system") {
    system = ContentAsRendered(ChatFormat::kLlama3, messages[0]);
    first = 1;
  }
  std::string out = "<|begin_of_text|>";
  AppendTurn("system", std::string(kSystemPreamble) + std::string(system), &out);
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    // Tool results are the template's "ipython" turns, their content as given.
    AppendTurn(m.role == "tool" ? "ipython" : m.role, ContentAsRendered(ChatFormat::kLlama3, m),
               &out);
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace dscale
