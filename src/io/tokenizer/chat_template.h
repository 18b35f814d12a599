#pragma once
// The chat formats of the supported families, written out in code. Qwen3's: the output is exactly
// what Qwen3's Jinja chat template (chat_template.jinja in the checkpoint) renders for the same
// messages and tools. The parts of the template that matter here:
//   - a leading system message becomes "<|im_start|>system\n{content}<|im_end|>\n";
//   - user messages (and system messages after the first) become
//     "<|im_start|>{role}\n{content}<|im_end|>\n";
//   - an assistant message's "<think>...</think>" part is split off. For assistant turns
//     after the last user query it is kept, re-wrapped as "<think>\n{reasoning}\n</think>\n\n";
//     earlier turns drop it. The message is "<|im_start|>assistant\n...<|im_end|>\n";
//   - tool messages are grouped into one user turn of "<tool_response>" blocks;
//   - with tools, the system turn always opens the text: the leading system message's content
//     and "\n\n" (if there is one), "# Tools" with each tool's JSON on a line of its own inside
//     "<tools></tools>", and the instruction to answer a call as
//     "<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>";
//   - an assistant message's tool calls follow its content in that form (a "\n" before each
//     but a first one that follows no content);
//   - the generation prompt is "<|im_start|>assistant\n", followed by
//     "<think>\n\n</think>\n\n" when thinking is disabled (the template's
//     enable_thinking=False), which tells the model to answer without reasoning.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "io/tokenizer/chat_format.h"

namespace dscale {

// A call an assistant message made, as the templates write it back.
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text: as the client sent it, or TemplateJson of its object
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  // The template's reasoning_content: when set on an assistant message it is used instead
  // of a "<think>" part inside content.
  std::optional<std::string> reasoning_content = std::nullopt;
  std::vector<ChatToolCall> tool_calls = {};  // an assistant's
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  bool enable_thinking = false;
  // The tools the model may call, each its definition as the template's tojson writes it
  // (TemplateJson, chat_json.h), e.g. {"type": "function", "function": {"name": ...}}.
  std::span<const std::string> tools;
};

// InvalidArgument for an empty list (the template fails on one too) and, naming the
// message, for a role that is not one of the four above.
Result<std::string> ApplyQwen3ChatTemplate(std::span<const ChatMessage> messages,
                                           const ChatTemplateOptions& options = {});

// Qwen3.5's and Qwen3.6's (their chat_template.jinja, text messages, no tools): Qwen3's ChatML
// with these differences —
//   - every message's content is trimmed (Jinja's trim: Python's str.strip());
//   - a system message anywhere but first, and a list without a user message that is not a tool
//     response, are InvalidArgument (the template raises);
//   - an assistant turn after the last user query always shows its reasoning block,
//     "<think>\n{reasoning, trimmed}\n</think>\n\n", even an empty one; earlier turns drop it;
//   - a tool message first in the list opens no user turn;
//   - the generation prompt "<|im_start|>assistant\n" is followed by "<think>\n" when thinking is
//     on (the model writes its reasoning, then "</think>") and by "<think>\n\n</think>\n\n"
//     when it is off.
Result<std::string> ApplyQwen3_5ChatTemplate(std::span<const ChatMessage> messages,
                                             const ChatTemplateOptions& options = {});

// Llama 3.1's (Instruct checkpoints' template, its default date):
//   "<|begin_of_text|>", then always a system turn
//   "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
//   "Today Date: 26 Jul 2024\n\n{leading system message, trimmed}<|eot_id|>", then per message
//   "<|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>" (tool results
//   as role "ipython", their content as a JSON string: quoted and escaped), then
//   "<|start_header_id|>assistant<|end_header_id|>\n\n" as the generation prompt. Trimming is
//   Python's str.strip(); enable_thinking and reasoning_content have no place in it and are
//   ignored. With tools (the template's default tools_in_user_message): "Environment: ipython\n"
//   opens the system turn, and the first message after it, which must be a user's, is preceded
//   by the instruction to answer with {"name": function name, "parameters": ...} and each tool's
//   JSON indented by 4 (tojson(indent=4)) and "\n\n". An assistant message with a call is that
//   call alone, {"name": "NAME", "parameters": {arguments}} (its content dropped; one call a
//   message, more are InvalidArgument). Errors as ApplyQwen3ChatTemplate's.
Result<std::string> ApplyLlama3ChatTemplate(std::span<const ChatMessage> messages,
                                            const ChatTemplateOptions& options = {});

// What `format`'s template writes for a message's content (an assistant's before its reasoning is
// split off): as given in Qwen3's; trimmed (Jinja's trim) in Qwen3.5's, and in Llama 3's but for
// tool results, which are escaped as inside a JSON string (the template adds the quotes). The
// templates write contents through it, and the server's segmented encoding
// (server/prompt_builder.cc) inserts it for each content it encodes as plain text.
std::string ContentAsRendered(ChatFormat format, const ChatMessage& message);

// What `format`'s template writes for a tool's definition (ChatTemplateOptions::tools): as
// given in the Qwen formats, indented by 4 in Llama 3's (text that is not JSON, such as the
// segmented encoding's marker, as given). The segmented encoding inserts it too.
std::string ToolAsRendered(ChatFormat format, const std::string& tool);

// `format`'s template (ChatFormatOf, chat_format.h, says which a tokenizer speaks).
Result<std::string> ApplyChatTemplate(ChatFormat format, std::span<const ChatMessage> messages,
                                      const ChatTemplateOptions& options = {});

}  // namespace dscale
