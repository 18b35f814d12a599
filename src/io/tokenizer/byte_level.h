#pragma once
// The byte-level alphabet of GPT-2-style BPE vocabularies (Qwen's included): each of the 256
// byte values is written as one printable Unicode character, so that vocab.json and
// merges.txt can hold arbitrary bytes as text. Printable Latin-1 bytes stand for
// themselves; the other 68 (controls, space, 0x7F..0xA0, 0xAD) map in order to U+0100 and
// up, so a space is "Ġ" (U+0120) and a newline "Ċ" (U+010A).

#include <cstdint>
#include <string>
#include <string_view>

namespace dscale::byte_level {

// The character that stands for byte `b`.
uint32_t CharForByte(uint8_t b);

// The byte that `code_point` stands for, or -1 when it is outside the alphabet.
int ByteForChar(uint32_t code_point);

// Appends the byte-level spelling (UTF-8) of raw `bytes`.
void AppendEncoded(std::string_view bytes, std::string* out);

// Appends the raw bytes spelled by `token`. Returns false, leaving *out partly written, when
// `token` is not valid UTF-8 or holds a character outside the alphabet.
bool AppendDecoded(std::string_view token, std::string* out);

}  // namespace dscale::byte_level
