#pragma once
// Text for showing generated ids to a user. Models may emit ids that are not tokens (Qwen3's
// embedding is padded past the vocabulary); those are skipped, and bytes that do not form
// UTF-8 characters become U+FFFD, so the result is always valid UTF-8.

#include <cstdint>
#include <span>
#include <string>

#include "io/tokenizer/tokenizer.h"

namespace dscale {

std::string DisplayText(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                        const DecodeOptions& options = {});

}  // namespace dscale
