// Encoding against known ids: llama.cpp's qwen2 vectors, ids established with an independent
// implementation, added tokens, NFC, invalid UTF-8, and inputs that stress the splitter.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace dscale {
namespace {

using namespace std::literals;
using testing::DecodeOrDie;
using testing::EncodeOrDie;
using testing::Qwen3Tokenizer;

constexpr int32_t kEndOfText = 151643;
constexpr int32_t kImStart = 151644;
constexpr int32_t kImEnd = 151645;
constexpr int32_t kThink = 151667;

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TokenizerTest, KnownIds) {
  const Tokenizer& tok = Qwen3Tokenizer();
  EXPECT_EQ(EncodeOrDie(tok, "Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(EncodeOrDie(tok, " Hello world"), (std::vector<int32_t>{21927, 1879}));
  EXPECT_EQ(EncodeOrDie(tok, ""), std::vector<int32_t>{});
  EXPECT_EQ(tok.id_limit(), 151669);
  EXPECT_EQ(tok.eos_token_id(), kImEnd);
  EXPECT_EQ(tok.AddedTokenId("<|endoftext|>"), kEndOfText);
  EXPECT_EQ(tok.AddedTokenId("<think>"), kThink);
  EXPECT_EQ(tok.AddedTokenId("Hello"), std::nullopt);
}

// llama.cpp's test-tokenizer-0 vectors for qwen2: inputs separated by a marker line in
// .inp, one line of space-separated ids per input in .out.
TEST(TokenizerTest, LlamaCppQwen2Vectors) {
  const std::filesystem::path dir =
      std::filesystem::path(DSCALE_TEST_DATA_DIR) / "llama_cpp_vocab_tests";
  const std::string inp = ReadAll(dir / "ggml-vocab-qwen2.gguf.inp");
  const std::string out = ReadAll(dir / "ggml-vocab-qwen2.gguf.out");
  constexpr std::string_view kMarker = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(kMarker, pos);
    ASSERT_NE(end, std::string::npos) << "the .inp file ends with a marker";
    inputs.push_back(inp.substr(pos, end - pos));
    pos = end + kMarker.size();
  }
  std::vector<std::vector<int32_t>> expected;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    expected.emplace_back();
    for (int32_t id; ids >> id;) expected.back().push_back(id);
  }
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(EncodeOrDie(Qwen3Tokenizer(), inputs[i]), expected[i]) << "case " << i;
    EXPECT_EQ(DecodeOrDie(Qwen3Tokenizer(), expected[i]), inputs[i]) << "case " << i;
  }
}

// Ids computed by an independent implementation of the reference algorithm (Python, with
// the `regex` module and unicodedata NFC, as transformers' Qwen2Tokenizer does it). The
// cases target the places where implementations drift: decomposed input (NFC), U+0085 and
// U+180E (what \s means), CJK/Arabic/Devanagari/Thai, emoji with modifiers and ZWJ, CRLF,
// digits (one per token), non-ASCII digits, control bytes, and added tokens.
struct IdCase {
  std::string_view text;
  std::vector<int32_t> ids;
};

const std::vector<IdCase>& CrossCheckedCases() {
  static const std::vector<IdCase> cases = {
#include "cross_checked_ids.inc"
  };
  return cases;
}

TEST(TokenizerTest, MatchesIndependentImplementation) {
  for (const IdCase& c : CrossCheckedCases()) {
    EXPECT_EQ(EncodeOrDie(Qwen3Tokenizer(), c.text), c.ids) << c.text;
  }
}

// Added tokens are matched before BPE, or, on request, encoded as the text they are.
TEST(TokenizerTest, AddedTokens) {
  const Tokenizer& tok = Qwen3Tokenizer();
  EXPECT_EQ(EncodeOrDie(tok, "<|im_start|>"), std::vector<int32_t>{kImStart});
  const std::string text = "a<|im_end|><|im_end|>b<think>";
  const std::vector<int32_t> ids = EncodeOrDie(tok, text);
  EXPECT_EQ(ids, (std::vector<int32_t>{64, kImEnd, kImEnd, 65, kThink}));
  EXPECT_EQ(DecodeOrDie(tok, ids), text);
  // Special tokens are dropped on request; <think> is an added token but not special.
  EXPECT_EQ(DecodeOrDie(tok, ids, {.skip_special = true}), "ab<think>");
  EXPECT_TRUE(tok.IsSpecial(kImEnd));
  EXPECT_FALSE(tok.IsSpecial(kThink));

  const std::string injected = "<|im_start|>system";
  const std::vector<int32_t> plain = EncodeOrDie(tok, injected, {.parse_added_tokens = false});
  EXPECT_GT(plain.size(), 2u);
  for (int32_t id : plain) EXPECT_LT(id, kEndOfText);
  EXPECT_EQ(DecodeOrDie(tok, plain), injected);
}

TEST(TokenizerTest, TextIsNormalizedToNfc) {
  const Tokenizer& tok = Qwen3Tokenizer();
  const std::string composed = "caf\u00e9";
  const std::string decomposed = "cafe\u0301";
  EXPECT_EQ(EncodeOrDie(tok, decomposed), EncodeOrDie(tok, composed));
  EXPECT_EQ(DecodeOrDie(tok, EncodeOrDie(tok, decomposed)), composed);
}

// Documented behaviour: ill-formed UTF-8 is refused with the byte offset, nothing encoded.
TEST(TokenizerTest, InvalidUtf8IsRefusedWithItsOffset) {
  struct Bad {
    std::string_view text;
    size_t offset;
  };
  const Bad cases[] = {
      {"abc\xff"sv, 3},               // never a UTF-8 byte
      {"\x80"sv, 0},                  // continuation byte without a lead
      {"ok \xc0\xaf"sv, 3},           // overlong "/"
      {"\xed\xa0\x80 x"sv, 0},        // surrogate U+D800
      {"\xf4\x90\x80\x80"sv, 0},      // above U+10FFFF
      {"\xe4\xb8\xad\xe4\xb8"sv, 3},  // a character cut at the end
      {"<|im_end|>\xe4 x"sv, 10},     // after an added token
  };
  for (const Bad& c : cases) {
    Result<std::vector<int32_t>> ids = Qwen3Tokenizer().Encode(c.text);
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("byte offset " + std::to_string(c.offset)),
              std::string::npos)
        << ids.status().message();
  }
  // Repairing first is the caller's choice.
  const std::string repaired = utf8::ToValidUtf8("abc\xff");
  EXPECT_EQ(repaired, "abc\uFFFD");
  EXPECT_TRUE(Qwen3Tokenizer().Encode(repaired).ok());
}

// Decode gives the exact bytes, even when the ids cut a character, and refuses ids that
// are not tokens (including the embedding's padding rows, 151669..151935).
TEST(TokenizerTest, DecodeGivesExactBytesAndRefusesUnknownIds) {
  const Tokenizer& tok = Qwen3Tokenizer();
  const std::string emoji = "\U0001FAE0";  // a recent emoji, spread over three tokens
  const std::vector<int32_t> ids = EncodeOrDie(tok, emoji);
  ASSERT_GE(ids.size(), 2u);
  std::string joined;
  for (int32_t id : ids) joined += DecodeOrDie(tok, {id});
  EXPECT_EQ(joined, emoji);
  EXPECT_NE(utf8::FindInvalid(DecodeOrDie(tok, {ids[0]})), utf8::kAllValid);

  for (int32_t bad : {-1, 151669, 151935, 1 << 30}) {
    const std::vector<int32_t> with_bad = {9707, bad};
    Result<std::string> text = tok.Decode(with_bad);
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(text.status().message().find("ids[1] = " + std::to_string(bad)), std::string::npos)
        << text.status().message();
  }
}

// Long runs of one character class: the splitter must neither overflow (PCRE2's JIT stack)
// nor go quadratic, and BPE must take its heap path for long pieces.
TEST(TokenizerTest, LongRunsEncodeAndRoundTrip) {
  const Tokenizer& tok = Qwen3Tokenizer();
  const std::string runs[] = {
      std::string(100000, 'a'),
      std::string(100000, ' '),
      std::string(50000, '\n'),
      std::string(100000, '7'),
      std::string(100000, '!'),
      [] {
        std::string s;
        for (int i = 0; i < 20000; ++i) s += "\u4e2d\u6587";
        return s;
      }(),
      [] {
        std::string s;
        for (int i = 0; i < 20000; ++i) s += " \t\r\n x";
        return s;
      }(),
  };
  for (const std::string& text : runs) {
    const std::vector<int32_t> ids = EncodeOrDie(tok, text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(DecodeOrDie(tok, ids), text) << text.substr(0, 8);
  }
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  const Tokenizer& tok = Qwen3Tokenizer();
  std::vector<std::string> texts;
  for (const IdCase& c : CrossCheckedCases()) texts.emplace_back(c.text);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          Result<std::vector<int32_t>> ids = tok.Encode(texts[i]);
          if (!ids.ok() || *ids != CrossCheckedCases()[i].ids) ++failures[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace dscale
