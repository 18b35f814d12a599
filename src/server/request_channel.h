#pragma once
// Hands one request's output from the engine thread to the HTTP thread serving it: text as it
// is generated, then how the request ended. The engine thread writes; one HTTP thread reads.
// Thread-safe.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/logprobs_json.h"
#include "server/metrics.h"
#include "server/openai_response.h"

namespace dscale::server {

class RequestChannel {
 public:
  struct Update {
    std::string text;                    // new text since the last update
    std::vector<LogprobEntry> logprobs;  // the logprobs of tokens since the last update, if asked
    bool done = false;
    // When done:
    Outcome outcome = Outcome::kLength;
    Usage usage;
    std::string stop_string;        // the stop string that ended the output, if one did
    std::optional<ApiError> error;  // outcome kError
  };

  // Engine thread.
  void Append(std::string_view text, std::vector<LogprobEntry> logprobs = {});
  void Finish(Outcome outcome, Usage usage, std::string stop_string = {});
  void Fail(ApiError error);

  // HTTP thread: waits up to `timeout` for new text or the end (only the end when
  // `until_done`: a non-streaming reply need not wake for every token), and moves what there is
  // into *out. False when nothing arrived in time (then *out is untouched).
  bool Wait(std::chrono::milliseconds timeout, Update* out, bool until_done = false);

 private:
  bool HasNews() const {
    return !text_.empty() || !logprobs_.empty() || (done_ && !done_reported_);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  std::vector<LogprobEntry> logprobs_;
  bool done_ = false;
  bool done_reported_ = false;
  Outcome outcome_ = Outcome::kLength;
  Usage usage_;
  std::string stop_string_;
  std::optional<ApiError> error_;
};

}  // namespace dscale::server
