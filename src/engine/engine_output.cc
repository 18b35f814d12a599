// The output rules every committed token goes through: stop ids, max_tokens, stop strings,
// logprobs, streaming, and a request's failure.

#include <algorithm>

#include "engine/engine.h"

namespace dscale {

void Engine::Fail(RequestState& r, const Status& why) {
  r.finish = FinishReason::kError;
  r.result.error = "position " + std::to_string(r.tokens.size()) + ": " + why.message();
  if (r.params.on_tokens) {
    r.params.on_tokens({.id = r.id, .new_tokens = {}, .finished = r.finish});
  }
}

Status Engine::LogprobsOf(RequestState& r, std::span<const float> rows,
                          std::span<const int32_t> tokens) {
  if (!r.params.logprobs.enabled) return Status::Ok();
  const int64_t vocab = target_.config().vocab_size;
  DSCALE_CHECK(static_cast<int64_t>(rows.size()) == static_cast<int64_t>(tokens.size()) * vocab);
  pending_logprobs_.resize(tokens.size());
  for (size_t j = 0; j < tokens.size(); ++j) {
    DSCALE_RETURN_IF_ERROR(ComputeTokenLogprobs(rows.subspan(j * vocab, vocab), r.params.sampling,
                                                tokens[j], r.params.logprobs.top, &probs_,
                                                &pending_logprobs_[j]));
  }
  return Status::Ok();
}

void Engine::AppendOutput(RequestState& r, std::span<const int32_t> tokens) {
  const size_t before = r.output().size();
  const bool with_logprobs = r.params.logprobs.enabled;
  if (with_logprobs) DSCALE_CHECK(pending_logprobs_.size() == tokens.size());
  for (size_t j = 0; j < tokens.size(); ++j) {
    const int32_t token = tokens[j];
    r.tokens.push_back(token);
    if (with_logprobs) r.logprobs.push_back(std::move(pending_logprobs_[j]));
    const auto& stops = r.params.stop_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      r.finish = FinishReason::kStop;
      break;
    }
    // The shortest output whose text contains a stop string ends the request.
    if (!r.params.stop_strings.empty() &&
        r.stop_scanner.Push(r.params.stop_strings, config_.token_text(token))) {
      r.finish = FinishReason::kStop;
      break;
    }
    if (static_cast<int32_t>(r.output().size()) >= r.params.max_tokens) {
      r.finish = FinishReason::kLength;
      break;
    }
  }
  stats_.output_tokens += static_cast<int64_t>(r.output().size() - before);
  if (r.params.on_tokens) {
    r.params.on_tokens(
        {.id = r.id,
         .new_tokens = r.output().subspan(before),
         .new_logprobs = with_logprobs ? std::span<const TokenLogprobs>(r.logprobs).subspan(before)
                                       : std::span<const TokenLogprobs>(),
         .finished = r.finish});
  }
}

}  // namespace dscale
