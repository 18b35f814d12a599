#pragma once
// The pre-tokenizer: splits text into the pieces that BPE then encodes one by one, with the
// regular expression tokenizer.json's Split step gives (Qwen2's, shared by Qwen2.5 and Qwen3,
// when the folder has vocab.json + merges.txt instead), run by PCRE2 with Unicode properties
// (JIT-compiled where the platform allows).

#include <string_view>
#include <vector>

#include "core/status.h"

struct pcre2_real_code_8;

namespace dscale {

// The split pattern exactly as Qwen's tokenizer.json spells it. (Llama 3's differs in one place:
// numbers split in runs of up to three digits, \p{N}{1,3}.)
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Thread-safe after creation: Split may run concurrently. Movable, not copyable.
class PreTokenizer {
 public:
  // `pattern` in the tokenizers library's regex syntax (\s means Unicode White_Space). A
  // pattern PCRE2 does not compile, or with \S inside a character class: InvalidArgument
  // naming the offset.
  static Result<PreTokenizer> Create(std::string_view pattern);
  static Result<PreTokenizer> CreateQwen2() { return Create(kQwen2SplitPattern); }

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
