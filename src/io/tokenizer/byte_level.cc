#include "io/tokenizer/byte_level.h"

#include <array>

#include "io/tokenizer/utf8.h"

namespace dscale::byte_level {
namespace {

constexpr bool StandsForItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint16_t, 256> MakeByteToChar() {
  std::array<uint16_t, 256> table{};
  uint16_t next = 256;
  for (int b = 0; b < 256; ++b) {
    table[b] = StandsForItself(b) ? static_cast<uint16_t>(b) : next++;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kByteToChar = MakeByteToChar();
// Every character of the alphabet is below U+0144 (256 + 68).
constexpr uint32_t kAlphabetEnd = 256 + 68;

constexpr std::array<int16_t, kAlphabetEnd> MakeCharToByte() {
  std::array<int16_t, kAlphabetEnd> table{};
  for (auto& v : table) v = -1;
  for (int b = 0; b < 256; ++b) table[kByteToChar[b]] = static_cast<int16_t>(b);
  return table;
}

constexpr std::array<int16_t, kAlphabetEnd> kCharToByte = MakeCharToByte();

// UTF-8 of each byte's character, precomputed (and constant-initialized, so usable from
// other static initializers): encoding is on the hot path of BPE. All characters are below
// U+0800, so two bytes suffice.
struct EncodedChar {
  char bytes[2];
  uint8_t length;
};

constexpr std::array<EncodedChar, 256> MakeEncodedChars() {
  std::array<EncodedChar, 256> table{};
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = kByteToChar[b];
    if (cp < 0x80) {
      table[b] = {{static_cast<char>(cp), 0}, 1};
    } else {
      table[b] = {{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))}, 2};
    }
  }
  return table;
}

constexpr std::array<EncodedChar, 256> kEncodedChars = MakeEncodedChars();

}  // namespace

uint32_t CharForByte(uint8_t b) { return kByteToChar[b]; }

int ByteForChar(uint32_t code_point) {
  return code_point < kAlphabetEnd ? kCharToByte[code_point] : -1;
}

void AppendEncoded(std::string_view bytes, std::string* out) {
  for (char c : bytes) {
    const EncodedChar& e = kEncodedChars[static_cast<uint8_t>(c)];
    out->append(e.bytes, e.length);
  }
}

bool AppendDecoded(std::string_view token, std::string* out) {
  size_t pos = 0;
  while (pos < token.size()) {
    const utf8::Step step = utf8::Read(token, pos);
    if (!step.valid) return false;
    const int b = ByteForChar(step.code_point);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
    pos += step.length;
  }
  return true;
}

}  // namespace dscale::byte_level
