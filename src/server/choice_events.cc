#include "server/choice_events.h"

#include <iterator>
#include <utility>

namespace dscale::server {
namespace {

// The update's text split by `tools` (at the update that ends the choice, all that was held).
ToolCallStream::Piece Split(const RequestChannel::Update& update, ToolCallStream* tools) {
  if (tools == nullptr) return {.content = update.text, .calls = {}};
  ToolCallStream::Piece piece = tools->Push(update.text);
  if (update.done) {
    ToolCallStream::Piece rest = tools->Finish();
    piece.content += rest.content;
    std::move(rest.calls.begin(), rest.calls.end(), std::back_inserter(piece.calls));
  }
  return piece;
}

}  // namespace

std::string FinishReasonOf(Outcome outcome, const ToolCallStream* tools) {
  if (outcome == Outcome::kStop && tools != nullptr && tools->calls() > 0) return "tool_calls";
  return outcome == Outcome::kStop ? "stop" : "length";
}

std::string ChoiceEvents(const ResponseMeta& meta, bool include_usage, int32_t index,
                         const RequestChannel::Update& update, ToolCallStream* tools,
                         int64_t* text_offset) {
  std::string out;
  const ToolCallStream::Piece piece = Split(update, tools);
  if (!piece.content.empty() || !update.logprobs.empty()) {
    out += SseEvent(ChunkJson(meta, {.index = index,
                                     .text = piece.content,
                                     .logprobs = update.logprobs,
                                     .text_offset = *text_offset,
                                     .with_usage_null = include_usage}));
    *text_offset += TextLength(update.logprobs);
  }
  if (!piece.calls.empty()) {
    out += SseEvent(ChunkJson(
        meta, {.index = index,
               .tool_calls = piece.calls,
               .first_tool_call = tools->calls() - static_cast<int32_t>(piece.calls.size()),
               .with_usage_null = include_usage}));
  }
  if (update.done && update.outcome != Outcome::kError) {
    out += SseEvent(ChunkJson(meta, {.index = index,
                                     .finish_reason = FinishReasonOf(update.outcome, tools),
                                     .with_usage_null = include_usage}));
  }
  return out;
}

Choice WholeChoice(RequestChannel::Update update, ToolCallStream* tools) {
  ToolCallStream::Piece piece = Split(update, tools);
  return {.text = std::move(piece.content),
          .finish_reason = FinishReasonOf(update.outcome, tools),
          .logprobs = std::move(update.logprobs),
          .tool_calls = std::move(piece.calls)};
}

}  // namespace dscale::server
