#pragma once
// The pre-tokenizer: splits text into the pieces that BPE then encodes one by one, with the
// regular expression of Qwen2 (shared by Qwen2.5 and Qwen3), run by PCRE2 with Unicode
// properties (JIT-compiled where the platform allows).

#include <string_view>
#include <vector>

#include "core/status.h"

struct pcre2_real_code_8;

namespace dscale {

// The split pattern exactly as Qwen's tokenizer.json spells it.
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Thread-safe after creation: Split may run concurrently. Movable, not copyable.
class PreTokenizer {
 public:
  static Result<PreTokenizer> CreateQwen2();

  PreTokenizer(PreTokenizer&& other) noexcept;
  PreTokenizer& operator=(PreTokenizer&& other) noexcept;
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;
  ~PreTokenizer();

  // Appends the pieces of `text` to *pieces in order; together they cover `text` exactly.
  // `text` must be valid UTF-8 (the caller checks: PCRE2 is told not to).
  Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  bool jit_compiled() const { return jit_; }

 private:
  PreTokenizer(pcre2_real_code_8* code, bool jit) : code_(code), jit_(jit) {}

  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace dscale
