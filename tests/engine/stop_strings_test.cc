// StopStringScanner: a stop string is found at the first token whose bytes complete it, across
// any number of tokens and tokens that add no text, as a search of the whole text would find it.

#include "engine/stop_strings.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dscale {
namespace {

// The index of the first token after which the concatenated text contains a stop string, or -1:
// the definition, searching the whole text at every token.
int FirstStopByWholeText(const std::vector<std::string>& tokens,
                         const std::vector<std::string>& stops) {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    text += tokens[i];
    for (const std::string& stop : stops) {
      if (text.find(stop) != std::string::npos) return static_cast<int>(i);
    }
  }
  return -1;
}

int FirstStopByScanner(const std::vector<std::string>& tokens,
                       const std::vector<std::string>& stops) {
  StopStringScanner scanner;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (scanner.Push(stops, tokens[i])) return static_cast<int>(i);
  }
  return -1;
}

TEST(StopStringScannerTest, FindsAStopWhereItsLastByteArrives) {
  const std::vector<std::string> stops = {"ll", "bcd"};
  EXPECT_EQ(FirstStopByScanner({"hello"}, stops), 0);
  EXPECT_EQ(FirstStopByScanner({"he", "l", "lo"}, stops), 2);
  EXPECT_EQ(FirstStopByScanner({"a", "b", "c", "d"}, stops), 3);
  EXPECT_EQ(FirstStopByScanner({"b", "", "c", "", "d"}, stops), 4);  // tokens that add no text
  EXPECT_EQ(FirstStopByScanner({"bc", "x", "d", "l"}, stops), -1);
  EXPECT_EQ(FirstStopByScanner({"\xe4\xb8", "\xad"}, {"\xe4\xb8\xad"}), 1);  // 中, split
}

// Random texts over a small alphabet (so stops occur often, overlapping and across tokens),
// tokens of 0-4 bytes, 1-3 stop strings of 1-6 bytes: the scanner stops where the definition
// does, and keeps fewer bytes than the longest stop.
TEST(StopStringScannerTest, AgreesWithTheWholeTextSearch) {
  std::mt19937 rng(58);
  const auto random_string = [&](int min_len, int max_len) {
    std::string s(std::uniform_int_distribution<int>(min_len, max_len)(rng), 'a');
    for (char& c : s) c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng));
    return s;
  };
  int found = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops(std::uniform_int_distribution<int>(1, 3)(rng));
    for (std::string& stop : stops) stop = random_string(1, 6);
    std::vector<std::string> tokens(40);
    for (std::string& token : tokens) token = random_string(0, 4);
    const int want = FirstStopByWholeText(tokens, stops);
    ASSERT_EQ(FirstStopByScanner(tokens, stops), want) << "trial " << trial;
    found += want >= 0;
  }
  EXPECT_GT(found, 1000);
  EXPECT_LT(found, 2000);
}

// After a long output (its text is not kept: only the last bytes a stop could still end in), a
// stop split across the last two tokens is found, and one the output held long ago is not found
// again.
TEST(StopStringScannerTest, FindsAStopAfterALongOutput) {
  StopStringScanner scanner;
  const std::vector<std::string> stops = {"stop!", "long"};
  EXPECT_TRUE(scanner.Push(stops, "long output "));
  for (int i = 0; i < 100000; ++i) ASSERT_FALSE(scanner.Push(stops, " output "));
  EXPECT_FALSE(scanner.Push(stops, "sto"));
  EXPECT_TRUE(scanner.Push(stops, "p!"));
}

}  // namespace
}  // namespace dscale
