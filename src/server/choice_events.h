#pragma once
// What one choice's channel updates become in the response: the SSE events of a stream, or the
// choice of a whole response. Where the request splits its chat output (ChatOutput: reasoning
// with thinking on, calls to tools with tool_choice "auto" or forced), the text goes through it,
// and an output that ended by itself after calling tools finishes with "tool_calls".

#include <cstdint>
#include <string>

#include "server/chat_output.h"
#include "server/openai_response.h"
#include "server/request_channel.h"

namespace dscale::server {

// The update's text split by `output` (null: all of it is content); at the update that ends
// the choice, with all that `output` still held.
ChatOutput::Piece SplitUpdate(const RequestChannel::Update& update, ChatOutput* output);

// "stop", "length", or "tool_calls" for a stop after calls `output` returned.
std::string FinishReasonOf(Outcome outcome, const ChatOutput* output);

// The events of one update: new reasoning and content (with the update's logprobs), the calls
// that closed in it, and at its end the finishing chunk. `text_offset`: the choice's characters
// so far, which logprobs' text offsets count from. The error of a failed choice, the usage and
// [DONE] are the stream's. `output`: null where the text is all content.
std::string ChoiceEvents(const ResponseMeta& meta, bool include_usage, int32_t index,
                         const RequestChannel::Update& update, ChatOutput* output,
                         int64_t* text_offset);

// A whole response's choice from the final update of a choice that did not fail.
Choice WholeChoice(RequestChannel::Update update, ChatOutput* output);

}  // namespace dscale::server
