#include "io/tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "io/tokenizer/utf8.h"

namespace dscale::unicode {
namespace {

struct CccRange {
  uint32_t first;
  uint32_t last;
  uint8_t ccc;
};
struct Decomposition {
  uint32_t code_point;
  uint16_t offset;
  uint8_t length;
};
struct Composition {
  uint64_t key;  // first << 21 | second
  uint32_t composite;
};
struct CodePointRange {
  uint32_t first;
  uint32_t last;
};

#include "io/tokenizer/unicode_nfc_tables.inc"

// Hangul syllables are composed and decomposed arithmetically (Unicode §3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The smallest code point in any table: everything below it is stable under NFC.
constexpr uint32_t kFirstSuspect = kNfcSuspectRanges[0].first;
static_assert(kFirstSuspect >= 0x300, "IsCertainlyNfc skips lead bytes below 0xCC");

template <typename Range, size_t N>
const Range* FindRange(const Range (&ranges)[N], uint32_t cp) {
  const Range* it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                     [](uint32_t v, const Range& r) { return v < r.first; });
  if (it == std::begin(ranges)) return nullptr;
  --it;
  return cp <= it->last ? it : nullptr;
}

uint8_t CombiningClass(uint32_t cp) {
  if (cp < kFirstSuspect) return 0;
  const CccRange* r = FindRange(kCccRanges, cp);
  return r ? r->ccc : 0;
}

bool IsSuspect(uint32_t cp) {
  return cp >= kFirstSuspect && FindRange(kNfcSuspectRanges, cp) != nullptr;
}

// Appends the full canonical decomposition of `cp`.
void Decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const auto* it =
      std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                       [](const Decomposition& d, uint32_t v) { return d.code_point < v; });
  if (it == std::end(kDecompositions) || it->code_point != cp) {
    out->push_back(cp);
    return;
  }
  out->insert(out->end(), kDecompositionData + it->offset,
              kDecompositionData + it->offset + it->length);
}

// The primary composite of (first, second), or 0 when there is none.
uint32_t Compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const uint64_t key = (uint64_t{first} << 21) | second;
  const auto* it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), key,
                                    [](const Composition& c, uint64_t v) { return c.key < v; });
  return it != std::end(kCompositions) && it->key == key ? it->composite : 0;
}

// Canonical ordering: a stable sort of each run of non-starters by combining class.
void ReorderMarks(std::vector<uint32_t>* cps) {
  auto begin = cps->begin();
  while (begin != cps->end()) {
    if (CombiningClass(*begin) == 0) {
      ++begin;
      continue;
    }
    auto end = begin;
    while (end != cps->end() && CombiningClass(*end) != 0) ++end;
    std::stable_sort(begin, end,
                     [](uint32_t a, uint32_t b) { return CombiningClass(a) < CombiningClass(b); });
    begin = end;
  }
}

// Canonical composition (Unicode §3.11, D117), in place.
void ComposeAll(std::vector<uint32_t>* cps) {
  std::vector<uint32_t>& v = *cps;
  size_t out = 0;
  size_t starter = SIZE_MAX;  // index in the output of the last starter
  uint8_t last_ccc = 0;       // combining class of the last character written
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t cp = v[i];
    const uint8_t ccc = CombiningClass(cp);
    if (starter != SIZE_MAX) {
      const bool adjacent = out == starter + 1;
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        if (const uint32_t composite = Compose(v[starter], cp)) {
          v[starter] = composite;
          continue;
        }
      }
    }
    if (ccc == 0) starter = out;
    last_ccc = ccc;
    v[out++] = cp;
  }
  v.resize(out);
}

}  // namespace

bool IsCertainlyNfc(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    // Lead bytes below 0xCC encode code points below U+0300, all stable.
    if (s[pos] < 0xCC) {
      ++pos;
      continue;
    }
    const utf8::Step step = utf8::Read(text, pos);
    if (!step.valid || IsSuspect(step.code_point)) return false;
    pos += step.length;
  }
  return true;
}

void AppendNfc(std::string_view text, std::string* out) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const utf8::Step step = utf8::Read(text, pos);
    Decompose(step.valid ? step.code_point : utf8::kReplacementCharacter, &cps);
    pos += step.length;
  }
  ReorderMarks(&cps);
  ComposeAll(&cps);
  for (uint32_t cp : cps) utf8::AppendCodePoint(cp, out);
}

const char* NfcUnicodeVersion() { return kNfcUnicodeVersion; }

}  // namespace dscale::unicode
