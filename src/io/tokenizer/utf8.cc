#include "io/tokenizer/utf8.h"

#include <cstring>

namespace dscale::utf8 {
namespace {

// Allowed range of the second byte for each lead byte (Unicode Table 3-7); later
// continuation bytes are always 0x80..0xBF.
struct LeadInfo {
  uint32_t length;  // 0: the byte can never start a sequence
  uint8_t second_min;
  uint8_t second_max;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

uint32_t LeadBits(uint8_t b, uint32_t length) {
  static constexpr uint8_t kMasks[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  return b & kMasks[length];
}

}  // namespace

Step Read(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const uint8_t lead = s[pos];
  if (lead < 0x80) return {lead, 1, true, false};
  const LeadInfo info = Lead(lead);
  if (info.length == 0) return {0, 1, false, false};
  uint32_t cp = LeadBits(lead, info.length);
  for (uint32_t i = 1; i < info.length; ++i) {
    if (pos + i >= text.size()) return {0, i, false, true};
    const uint8_t b = s[pos + i];
    const uint8_t lo = i == 1 ? info.second_min : 0x80;
    const uint8_t hi = i == 1 ? info.second_max : 0xBF;
    if (b < lo || b > hi) return {0, i, false, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, info.length, true, false};
}

size_t FindInvalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // Skip ASCII eight bytes at a time: most prompts are mostly ASCII.
    uint64_t word;
    if (pos + 8 <= text.size()) {
      std::memcpy(&word, text.data() + pos, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        pos += 8;
        continue;
      }
    }
    const Step step = Read(text, pos);
    if (!step.valid) return pos;
    pos += step.length;
  }
  return kAllValid;
}

void AppendCodePoint(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void AppendLossy(std::string_view bytes, std::string* out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Step step = Read(bytes, pos);
    if (step.valid) {
      out->append(bytes.substr(pos, step.length));
    } else {
      AppendCodePoint(kReplacementCharacter, out);
    }
    pos += step.length;
  }
}

}  // namespace dscale::utf8
