#pragma once
// Sets of Unicode code points as sorted ranges, and the UTF-8 byte sequences that encode a range:
// what lets a regular expression over code points (spec/pattern_dfa.h) run as an automaton over
// the bytes of UTF-8 text.

#include <array>
#include <cstdint>
#include <vector>

namespace dscale {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// The code points lo..hi, both included.
struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;
};

// A set of code points: ranges sorted, disjoint and not adjacent (what Normalized returns).
using CodePointSet = std::vector<CodePointRange>;

// `ranges` (in any order, overlapping or not, each with lo <= hi) as a CodePointSet.
CodePointSet Normalized(CodePointSet ranges);

// The code points of [0, kMaxCodePoint] not in `set` (a CodePointSet). Surrogates are code points
// here like any other; UTF-8 encodes none of them (AppendUtf8Sequences drops them).
CodePointSet Complement(const CodePointSet& set);

// The byte strings of `length` bytes whose i-th byte lies in bytes[i].lo..bytes[i].hi.
struct Utf8Sequence {
  struct ByteRange {
    uint8_t lo = 0;
    uint8_t hi = 0;
  };
  int length = 0;
  std::array<ByteRange, 4> bytes{};
};

// Appends to *out sequences that together match exactly the UTF-8 encodings (RFC 3629: shortest
// form, nothing above U+10FFFF) of the code points of `range` other than the surrogates
// U+D800-U+DFFF; no byte string matches two of them. `range.hi` above kMaxCodePoint counts as
// kMaxCodePoint.
void AppendUtf8Sequences(CodePointRange range, std::vector<Utf8Sequence>* out);

}  // namespace dscale
