#pragma once
// Log-probabilities of committed tokens, as OpenAI's `logprobs` report them: the chosen token's
// and the `top` most likely tokens', under the distribution the token was chosen from — the
// target's, never the drafter's, whatever the length policy (a verified row's logits are the
// target's at that position).
//
// The distribution: for a sampled request (temperature > 0), P of spec/sampling.h
// (softmax(logits / T) restricted to min-p, top-k, then top-p, renormalised), so a token outside
// the filters has log-probability −∞ and is never listed among the top; for a greedy request,
// softmax(logits), the model's own distribution (temperature 0 has no distribution of its own).
// Either way the logits are those after the request's logit rules (spec/logit_rules.h).

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "spec/sampling.h"

namespace dscale {

// OpenAI's bound on top_logprobs.
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;         // of `token`
  std::vector<TopLogprob> top;  // the most likely tokens first (ties: lower id first)
};

// What a request asks for: nothing, or the chosen token's log-probability and `top` alternatives
// (0 .. kMaxTopLogprobs).
struct LogprobsRequest {
  bool enabled = false;
  int32_t top = 0;
};

// The log-probabilities at one position with `logits` [vocab] for the chosen `token`, computed in
// double and rounded to float. `scratch` is reused between calls. InvalidArgument when a logit is
// not finite (the same rows the sampler refuses).
Status ComputeTokenLogprobs(std::span<const float> logits, const SamplingParams& sampling,
                            int32_t token, int32_t top, std::vector<double>* scratch,
                            TokenLogprobs* out);

}  // namespace dscale
