#pragma once
// What one choice's channel updates become in the response: the SSE events of a stream, or the
// choice of a whole response. Where the request has tools (tool_choice "auto"), its
// ToolCallStream splits the text into content and calls, and an output that ended by itself
// after calling tools finishes with "tool_calls".

#include <cstdint>
#include <string>

#include "server/openai_response.h"
#include "server/request_channel.h"
#include "server/tool_call_stream.h"

namespace dscale::server {

// "stop", "length", or "tool_calls" for a stop after calls `tools` returned.
std::string FinishReasonOf(Outcome outcome, const ToolCallStream* tools);

// The events of one update: new content (with its logprobs), the calls that closed in it, and
// at its end the finishing chunk. `text_offset`: the choice's characters so far, which logprobs'
// text offsets count from. The error of a failed choice, the usage and [DONE] are the stream's.
// `tools`: null where the text is all content.
std::string ChoiceEvents(const ResponseMeta& meta, bool include_usage, int32_t index,
                         const RequestChannel::Update& update, ToolCallStream* tools,
                         int64_t* text_offset);

// A whole response's choice from the final update of a choice that did not fail.
Choice WholeChoice(RequestChannel::Update update, ToolCallStream* tools);

}  // namespace dscale::server
