#include "io/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <utility>

namespace dscale {
namespace {

// Unicode's White_Space property, which is what \s means in the reference tokenizer's regex
// engines (Oniguruma in the Rust tokenizer, the `regex` module in the Python one). PCRE2's
// \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR, a format character since Unicode 6.3),
// so the pattern spells the set out instead.
constexpr std::string_view kWhiteSpaceClassBody =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites \s and \S in `pattern` as explicit White_Space classes; \S inside a class (which
// no tokenizer file uses) is refused.
Result<std::string> WithExplicitWhiteSpace(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpaceClassBody)
                        : "[" + std::string(kWhiteSpaceClassBody) + "]";
      } else if (next == 'S') {
        if (in_class) {
          return InvalidArgument("pre-tokenizer pattern: \\S inside a character class (offset " +
                                 std::to_string(i - 1) + ") is not supported");
        }
        out += "[^" + std::string(kWhiteSpaceClassBody) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[' && !in_class)
      in_class = true;
    else if (c == ']' && in_class)
      in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

Result<PreTokenizer> PreTokenizer::Create(std::string_view split_pattern) {
  DSCALE_ASSIGN_OR_RETURN(const std::string pattern, WithExplicitWhiteSpace(split_pattern));
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error_code, buffer, sizeof(buffer));
    // The offset is into the rewritten pattern, which differs from the file's only where \s
    // and \S were spelled out.
    return InvalidArgument("pre-tokenizer pattern does not compile at offset " +
                           std::to_string(error_offset) + ": " +
                           reinterpret_cast<const char*>(buffer));
  }
  // JIT is an optimisation: where it is unavailable the interpreter gives the same matches.
  const bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return PreTokenizer(code, jit);
}

PreTokenizer::PreTokenizer(PreTokenizer&& other) noexcept
    : code_(std::exchange(other.code_, nullptr)), jit_(other.jit_) {}

PreTokenizer& PreTokenizer::operator=(PreTokenizer&& other) noexcept {
  if (this != &other) {
    pcre2_code_free(code_);
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
  }
  return *this;
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(code_); }

Status PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  DSCALE_CHECK(code_ != nullptr);
  // Match data is per call: it is the mutable part of matching, so calls can run in parallel.
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code_, nullptr);
  if (match == nullptr) return Status(StatusCode::kInternal, "pre-tokenizer: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  Status status;
  while (pos < text.size()) {
    const int rc =
        jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, 0, match, nullptr)
             : pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = Status(StatusCode::kInternal,
                      "pre-tokenizer: PCRE2 match failed with code " + std::to_string(rc));
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t start = ovector[0], end = ovector[1];
    // Text the pattern skips over stays a piece of its own, as in the reference's "Isolated"
    // split. (Qwen2's pattern matches every character, so this does not happen there.)
    if (start > pos) pieces->push_back(text.substr(pos, start - pos));
    // Every alternative consumes at least one character; an empty match would loop.
    DSCALE_CHECK(end > start);
    pieces->push_back(text.substr(start, end - start));
    pos = end;
  }
  if (status.ok() && pos < text.size()) pieces->push_back(text.substr(pos));
  pcre2_match_data_free(match);
  return status;
}

}  // namespace dscale
