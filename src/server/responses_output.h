#pragma once
// The Responses API's reply (server/responses_request.h): a "response" object whose output is
// a list of items in the order the model wrote them —
//   its reasoning      {"type": "reasoning", "id": "rs_…", "summary": [],
//                       "content": [{"type": "reasoning_text", "text"}]}
//   its answer         {"type": "message", "id": "msg_…", "status", "role": "assistant",
//                       "content": [{"type": "output_text", "text", "annotations": [],
//                                    "logprobs": [...]}]}
//   each call          {"type": "function_call", "id": "fc_…", "call_id": "call_…", "name",
//                       "arguments", "status"}
// — with status "completed", "incomplete" (incomplete_details.reason "max_output_tokens": the
// output was cut off, and so was its last item), "failed" (error: the request failed) or
// "cancelled", and usage in input and output tokens.
//
// Streamed, the events that build it, each "event: <type>\ndata: <json>\n\n" with a
// sequence_number counting from 0: response.created and response.in_progress; per item
// response.output_item.added, for text response.content_part.added, the deltas
// (response.output_text.delta, response.reasoning_text.delta,
// response.function_call_arguments.delta), their .done, response.content_part.done and
// response.output_item.done; at the end response.completed, response.incomplete or
// response.failed, each with the whole response. No "[DONE]": OpenAI sends none here.
//
// Log-probabilities (asked for): an update's tokens are listed with the answer's text when the
// update carries some, so the tokens of an update in which the reasoning ends and the answer
// begins are all the answer's.

#include <cstdint>
#include <optional>
#include <string>

#include "server/openai_response.h"
#include "server/output_items.h"

namespace dscale::server {

class ResponsesOutput : public OutputItems {
 public:
  // `echo`: the request's settings the response repeats (ApiRequest::Responses::echo, with
  // temperature, top_p and store as used); `id_seed` makes the items' ids.
  ResponsesOutput(ResponseMeta meta, ResponseJson echo, uint64_t id_seed);

  std::string Open() override;
  ResponseJson Reply() const override;  // the response object

 private:
  std::string Opened(Kind kind, const ToolCall* call) override;
  std::string Text(Kind kind, const std::string& text,
                   std::span<const LogprobEntry> logprobs) override;
  std::string Arguments(const std::string& arguments) override;
  std::string Closed(Kind kind, bool cut_off) override;
  std::string Finished(const RequestChannel::Update& update) override;

  std::string Event(const char* type, ResponseJson fields);
  ResponseJson& last_item() { return output_[output_.size() - 1]; }
  ResponseJson ItemRef() const;  // {"item_id", "output_index"} of the last item

  ResponseMeta meta_;
  ResponseJson echo_;
  uint64_t id_seed_;
  int64_t sequence_ = 0;
  ResponseJson output_ = ResponseJson::array();
  std::string status_ = "in_progress";
  std::optional<Usage> usage_;
  std::optional<ApiError> error_;
};

}  // namespace dscale::server
