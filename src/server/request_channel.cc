#include "server/request_channel.h"

namespace dscale::server {

void RequestChannel::Append(std::string_view text, std::vector<LogprobEntry> logprobs) {
  if (text.empty() && logprobs.empty()) return;
  {
    std::lock_guard lock(mu_);
    text_ += text;
    logprobs_.insert(logprobs_.end(), std::make_move_iterator(logprobs.begin()),
                     std::make_move_iterator(logprobs.end()));
  }
  cv_.notify_one();
}

void RequestChannel::Finish(Outcome outcome, Usage usage, std::string stop_string) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
    outcome_ = outcome;
    usage_ = usage;
    stop_string_ = std::move(stop_string);
  }
  cv_.notify_one();
}

void RequestChannel::Fail(ApiError error) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
    outcome_ = Outcome::kError;
    error_ = std::move(error);
  }
  cv_.notify_one();
}

bool RequestChannel::Wait(std::chrono::milliseconds timeout, Update* out, bool until_done) {
  std::unique_lock lock(mu_);
  const auto ready = [&] { return until_done ? done_ && !done_reported_ : HasNews(); };
  if (!cv_.wait_for(lock, timeout, ready)) return false;
  out->text = std::move(text_);
  text_.clear();
  out->logprobs = std::move(logprobs_);
  logprobs_.clear();
  out->done = done_;
  if (done_) {
    done_reported_ = true;
    out->outcome = outcome_;
    out->usage = usage_;
    out->stop_string = stop_string_;
    out->error = error_;
  }
  return true;
}

}  // namespace dscale::server
