#pragma once
// One chat output as the Responses and Messages APIs return it: a list of items (blocks) in
// the order the model wrote them — its reasoning, its answer's text, each call to a tool. A
// piece of reasoning or text continues the open item of its kind or opens one, closing the one
// before; each call opens an item of its own, which a forced call's later arguments continue;
// the update that ends the request closes the last. This class holds that order; each API's
// subclass writes the items and the events that build them. Not thread-safe: one per request.

#include <span>
#include <string>

#include "server/chat_output.h"
#include "server/logprobs_json.h"
#include "server/request_channel.h"

namespace dscale::server {

class OutputItems {
 public:
  enum class Kind { kNone, kReasoning, kText, kCall };

  virtual ~OutputItems() = default;

  // The events that open a stream.
  virtual std::string Open() = 0;
  // The events of one channel update, split by `output` (null: the text is all answer); with
  // the update that ends the request, the closing ones.
  std::string Update(const RequestChannel::Update& update, ChatOutput* output);
  // The whole reply as it stands: whole after the update that ended the request.
  virtual ResponseJson Reply() const = 0;

 protected:
  OutputItems() = default;
  OutputItems(const OutputItems&) = default;
  OutputItems& operator=(const OutputItems&) = default;

  // Each returns the events it makes. An item of `kind` opened (`call`: a call's name and id).
  virtual std::string Opened(Kind kind, const ToolCall* call) = 0;
  // More text of the open reasoning or text item; `logprobs`: its tokens', where asked for.
  virtual std::string Text(Kind kind, const std::string& text,
                           std::span<const LogprobEntry> logprobs) = 0;
  // More of the open call's arguments.
  virtual std::string Arguments(const std::string& arguments) = 0;
  // The open item ended; `cut_off`: by the output's token limit.
  virtual std::string Closed(Kind kind, bool cut_off) = 0;
  // The request ended (its last item closed).
  virtual std::string Finished(const RequestChannel::Update& update) = 0;

 private:
  std::string Open(Kind kind, const ToolCall* call);
  std::string Close(bool cut_off);

  Kind open_ = Kind::kNone;
};

}  // namespace dscale::server
