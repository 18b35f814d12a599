#pragma once
// One chat choice's text split for the response, as it streams: the reasoning (thinking on, in
// the Qwen formats: ReasoningStream), then the answer's calls to tools out of the content (tools
// with tool_choice "auto": ToolCallStream), or the answer as calls (a forced tool_choice:
// ForcedToolCalls). Either part may be off; with both off the text is all content. Not
// thread-safe: one per choice.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/forced_tool_calls.h"
#include "server/reasoning_stream.h"
#include "server/tool_call_stream.h"

namespace dscale::server {

class ChatOutput {
 public:
  struct Piece {
    std::string reasoning;
    std::string content;
    std::vector<ToolCall> calls;
    std::string arguments;  // more of the last call's arguments (a forced named call streams)
  };

  ChatOutput(std::optional<ReasoningStream> reasoning, std::optional<ToolCallStream> tools,
             std::optional<ForcedToolCalls> forced = std::nullopt);

  Piece Push(std::string_view text);
  Piece Finish();

  // Whether the response reports reasoning_content (null when the output had none).
  bool splits_reasoning() const { return reasoning_.has_value(); }
  // Calls returned so far.
  int32_t calls() const { return tools_ ? tools_->calls() : forced_ ? forced_->calls() : 0; }

 private:
  void Answer(std::string_view answer, bool final, Piece* piece);
  void AddForced(ForcedToolCalls::Piece part, Piece* piece);

  std::optional<ReasoningStream> reasoning_;
  std::optional<ToolCallStream> tools_;
  std::optional<ForcedToolCalls> forced_;
};

}  // namespace dscale::server
