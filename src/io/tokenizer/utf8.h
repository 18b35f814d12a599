#pragma once
// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), as the
// tokenizer needs it: validation of user text, code point access, and lossy repair.
//
// Repair follows the Unicode "maximal subpart" practice (one U+FFFD per ill-formed
// subsequence), which is what Rust's String::from_utf8_lossy and Python's
// bytes.decode(errors="replace") do, so repaired text matches the reference tokenizer's.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dscale::utf8 {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;
inline constexpr size_t kAllValid = std::string_view::npos;

// One step of reading UTF-8 at some position.
struct Step {
  uint32_t code_point = 0;  // meaningful only when valid
  uint32_t length = 0;      // bytes consumed: the character, or the maximal ill-formed subpart
  bool valid = false;
  bool truncated = false;  // ill-formed only because the text ended: more bytes may complete it
};

// Reads the sequence that starts at text[pos]; requires pos < text.size().
Step Read(std::string_view text, size_t pos);

// Offset of the first byte of the first ill-formed sequence, or kAllValid.
size_t FindInvalid(std::string_view text);

// Appends the UTF-8 encoding of `code_point` (must be a Unicode scalar value).
void AppendCodePoint(uint32_t code_point, std::string* out);

// Appends `bytes` with every ill-formed subsequence replaced by U+FFFD.
void AppendLossy(std::string_view bytes, std::string* out);

inline std::string ToValidUtf8(std::string_view bytes) {
  std::string out;
  AppendLossy(bytes, &out);
  return out;
}

}  // namespace dscale::utf8
