// The text layer under the tokenizer: strict UTF-8, NFC, and the byte-level alphabet.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/tokenizer/byte_level.h"
#include "io/tokenizer/unicode_nfc.h"
#include "io/tokenizer/utf8.h"

namespace dscale {
namespace {

using namespace std::literals;

TEST(Utf8Test, ReadsWellFormedSequences) {
  const std::string_view text = "a\u00e9\u4e2d\U0001F600"sv;
  const uint32_t expected[] = {'a', 0xE9, 0x4E2D, 0x1F600};
  size_t pos = 0;
  for (uint32_t cp : expected) {
    const utf8::Step step = utf8::Read(text, pos);
    ASSERT_TRUE(step.valid);
    EXPECT_EQ(step.code_point, cp);
    pos += step.length;
  }
  EXPECT_EQ(pos, text.size());
  EXPECT_EQ(utf8::FindInvalid(text), utf8::kAllValid);
  EXPECT_EQ(utf8::FindInvalid(""), utf8::kAllValid);
}

TEST(Utf8Test, FindsTheFirstIllFormedSequence) {
  EXPECT_EQ(utf8::FindInvalid("0123456789abcdef\xC3"sv), 16u);  // after the 8-byte fast path
  EXPECT_EQ(utf8::FindInvalid("\xC1\xBF"sv), 0u);               // overlong 2-byte
  EXPECT_EQ(utf8::FindInvalid("\xE0\x9F\xBF"sv), 0u);           // overlong 3-byte
  EXPECT_EQ(utf8::FindInvalid("\xF0\x8F\xBF\xBF"sv), 0u);       // overlong 4-byte
  EXPECT_EQ(utf8::FindInvalid("x\xED\xBF\xBF"sv), 1u);          // surrogate U+DFFF
  EXPECT_EQ(utf8::FindInvalid("\xEF\xBF\xBF\xF4\x8F\xBF\xBF"sv), utf8::kAllValid);  // maxima
  EXPECT_EQ(utf8::FindInvalid("\xF5\x80\x80\x80"sv), 0u);
}

TEST(Utf8Test, TruncationIsToldApartFromIllFormedness) {
  const utf8::Step cut = utf8::Read("\xF0\x9F\x98"sv, 0);
  EXPECT_FALSE(cut.valid);
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(cut.length, 3u);
  const utf8::Step broken = utf8::Read(
      "\xF0\x9F"
      "A"sv,
      0);
  EXPECT_FALSE(broken.valid);
  EXPECT_FALSE(broken.truncated);
  EXPECT_EQ(broken.length, 2u);  // the maximal subpart, then "A" is read on its own
}

// One U+FFFD per maximal ill-formed subpart (Unicode's recommended practice, Table 3-8).
TEST(Utf8Test, LossyRepairReplacesMaximalSubparts) {
  EXPECT_EQ(utf8::ToValidUtf8("a\x80\x80"
                              "b"sv),
            "a\uFFFD\uFFFDb");
  EXPECT_EQ(utf8::ToValidUtf8("\xE4\xB8"
                              "b"sv),
            "\uFFFDb");
  EXPECT_EQ(utf8::ToValidUtf8("\xED\xA0\x80"sv), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(utf8::ToValidUtf8("\xF1\x80\x80\xE1\x80\xC2"sv), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(utf8::ToValidUtf8("ok \u00e9"sv), "ok \u00e9");
}

std::string Nfc(std::string_view text) {
  std::string out;
  unicode::AppendNfc(text, &out);
  return out;
}

TEST(NfcTest, KnownCases) {
  EXPECT_EQ(Nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(Nfc("\u212b"), "\u00c5");              // singleton
  EXPECT_EQ(Nfc("a\u0302\u0323"), "\u1ead");       // reordered, then composed
  EXPECT_EQ(Nfc("\u1100\u1161\u11a8"), "\uac01");  // Hangul L V T
  EXPECT_EQ(Nfc("\u0958"), "\u0915\u093c");        // composition exclusion
  EXPECT_EQ(Nfc("\u0344"), "\u0308\u0301");        // non-starter decomposition
  EXPECT_EQ(Nfc("ascii only"), "ascii only");
  EXPECT_TRUE(unicode::IsCertainlyNfc("caf\u00e9 \u4e2d\u6587 \U0001F600"));
  EXPECT_FALSE(unicode::IsCertainlyNfc("cafe\u0301"));
  EXPECT_STREQ(unicode::NfcUnicodeVersion(), "14.0.0");
}

// Random mixes of bases, combining marks, Hangul jamo and exclusions, normalized by
// Python's unicodedata (the same Unicode version as the tables).
TEST(NfcTest, MatchesUnicodedataOnRandomMixes) {
  std::ifstream in(std::filesystem::path(DSCALE_TEST_DATA_DIR) / "tokenizer" / "nfc_cases.jsonl");
  ASSERT_TRUE(in.good());
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(row.is_array() && row.size() == 2 && row[0].is_string() && row[1].is_string());
    const std::string input = row[0].get<std::string>();
    const std::string expected = row[1].get<std::string>();
    EXPECT_EQ(Nfc(input), expected) << line;
    if (unicode::IsCertainlyNfc(input)) {
      EXPECT_EQ(input, expected) << line;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 400);
}

TEST(ByteLevelTest, AlphabetRoundTrips) {
  EXPECT_EQ(byte_level::CharForByte(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_level::CharForByte('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_level::CharForByte('A'), uint32_t{'A'});
  EXPECT_EQ(byte_level::CharForByte(0xAD), 0x143u);  // the last remapped byte
  std::string all;
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(byte_level::ByteForChar(byte_level::CharForByte(static_cast<uint8_t>(b))), b);
    all.push_back(static_cast<char>(b));
  }
  std::string spelled, bytes;
  byte_level::AppendEncoded(all, &spelled);
  ASSERT_TRUE(byte_level::AppendDecoded(spelled, &bytes));
  EXPECT_EQ(bytes, all);
  EXPECT_EQ(byte_level::ByteForChar(0x144), -1);
  EXPECT_FALSE(byte_level::AppendDecoded("\u4e2d", &bytes));
}

}  // namespace
}  // namespace dscale
