#pragma once
// The sampling parameters a checkpoint recommends, from its generation_config.json: Hugging
// Face's keys temperature, top_k, top_p, min_p and repetition_penalty (do_sample is not read: a
// file that lists a temperature recommends it, which is how vLLM and SGLang read these files).
// `dscale serve` gives them to the requests that leave those fields out (--sampling-defaults
// model, the default); otherwise, and for what the file does not list, OpenAI's defaults apply
// (temperature 1, no filter, no penalty).

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace dscale::server {

struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;

  bool empty() const { return !temperature && !top_k && !top_p && !min_p && !repetition_penalty; }
  // "temperature 0.6, top_k 20, top_p 0.95" (the listed ones, in that order).
  std::string Describe() const;
};

// `dir`/generation_config.json's defaults; none when the file is absent. A value a request could
// not send (temperature above 2, top_p outside (0, 1], ...) is an error naming the file and key.
Result<SamplingDefaults> LoadSamplingDefaults(const std::string& dir);

}  // namespace dscale::server
