// Streaming output text: stop strings cut the text (OpenAI semantics), nothing sent is ever
// taken back, characters split across tokens are never broken.

#include "server/output_text.h"

#include <gtest/gtest.h>

#include "io/tokenizer/utf8.h"
#include "server_test_util.h"

namespace dscale::server {
namespace {

using testing::ServerTokenizer;

std::vector<int32_t> Ids(const std::string& text) {
  return ServerTokenizer().Encode(text, {.parse_added_tokens = false}).value();
}

// Feeds `text`'s tokens one at a time; returns every piece sent, then the final one.
std::vector<std::string> Stream(const std::string& text, std::vector<std::string> stops,
                                bool* stopped = nullptr) {
  OutputText out(ServerTokenizer(), std::move(stops));
  std::vector<std::string> pieces;
  for (const int32_t id : Ids(text)) pieces.push_back(out.Push(std::span(&id, 1)).text);
  pieces.push_back(out.Finish().text);
  if (stopped) *stopped = out.stopped();
  return pieces;
}

std::string Join(const std::vector<std::string>& pieces) {
  std::string all;
  for (const std::string& p : pieces) all += p;
  return all;
}

TEST(OutputTextTest, WithoutStopsIsTheDecodedText) {
  const std::string text = "Hello, how are you today? 42";
  EXPECT_EQ(Join(Stream(text, {})), text);
}

TEST(OutputTextTest, StopStringEndsTheTextBeforeIt) {
  bool stopped = false;
  EXPECT_EQ(Join(Stream("The server answers requests", {"answers"}, &stopped)), "The server ");
  EXPECT_TRUE(stopped);
  // The earliest of several stops wins.
  EXPECT_EQ(Join(Stream("one two three", {"three", "two"}, &stopped)), "one ");
  EXPECT_EQ(Join(Stream("abc", {"zz"}, &stopped)), "abc");
  EXPECT_FALSE(stopped);
}

// The stop string that ended the text: the one found first as the text arrives, the earliest
// in it where several are.
TEST(OutputTextTest, SaysWhichStopStringEndedTheText) {
  const auto ended_by = [](const std::string& text, std::vector<std::string> stops) {
    OutputText out(ServerTokenizer(), std::move(stops));
    for (const int32_t id : Ids(text)) out.Push(std::span(&id, 1));
    out.Finish();
    return out.stop_string();
  };
  EXPECT_EQ(ended_by("one two three", {"three", "two"}), "two");
  EXPECT_EQ(ended_by("one two three", {"two", "one two"}), "one two");
  EXPECT_EQ(ended_by("one two three", {"zz"}), "");
}

TEST(OutputTextTest, PossibleStartOfAStopIsHeldBack) {
  // "sun" could begin "sunny" until "day" arrives.
  OutputText out(ServerTokenizer(), {"sunny"});
  std::string sent;
  for (const int32_t id : Ids("It is sun")) sent += out.Push(std::span(&id, 1)).text;
  EXPECT_EQ(sent, "It is ");
  for (const int32_t id : Ids("day")) sent += out.Push(std::span(&id, 1)).text;
  sent += out.Finish().text;
  EXPECT_EQ(sent, "It is sunday");
}

TEST(OutputTextTest, MultiByteCharactersAreNeverSplit) {
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80!";  // é € 😀
  for (const std::string& piece : Stream(text, {})) {
    ASSERT_EQ(utf8::FindInvalid(piece), utf8::kAllValid);
  }
  EXPECT_EQ(Join(Stream(text, {})), text);
  // A stop string that is a multi-byte character.
  EXPECT_EQ(Join(Stream(text, {"\xe2\x82\xac"})), "caf\xc3\xa9 ");
}

TEST(OutputTextTest, SpecialTokensAndUnknownIdsGiveNoText) {
  const Tokenizer& tok = ServerTokenizer();
  OutputText out(tok, {});
  std::vector<int32_t> ids = Ids("ok");
  ids.push_back(tok.AddedTokenId("<|im_end|>").value());
  ids.push_back(100000);  // not a token
  EXPECT_EQ(out.Push(ids).text + out.Finish().text, "ok");
  EXPECT_EQ(OutputTextOf(tok, ids), "ok");
}

// Every token is decided once, in order: reported when its text starts inside the text sent (its
// log-probability goes with that text), never when it adds no text or lies in or after a stop
// string. The reported tokens' texts join to the text sent.
struct Reported {
  std::string text;
  std::string reported_text;  // the reported tokens' texts, joined
  size_t verdicts = 0;
};

// The token whose bytes are `bytes` (a byte-level vocabulary has one per byte).
int32_t TokenOfBytes(const std::string& bytes) {
  const Tokenizer& tok = ServerTokenizer();
  for (int32_t id = 0; id < tok.id_limit(); ++id) {
    const std::string* b = tok.TokenBytes(id);
    if (b != nullptr && *b == bytes) return id;
  }
  ADD_FAILURE() << "no token spells those bytes";
  return 0;
}

Reported Report(const std::vector<int32_t>& ids, std::vector<std::string> stops) {
  const Tokenizer& tok = ServerTokenizer();
  OutputText out(tok, std::move(stops));
  Reported r;
  size_t next = 0;  // the oldest token without a verdict
  const auto take = [&](const OutputText::Piece& piece) {
    r.text += piece.text;
    for (const bool reported : piece.reported) {
      if (reported) r.reported_text += OutputTokenText(tok, ids[next]);
      ++next;
    }
  };
  for (const int32_t id : ids) take(out.Push(std::span(&id, 1)));
  take(out.Finish());
  r.verdicts = next;
  return r;
}

TEST(OutputTextTest, ReportsExactlyTheTokensWhoseTextIsSent) {
  const Tokenizer& tok = ServerTokenizer();
  std::vector<int32_t> ids = Ids("It is sunny today");
  ids.push_back(tok.AddedTokenId("<|im_end|>").value());
  Reported r = Report(ids, {});
  EXPECT_EQ(r.text, "It is sunny today");
  EXPECT_EQ(r.reported_text, r.text);  // no entry for the end of turn
  EXPECT_EQ(r.verdicts, ids.size());
  // A stop string's tokens, and what follows, are not reported.
  r = Report(ids, {" today"});
  EXPECT_EQ(r.text, "It is sunny");
  EXPECT_EQ(r.reported_text, "It is sunny");
  EXPECT_EQ(r.verdicts, ids.size());
  // A token that starts before the stop and runs into it is reported: its text starts in the
  // text sent.
  r = Report(Ids("abcdef"), {"cd"});
  EXPECT_EQ(r.text, "ab");
  EXPECT_EQ(r.reported_text.rfind("ab", 0), 0u) << r.reported_text;
  // A character cut short by the next token becomes U+FFFD (3 bytes for 1): the next token's
  // text still starts after it, so a stop string there is not reported.
  const std::vector<int32_t> cut = {Ids("x")[0], TokenOfBytes("\xd0"), Ids("le")[0]};
  r = Report(cut, {"le"});
  EXPECT_EQ(r.text, "x\xef\xbf\xbd");
  EXPECT_EQ(r.reported_text, "x\xd0");
  // Characters split across tokens: the reported tokens still join to the text.
  const std::string text = "caf\xc3\xa9 \xf0\x9f\x98\x80!";
  r = Report(Ids(text), {});
  EXPECT_EQ(r.reported_text, text);
  EXPECT_EQ(r.text, text);
}

TEST(OutputTextTest, HeldBackForStops) {
  const std::vector<std::string> stops = {"abc", "xy"};
  EXPECT_EQ(HeldBackForStops("zzab", stops), 2u);
  EXPECT_EQ(HeldBackForStops("zzx", stops), 1u);
  EXPECT_EQ(HeldBackForStops("zza", stops), 1u);
  EXPECT_EQ(HeldBackForStops("zz", stops), 0u);
  EXPECT_EQ(HeldBackForStops("", stops), 0u);
}

}  // namespace
}  // namespace dscale::server
