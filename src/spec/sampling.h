#pragma once
// The target distribution P a request samples from: softmax(logits / T) restricted to the tokens
// at least min_p times as likely as the likeliest, then to the top-k of those and then to the
// top-p nucleus, renormalised (vLLM's order). Temperature 0 means greedy (argmax). The logits are
// the target's after the request's logit rules (spec/logit_rules.h), whichever way it chooses.
// The prefix verifier accepts drafts against exactly this P, so speculative sampling draws from
// the same distribution as plain sampling.

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"
#include "spec/logit_rules.h"

namespace dscale {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: no top-k filter
  float top_p = 1.0f;        // 1: no nucleus filter
  float min_p = 0.0f;        // 0: no floor relative to the likeliest token
  uint64_t seed = 0;         // per-request RNG seed
  LogitRules rules;          // bias and penalties, applied before either way of choosing

  bool greedy() const { return temperature <= 0.0f; }
};

// A request's random stream: uniform doubles in [0, 1) from a seeded 64-bit Mersenne Twister.
class RequestRng {
 public:
  explicit RequestRng(uint64_t seed) : engine_(seed) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 engine_;
};

// probs[vocab] = P for one row of logits (temperature > 0). Tokens outside the min-p / top-k /
// top-p set get probability 0. Ties at the top-k / top-p boundary keep the lower token ids; a
// token exactly at the min-p floor is kept.
// A row with a NaN or infinite logit (a model whose activations overflowed) defines no
// distribution: InvalidArgument naming the first such token, and *probs is unspecified.
Status MakeTargetDistribution(std::span<const float> logits, const SamplingParams& params,
                              std::vector<double>* probs);

// MakeTargetDistribution for rows known to be finite (references and tests); a non-finite
// logit there is a bug in the caller. The engine uses MakeTargetDistribution.
void TargetDistribution(std::span<const float> logits, const SamplingParams& params,
                        std::vector<double>* probs);

// OK when the logit greedy decoding chose, logits[token], is finite. A row of NaNs makes
// argmax return an arbitrary token; this catches it (and an infinite logit) at O(1).
Status CheckGreedyChoice(std::span<const float> logits, int32_t token);

// Inverse-CDF draw from `probs` (which sum to 1 within rounding) with uniform u in [0, 1).
int32_t SampleIndex(std::span<const double> probs, double u);

}  // namespace dscale
