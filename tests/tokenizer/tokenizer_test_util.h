#pragma once
// Shared by the tokenizer tests: the real Qwen3 tokenizer, loaded once per test binary (the
// vocab has ~150k entries, so loading it per test would dominate the run time).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/check.h"
#include "io/tokenizer/tokenizer.h"

namespace dscale::testing {

inline const std::filesystem::path kQwen3TokenizerDir =
    std::filesystem::path(DSCALE_TEST_DATA_DIR) / "tokenizer" / "qwen3";

inline const Tokenizer& Qwen3Tokenizer() {
  static const Tokenizer tokenizer = [] {
    Result<Tokenizer> loaded = Tokenizer::Load(kQwen3TokenizerDir);
    DSCALE_CHECK_MSG(loaded.ok(), loaded.status().ToString().c_str());
    return std::move(loaded).value();
  }();
  return tokenizer;
}

// Encode that fails the test on error.
inline std::vector<int32_t> EncodeOrDie(const Tokenizer& tokenizer, std::string_view text,
                                        const EncodeOptions& options = {}) {
  Result<std::vector<int32_t>> ids = tokenizer.Encode(text, options);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

inline std::string DecodeOrDie(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                               const DecodeOptions& options = {}) {
  Result<std::string> text = tokenizer.Decode(ids, options);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

}  // namespace dscale::testing
