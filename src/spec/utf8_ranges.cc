#include "spec/utf8_ranges.h"

#include <algorithm>

namespace dscale {
// Unity builds compile this file in one unit with others: its internals get a namespace of their
// own.
namespace utf8_ranges {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

int EncodedLength(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

// Writes the encoding of `cp` (any value up to kMaxCodePoint) to out; returns its length.
int Encode(uint32_t cp, uint8_t out[4]) {
  const int n = EncodedLength(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
  return n;
}

// Where [lo, hi] must be cut so that each part encodes to one Utf8Sequence: the first code point
// of the upper part, or 0 when it needs no cut. The cuts are, in order: around the surrogates,
// between encoded lengths, and where a continuation byte would otherwise wrap (e.g. U+0F80-U+1040
// is E0 BE 80..E1 81 80, not a product of byte ranges, but U+0F80-U+0FFF and U+1000-U+1040 are).
uint32_t Cut(uint32_t lo, uint32_t hi) {
  if (lo < kSurrogateLo && hi >= kSurrogateLo) return kSurrogateLo;
  if (lo <= kSurrogateHi && hi > kSurrogateHi) return kSurrogateHi + 1;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) return max + 1;
  }
  const int n = EncodedLength(lo);
  for (int i = 1; i < n; ++i) {
    // The low 6*i bits are the last i continuation bytes: where lo and hi differ above them, those
    // bytes must run over their whole range, so lo must start a block of them and hi end one.
    const uint32_t low = (1u << (6 * i)) - 1;
    if ((lo & ~low) == (hi & ~low)) continue;
    if ((lo & low) != 0) return (lo | low) + 1;
    if ((hi & low) != low) return hi & ~low;
  }
  return 0;
}

}  // namespace
}  // namespace utf8_ranges

CodePointSet Normalized(CodePointSet ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  CodePointSet out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CodePointSet Complement(const CodePointSet& set) {
  CodePointSet out;
  uint32_t next = 0;  // the first code point not yet covered by `set` or `out`
  for (const CodePointRange& r : set) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

void AppendUtf8Sequences(CodePointRange range, std::vector<Utf8Sequence>* out) {
  range.hi = std::min(range.hi, kMaxCodePoint);
  if (range.lo > range.hi) return;
  // Parts still to cut, the lowest last so that the sequences come out in code point order.
  std::vector<CodePointRange> todo = {range};
  while (!todo.empty()) {
    const CodePointRange r = todo.back();
    todo.pop_back();
    if (const uint32_t cut = utf8_ranges::Cut(r.lo, r.hi); cut != 0) {
      todo.push_back({cut, r.hi});
      todo.push_back({r.lo, cut - 1});
      continue;
    }
    if (r.lo >= utf8_ranges::kSurrogateLo && r.hi <= utf8_ranges::kSurrogateHi) continue;
    uint8_t lo[4];
    uint8_t hi[4];
    Utf8Sequence seq;
    seq.length = utf8_ranges::Encode(r.lo, lo);
    utf8_ranges::Encode(r.hi, hi);
    for (int i = 0; i < seq.length; ++i) seq.bytes[i] = {lo[i], hi[i]};
    out->push_back(seq);
  }
}

}  // namespace dscale
