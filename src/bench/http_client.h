#pragma once
// The request loop against a running server speaking OpenAI's protocol: chat turns to
// POST /v1/chat/completions, or a prompt of token ids (the chat template applied by the client,
// so that every engine sees the same tokens) to POST /v1/completions; "stream": true either way
// (the reply is server-sent events whose data lines are JSON chunks, ending with
// "data: [DONE]"). c client threads each send their next request when the previous reply has
// ended (closed), or not before its arrival time (open; its latency then counts from that time,
// as in the in-process loop, request_loop.h). Time to first token is the arrival of the first chunk
// with generated text; output tokens come from the final chunk's usage.completion_tokens (requested
// with stream_options.include_usage), else from the number of chunks with text.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/request_loop.h"
#include "core/status.h"

namespace dscale::bench {

// Splits a server-sent event stream into the data payloads of its events. Bytes may arrive in
// any pieces; lines end in "\n" or "\r\n"; an event ends at an empty line; several "data:"
// lines of one event are joined with "\n"; comments (":") and other fields are ignored.
class SseParser {
 public:
  // Appends the payloads of the events completed by `bytes` to `events`.
  void Feed(std::string_view bytes, std::vector<std::string>* events);

 private:
  void Line(std::string_view line, std::vector<std::string>* events);

  std::string pending_;  // an unfinished line
  std::string data_;     // the current event's data
  bool has_data_ = false;
};

// What one streamed chat completion produced, from its chunks.
struct StreamTally {
  int64_t content_chunks = 0;
  int64_t usage_tokens = -1;  // usage.completion_tokens when the server sent it
  bool done = false;          // "[DONE]" seen
  std::string error;          // an "error" object's message
  int64_t OutputTokens() const { return usage_tokens >= 0 ? usage_tokens : content_chunks; }
};
// Folds one data payload into `tally`; true when it carried generated text (a chat chunk's
// delta.content or a completion chunk's text).
bool TallyChunk(std::string_view payload, StreamTally* tally);

struct ServerTarget {
  std::string url;    // "http://host:port"
  std::string model;  // the "model" field every request sends
  std::string path = "/v1/chat/completions";
};

struct ChatRequest {
  std::string system;  // a system turn before it, when not empty (the shared-prefix workload)
  std::string prompt;  // one user turn
  // When not empty: the whole prompt as token ids, sent to /v1/completions instead of the turns.
  std::vector<int32_t> prompt_ids;
  int32_t max_tokens = 2048;
  float temperature = 0.0f;
  uint64_t seed = 0;
};

// The request body for one request, and the path it goes to.
std::string ChatRequestBody(const ServerTarget& target, const ChatRequest& request);
std::string RequestPath(const ServerTarget& target, const ChatRequest& request);

// The id of the one model the server at `url` serves, from GET /v1/models ({"data": [{"id":
// ...}, ...]}, as OpenAI's API, vLLM, SGLang, llama-server and `dscale serve` answer): what the
// requests send as "model" unless told otherwise. An error names the URL and says what came back:
// no answer, another status, a body without model ids, or several models (listed, to choose one).
Result<std::string> ServedModelId(const std::string& url);

// Runs `requests` against the server with `shape.concurrency` client threads, at the shape's
// arrival times when it has them. The first failure (connection, HTTP status, error chunk,
// stream without [DONE]) stops the run and is returned.
Result<LoopOutcome> RunServerLoop(const ServerTarget& target, std::span<const ChatRequest> requests,
                                  const LoopShape& shape, const std::function<void()>& on_done);

}  // namespace dscale::bench
