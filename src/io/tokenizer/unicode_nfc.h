#pragma once
// Unicode Normalization Form C, which Qwen's tokenizer applies to text before splitting it
// (its tokenizer.json names an NFC normalizer; the Python tokenizer calls
// unicodedata.normalize("NFC", ...)). Without it, "e" + U+0301 would encode differently from
// "é" and ids would diverge from the reference on decomposed input.
//
// The data tables are generated (scripts/gen_unicode_nfc_tables.py); NfcUnicodeVersion()
// says which Unicode version they hold.

#include <string>
#include <string_view>

namespace dscale::unicode {

// True when `text` (valid UTF-8) is certainly in NFC. A fast scan: it only looks for code
// points that could change under NFC (Quick_Check No/Maybe, or a non-zero combining class),
// so it may return false for some texts that are already normalized.
bool IsCertainlyNfc(std::string_view text);

// Appends the NFC form of `text` (valid UTF-8) to *out.
void AppendNfc(std::string_view text, std::string* out);

const char* NfcUnicodeVersion();

}  // namespace dscale::unicode
