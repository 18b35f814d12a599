#include "server/output_items.h"

#include "core/check.h"
#include "server/choice_events.h"

namespace dscale::server {

std::string OutputItems::Update(const RequestChannel::Update& update, ChatOutput* output) {
  const ChatOutput::Piece piece = SplitUpdate(update, output);
  std::string out;
  if (!piece.reasoning.empty()) {
    if (open_ != Kind::kReasoning) out += Open(Kind::kReasoning, nullptr);
    out += Text(Kind::kReasoning, piece.reasoning, {});
  }
  if (!piece.content.empty()) {
    if (open_ != Kind::kText) out += Open(Kind::kText, nullptr);
    out += Text(Kind::kText, piece.content, update.logprobs);
  }
  for (const ToolCall& call : piece.calls) {
    out += Open(Kind::kCall, &call);
    if (!call.call.arguments.empty()) out += Arguments(call.call.arguments);
  }
  if (!piece.arguments.empty()) {
    DSCALE_CHECK(open_ == Kind::kCall);
    out += Arguments(piece.arguments);
  }
  if (update.done) {
    out += Close(/*cut_off=*/update.outcome == Outcome::kLength);
    out += Finished(update);
  }
  return out;
}

std::string OutputItems::Open(Kind kind, const ToolCall* call) {
  std::string out = Close(/*cut_off=*/false);
  open_ = kind;
  return out + Opened(kind, call);
}

std::string OutputItems::Close(bool cut_off) {
  if (open_ == Kind::kNone) return {};
  const Kind kind = open_;
  open_ = Kind::kNone;
  return Closed(kind, cut_off);
}

}  // namespace dscale::server
