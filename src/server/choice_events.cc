#include "server/choice_events.h"

#include <iterator>
#include <utility>

#include "core/check.h"

namespace dscale::server {

ChatOutput::Piece SplitUpdate(const RequestChannel::Update& update, ChatOutput* output) {
  if (output == nullptr) return {.reasoning = {}, .content = update.text, .calls = {}};
  ChatOutput::Piece piece = output->Push(update.text);
  if (update.done) {
    ChatOutput::Piece rest = output->Finish();
    piece.reasoning += rest.reasoning;
    piece.content += rest.content;
    (piece.calls.empty() ? piece.arguments : piece.calls.back().call.arguments) += rest.arguments;
    std::move(rest.calls.begin(), rest.calls.end(), std::back_inserter(piece.calls));
  }
  return piece;
}

std::string FinishReasonOf(Outcome outcome, const ChatOutput* output) {
  if (outcome == Outcome::kStop && output != nullptr && output->calls() > 0) return "tool_calls";
  return outcome == Outcome::kStop ? "stop" : "length";
}

std::string ChoiceEvents(const ResponseMeta& meta, bool include_usage, int32_t index,
                         const RequestChannel::Update& update, ChatOutput* output,
                         int64_t* text_offset) {
  std::string out;
  const ChatOutput::Piece piece = SplitUpdate(update, output);
  if (!piece.reasoning.empty() || !piece.content.empty() || !update.logprobs.empty()) {
    out += SseEvent(ChunkJson(meta, {.index = index,
                                     .text = piece.content,
                                     .reasoning = piece.reasoning,
                                     .logprobs = update.logprobs,
                                     .text_offset = *text_offset,
                                     .with_usage_null = include_usage}));
    *text_offset += TextLength(update.logprobs);
  }
  if (!piece.calls.empty()) {
    out += SseEvent(ChunkJson(
        meta, {.index = index,
               .tool_calls = piece.calls,
               .first_tool_call = output->calls() - static_cast<int32_t>(piece.calls.size()),
               .with_usage_null = include_usage}));
  }
  if (!piece.arguments.empty()) {
    out += SseEvent(ChunkJson(meta, {.index = index,
                                     .call_arguments = piece.arguments,
                                     .call_arguments_of = output->calls() - 1,
                                     .with_usage_null = include_usage}));
  }
  if (update.done && update.outcome != Outcome::kError) {
    out += SseEvent(ChunkJson(meta, {.index = index,
                                     .finish_reason = FinishReasonOf(update.outcome, output),
                                     .with_usage_null = include_usage}));
  }
  return out;
}

Choice WholeChoice(RequestChannel::Update update, ChatOutput* output) {
  ChatOutput::Piece piece = SplitUpdate(update, output);
  // The whole output in one update: a call's arguments are in the call.
  DSCALE_CHECK(piece.arguments.empty() || !piece.calls.empty());
  if (!piece.arguments.empty()) piece.calls.back().call.arguments += piece.arguments;
  Choice choice{.text = std::move(piece.content),
                .finish_reason = FinishReasonOf(update.outcome, output),
                .logprobs = std::move(update.logprobs),
                .tool_calls = std::move(piece.calls)};
  if (output != nullptr && output->splits_reasoning()) {
    choice.reasoning = std::move(piece.reasoning);
  }
  return choice;
}

}  // namespace dscale::server
