// Streaming detokenization never emits ill-formed UTF-8, holds back partial characters, and
// concatenates to the same text as a one-shot decode.

#include "io/tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "io/tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace dscale {
namespace {

using testing::EncodeOrDie;
using testing::Qwen3Tokenizer;

// The id of the token that is exactly one raw byte, for each byte value.
const std::vector<int32_t>& SingleByteIds() {
  static const std::vector<int32_t> ids = [] {
    std::vector<int32_t> out(256, -1);
    const Tokenizer& tok = Qwen3Tokenizer();
    for (int32_t id = 0; id < tok.id_limit(); ++id) {
      const std::string* bytes = tok.TokenBytes(id);
      if (bytes && bytes->size() == 1 && !tok.AddedTokenId(*bytes)) {
        out[static_cast<uint8_t>((*bytes)[0])] = id;
      }
    }
    return out;
  }();
  return ids;
}

// Streams `ids`, checking every piece; returns the concatenation.
std::string Stream(const std::vector<int32_t>& ids, std::vector<std::string>* pieces = nullptr,
                   DecodeOptions options = {}) {
  StreamDecoder decoder(Qwen3Tokenizer(), options);
  std::string all;
  for (int32_t id : ids) {
    std::string piece;
    EXPECT_TRUE(decoder.Push(id, &piece).ok());
    EXPECT_EQ(utf8::FindInvalid(piece), utf8::kAllValid) << "after id " << id;
    EXPECT_LE(decoder.pending_bytes(), 3u);
    if (pieces) pieces->push_back(piece);
    all += piece;
  }
  std::string tail;
  decoder.Finish(&tail);
  EXPECT_EQ(utf8::FindInvalid(tail), utf8::kAllValid);
  EXPECT_EQ(decoder.pending_bytes(), 0u);
  return all + tail;
}

TEST(StreamDecoderTest, EmojiAndCjkAcrossTokens) {
  const std::string text =
      "Hi \U0001FAE0 \u4f60\u597d\u4e16\u754c \U0001F44D\U0001F3FD "
      "\U0001F468\u200d\U0001F469\u200d\U0001F467 \u0939\u093f\u0928\u094d\u0926\u0940 done";
  const std::vector<int32_t> ids = EncodeOrDie(Qwen3Tokenizer(), text);
  std::vector<std::string> pieces;
  EXPECT_EQ(Stream(ids, &pieces), text);
  // Some token ends inside a character, so some piece is held back as empty.
  EXPECT_NE(std::find(pieces.begin(), pieces.end(), ""), pieces.end());
}

// The hardest split: every byte is its own token.
TEST(StreamDecoderTest, ByteByByte) {
  const std::string text = "a\U0001F600\u4e2d\u00e9\U0001FAE0z";
  std::vector<int32_t> ids;
  for (char c : text) {
    ids.push_back(SingleByteIds()[static_cast<uint8_t>(c)]);
    ASSERT_GE(ids.back(), 0);
  }
  std::vector<std::string> pieces;
  EXPECT_EQ(Stream(ids, &pieces), text);
  const std::vector<std::string> expected = {
      "a", "", "", "", "\U0001F600", "", "", "\u4e2d", "", "\u00e9", "", "", "", "\U0001FAE0", "z"};
  EXPECT_EQ(pieces, expected);
}

TEST(StreamDecoderTest, IllFormedBytesBecomeReplacementCharacters) {
  const auto& byte = SingleByteIds();
  const int32_t im_end = *Qwen3Tokenizer().AddedTokenId("<|im_end|>");
  // A character cut short by a special token, a stray continuation byte, and a lead byte
  // left at the end of the stream.
  const std::vector<int32_t> ids = {byte[0xE4], byte[0xB8], im_end,
                                    byte[0x80], byte['x'],  byte[0xF0]};
  std::vector<std::string> pieces;
  EXPECT_EQ(Stream(ids, &pieces), "\uFFFD<|im_end|>\uFFFDx\uFFFD");
  EXPECT_EQ(pieces[2], "\uFFFD<|im_end|>");
}

TEST(StreamDecoderTest, MatchesLossyOneShotDecodeOnRandomIds) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> any_id(0, Qwen3Tokenizer().id_limit() - 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int32_t> ids(1 + trial % 40);
    for (int32_t& id : ids) id = any_id(rng);
    for (bool skip : {false, true}) {
      const DecodeOptions options{.skip_special = skip};
      const std::string expected =
          utf8::ToValidUtf8(testing::DecodeOrDie(Qwen3Tokenizer(), ids, options));
      EXPECT_EQ(Stream(ids, nullptr, options), expected) << "trial " << trial;
    }
  }
}

TEST(StreamDecoderTest, SkipsSpecialTokensOnRequest) {
  const std::vector<int32_t> ids = EncodeOrDie(Qwen3Tokenizer(), "<|im_start|>hi<|im_end|>");
  EXPECT_EQ(Stream(ids, nullptr, {.skip_special = true}), "hi");
  EXPECT_EQ(Stream(ids), "<|im_start|>hi<|im_end|>");
}

TEST(StreamDecoderTest, UnknownIdIsAnErrorAndChangesNothing) {
  StreamDecoder decoder(Qwen3Tokenizer());
  std::string out;
  ASSERT_TRUE(decoder.Push(SingleByteIds()[0xE4], &out).ok());
  EXPECT_EQ(decoder.pending_bytes(), 1u);
  const Status status = decoder.Push(151700, &out);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoder.pending_bytes(), 1u);
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace dscale
