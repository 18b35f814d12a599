// JSON mode's grammar for any object (response_format json_object) against a JSON parser, and
// its token masks against feeding each token's text alone. Schemas: json_schema_test.cc.

#include "spec/json_grammar.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "spec/json_token_mask.h"

namespace dscale {
namespace {

const JsonSchema& AnyObject() { return *JsonSchema::AnyObject(); }

bool Complete(std::string_view text) {
  JsonGrammar g(AnyObject());
  return g.Feed(text) && g.complete();
}

bool Alive(std::string_view text) {
  JsonGrammar g(AnyObject());
  return g.Feed(text);
}

TEST(JsonGrammarTest, ObjectsAndTheirPrefixes) {
  for (const char* text :
       {"{}", "{\"a\": 1}", "{\"a\":[1,-2.5e+3,0,0.5,1E9,true,false,null,\"s\\\"\\u00e9\\n\"]}",
        "{\"\": {\"b\": [[], {}, [{}]]}}", "{\n  \"a\" :\t[ 1 ,\r\n 2 ]\n}",
        "{\"k\":\"\xc3\xa9 \xf0\x9f\x98\x80\"}", "{\"n\":-0}"}) {
    EXPECT_TRUE(Complete(text)) << text;
    const std::string s(text);
    for (size_t i = 0; i < s.size(); ++i) EXPECT_TRUE(Alive(s.substr(0, i))) << s.substr(0, i);
  }
  for (const char* text : {"[]",
                           "1",
                           "\"s\"",
                           "{\"a\" 1}",
                           "{a: 1}",
                           "{\"a\": 01}",
                           "{\"a\": 1.}",
                           "{\"a\": -}",
                           "{\"a\": tru}",
                           "{\"a\": [1,]}",
                           "{\"a\": 1,}",
                           "{\"a\": 1]",
                           "{\"a\": \"\x01\"}",
                           "{\"a\": \"\\x\"}",
                           "{\"a\": \"\\u12g4\"}",
                           "{} {}",
                           "{}x",
                           "{\"a\": .5}",
                           "{\"a\": +1}",
                           "{\"a\": 1e}",
                           "{\"a\": NaN}",
                           " {}",
                           "{}\n"}) {
    EXPECT_FALSE(Complete(text)) << text;
  }
  EXPECT_FALSE(Alive("{\"a\": 01"));
  EXPECT_FALSE(Alive("{}}"));
  EXPECT_TRUE(Alive("{\"a\": 1"));
  EXPECT_FALSE(Complete("{\"a\": 1"));
}

// With thinking on: any text up to the first "</think>" (its prefixes and a "<" restarting it),
// then whitespace and the object.
TEST(JsonGrammarTest, AfterReasoning) {
  const auto complete = [](std::string_view text) {
    JsonGrammar g = JsonGrammar::Start(AnyObject(), "</think>");
    return g.Feed(text) && g.complete();
  };
  const auto alive = [](std::string_view text) {
    JsonGrammar g = JsonGrammar::Start(AnyObject(), "</think>");
    return g.Feed(text);
  };
  EXPECT_TRUE(complete("<think>\nany } text {\n</think>\n\n{\"a\": 1}"));
  EXPECT_TRUE(complete("plan </thin <</think>{}"));
  EXPECT_TRUE(complete("</think>{}"));
  EXPECT_TRUE(alive("<think>\n{\"not\": yet} </thi"));
  EXPECT_FALSE(complete("<think>{}"));  // the reasoning never ended
  EXPECT_FALSE(alive("</think>\nx"));
  EXPECT_FALSE(alive("</think>{} more"));
  // A marker that repeats a prefix of itself: after a mismatch the match resumes at the longest
  // prefix the text still ends with.
  const auto ends_reasoning = [](std::string_view marker, std::string_view text) {
    JsonGrammar g = JsonGrammar::Start(AnyObject(), marker);
    return g.Feed(text) && g.Feed("{}") && g.complete();
  };
  EXPECT_TRUE(ends_reasoning("abab!", "xababab!"));
  EXPECT_TRUE(ends_reasoning("aab", "aaab"));
  EXPECT_FALSE(ends_reasoning("abab!", "xabab"));
  EXPECT_FALSE(ends_reasoning("aab", "aba b"));
}

// Whitespace runs are bounded, so a model cannot pad forever.
TEST(JsonGrammarTest, WhitespaceRunsAreBounded) {
  EXPECT_TRUE(Complete("{" + std::string(kMaxJsonWhitespaceRun, ' ') +
                       "\"a\":" + std::string(kMaxJsonWhitespaceRun, '\n') + "1}"));
  EXPECT_FALSE(Alive("{" + std::string(kMaxJsonWhitespaceRun + 1, ' ')));
  EXPECT_TRUE(Alive("{\"" + std::string(200, ' ')));  // inside a string it is text
}

TEST(JsonGrammarTest, NestingIsBounded) {
  const std::string deep =
      "{\"a\":" + std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']') + "}";
  EXPECT_TRUE(Complete(deep));
  EXPECT_FALSE(Alive("{\"a\":" + std::string(kMaxJsonDepth, '[')));
}

// Random texts over JSON's own characters: the grammar completes exactly those a JSON parser
// reads as one object, and a text is alive after every prefix of a complete one.
TEST(JsonGrammarTest, AgreesWithAJsonParser) {
  const std::string alphabet = "{}[]\",: 01-9.eE+tfrueanls\\u\n";
  std::mt19937 rng(5);
  int complete = 0;
  for (int trial = 0; trial < 60000; ++trial) {
    std::string text = "{";
    const int length = static_cast<int>(rng() % 14);
    for (int i = 0; i < length; ++i) text += alphabet[rng() % alphabet.size()];
    const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
    // The grammar ends at the object's "}" (and bounds whitespace runs, which 14 bytes never
    // reach).
    const bool ends_at_brace = text.back() == '}';
    const bool json_object = !parsed.is_discarded() && parsed.is_object() && ends_at_brace;
    ASSERT_EQ(Complete(text), json_object) << text;
    complete += json_object;
  }
  EXPECT_GT(complete, 100) << "complete objects among the random texts";
  // Documents written by a serializer, with and without indentation.
  for (int trial = 0; trial < 300; ++trial) {
    nlohmann::json doc = nlohmann::json::object();
    for (int k = 0; k < 3; ++k) {
      doc["k" + std::to_string(rng() % 50)] =
          nlohmann::json::array({rng() % 1000, -1.5 * (rng() % 7), "x\ty\"", nullptr,
                                 nlohmann::json::object({{"z", rng() % 2 == 0}})});
    }
    for (const int indent : {-1, 2}) {
      const std::string text = doc.dump(indent);
      ASSERT_TRUE(Complete(text)) << text;
      for (size_t i = 0; i < text.size(); ++i) ASSERT_TRUE(Alive(text.substr(0, i)));
    }
  }
}

// A vocabulary of JSON pieces, whole tokens and fragments, some sharing prefixes, and tokens
// without text.
std::vector<std::string> Vocabulary() {
  std::vector<std::string> v = {
      "",   "{",   "}",    "[",      "]",  "\"",    ":",    ",",   " ",  "\n",   "{\"",      "\"}",
      "},", "\":", "\": ", "\", \"", "a",  "ab",    "abc",  "1",   "12", "0",    "-",        ".",
      "e",  "+",   "true", "tr",     "ue", "false", "null", "nul", "\\", "\\n",  "\\u",      "00e9",
      "]}", "}}",  "[[",   "\"k\"",  "{}", "[]",    "1.5",  "-0",  "01", "\x01", "\xc3\xa9", ""};
  std::mt19937 rng(9);
  const std::string chars = "{}[]\":, a1.e-\\";
  while (v.size() < 300) {
    std::string piece;
    const int length = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < length; ++i) piece += chars[rng() % chars.size()];
    v.push_back(piece);
  }
  return v;
}

TEST(JsonTokenMasksTest, AMaskIsEveryTokenWhoseTextContinues) {
  const std::vector<std::string> vocab = Vocabulary();
  JsonTokenMasks masks(static_cast<int64_t>(vocab.size()),
                       [&](int32_t id) { return std::string_view(vocab[id]); });
  const std::vector<int64_t> stops = {0, 47};
  // States along a document's tokens, and a few more.
  std::vector<std::vector<int32_t>> outputs = {{}, {1}, {10, 16}, {10, 16, 13}, {10, 16, 14, 3}};
  outputs.push_back({10, 16, 14, 19, 20});  // {"a": 112  (a number still open)
  outputs.push_back({10, 16, 14, 5, 33});   // {"a": "\   (an escape)
  outputs.push_back({10, 16, 14, 40, 2});   // {"a": {}}  (complete)
  for (const std::vector<int32_t>& output : outputs) {
    const JsonGrammar state = masks.StateAfter(JsonGrammar(AnyObject()), output);
    ASSERT_FALSE(state.dead());
    const std::span<const uint64_t> allowed = masks.Allowed(state);
    std::vector<float> row(vocab.size(), 1.0f);
    masks.Mask(state, stops, row);
    for (size_t t = 0; t < vocab.size(); ++t) {
      JsonGrammar alone = state;
      const bool continues = !vocab[t].empty() && alone.Feed(vocab[t]);
      EXPECT_EQ(((allowed[t / 64] >> (t % 64)) & 1) != 0, continues) << vocab[t];
      const bool stop = t == 0 || t == 47;
      EXPECT_EQ(row[t] == 1.0f, continues || (stop && state.complete())) << vocab[t];
      EXPECT_EQ(masks.Advance(state, static_cast<int32_t>(t)).dead(), !continues);
    }
  }
  EXPECT_EQ(masks.cached_states(), static_cast<int64_t>(outputs.size()));
}

}  // namespace
}  // namespace dscale
