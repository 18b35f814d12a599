#include "server/chat_output.h"

#include <iterator>
#include <utility>

#include "core/check.h"

namespace dscale::server {

ChatOutput::ChatOutput(std::optional<ReasoningStream> reasoning,
                       std::optional<ToolCallStream> tools, std::optional<ForcedToolCalls> forced)
    : reasoning_(std::move(reasoning)), tools_(std::move(tools)), forced_(std::move(forced)) {
  DSCALE_CHECK_MSG(!(tools_ && forced_), "calls are read from the text or forced, not both");
}

ChatOutput::Piece ChatOutput::Push(std::string_view text) {
  Piece piece;
  if (!reasoning_) {
    Answer(text, /*final=*/false, &piece);
    return piece;
  }
  ReasoningStream::Piece split = reasoning_->Push(text);
  piece.reasoning = std::move(split.reasoning);
  Answer(split.answer, /*final=*/false, &piece);
  return piece;
}

ChatOutput::Piece ChatOutput::Finish() {
  Piece piece;
  if (!reasoning_) {
    Answer({}, /*final=*/true, &piece);
    return piece;
  }
  ReasoningStream::Piece split = reasoning_->Finish();
  piece.reasoning = std::move(split.reasoning);
  Answer(split.answer, /*final=*/true, &piece);
  return piece;
}

// More arguments continue the last call: one begun in this piece, else one sent before.
void ChatOutput::AddForced(ForcedToolCalls::Piece part, Piece* piece) {
  piece->content += part.content;
  (piece->calls.empty() ? piece->arguments : piece->calls.back().call.arguments) += part.arguments;
  std::move(part.calls.begin(), part.calls.end(), std::back_inserter(piece->calls));
}

void ChatOutput::Answer(std::string_view answer, bool final, Piece* piece) {
  if (forced_) {
    AddForced(forced_->Push(answer), piece);
    if (final) AddForced(forced_->Finish(), piece);
    return;
  }
  if (!tools_) {
    piece->content += answer;
    return;
  }
  ToolCallStream::Piece split = tools_->Push(answer);
  piece->content += split.content;
  std::move(split.calls.begin(), split.calls.end(), std::back_inserter(piece->calls));
  if (!final) return;
  split = tools_->Finish();
  piece->content += split.content;
  std::move(split.calls.begin(), split.calls.end(), std::back_inserter(piece->calls));
}

}  // namespace dscale::server
