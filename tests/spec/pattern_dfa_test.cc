// JSON Schema patterns compiled to byte automata (spec/pattern_dfa.h): acceptance against
// std::regex_search on ASCII (random strings, and every short string for counted repetitions),
// UTF-8 and non-ASCII classes, that every state can still accept and no unwritable control byte
// is left, refusals naming the construct, minimal state counts, time on pathological patterns,
// and the UTF-8 range encoder (spec/utf8_ranges.h) against brute force.

#include "spec/pattern_dfa.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "io/tokenizer/utf8.h"
#include "spec/utf8_ranges.h"

namespace dscale {
// Unity builds compile this file in one unit with other tests: its helpers get a namespace of
// their own.
namespace pattern_dfa_test {
namespace {

bool Accepts(const PatternDfa& dfa, std::string_view text) {
  int32_t state = 0;
  for (const char c : text) {
    state = dfa.next[state][static_cast<uint8_t>(c)];
    if (state == PatternDfa::kNone) return false;
  }
  return dfa.accepting[state] != 0;
}

PatternDfa Compiled(std::string_view pattern) {
  Result<PatternDfa> dfa = CompilePattern(pattern);
  EXPECT_TRUE(dfa.ok()) << pattern << ": " << dfa.status().message();
  return dfa.ok() ? std::move(dfa).value() : PatternDfa{};
}

std::string Refusal(std::string_view pattern) {
  const Result<PatternDfa> dfa = CompilePattern(pattern);
  return dfa.ok() ? "compiled" : dfa.status().message();
}

// Control bytes a JSON writer cannot produce (it has \b \t \n \f \r only).
bool Unwritable(uint8_t b) { return b < 0x20 && b != 8 && b != 9 && b != 10 && b != 12 && b != 13; }

struct Case {
  const char* pattern;
  const char* alphabet;               // characters random strings are mostly made of
  std::vector<std::string> examples;  // strings mutated into more test strings
};

// Patterns typical of JSON Schemas, and ones that exercise anchors, alternation and quantifiers.
const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {R"(^\d{3}-\d{4}$)", "0123456789-a", {"555-1234", "12-3456"}},
      {R"(^[A-Z][a-z]+$)", "AZaz Q", {"Alice", "Bo"}},
      {R"(^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$)",
       "a.z@-_%+0",
       {"john.doe@example.com", "a@b.co", "x+y@z.org"}},
      {R"(^(\+|-)?\d+(\.\d+)?$)", "+-.019", {"-12.5", "+3", "0.25"}},
      {R"(^\d{4}-\d{2}-\d{2}$)", "0129-", {"2024-01-31", "1999-12-01"}},
      {R"(abc)", "abcx", {"xabcx"}},
      {R"(^a|b$)", "abx", {"ax", "xb"}},
      {R"((ab|a)(c|bcd))", "abcd", {"abcd", "ac"}},
      {R"(^(?:[01]\d|2[0-3]):[0-5]\d$)", "0123569:", {"23:59", "09:05", "24:00"}},
      {R"(x*)", "xy", {"xx"}},
      {R"(^$)", "a", {""}},
      {R"(^[^aeiou]*$)", "aeb z", {"bcd", "xyz"}},
      {R"(a{2,4}?b)", "ab", {"aab", "aaaab", "ab"}},
      {R"(^.+$)", "a. ", {"abc"}},
      {R"(\s\S)", " a\t", {" a"}},
      {R"(^[\w-]+$)", "aZ_-9 .", {"foo-bar_9"}},
      {R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}$)", "09afAF-g", {"deadbeef-0123-ABCD"}},
      {R"(^(?<year>\d{2})/(?<month>\d{2})$)", "019/", {"24/12"}},
      {R"(^(a|)+b$)", "ab", {"aab", "b"}},
      {R"(^(ab)*$|^c)", "abc", {"abab", "cab"}},
      {R"(^a{3}$)", "a", {"aaa"}},
      {R"(^a{2,}$)", "ab", {"aa", "aaaa"}},
      {R"(^(?:a|b){1,3}c?$)", "abc", {"abc", "bbb"}},
      {R"(\$\d+\.\d\d)", "$.12", {"$3.50"}},
      {R"(^[^\s@]+@[^\s@]+$)", "a@ b", {"a@b"}},
      {R"(^\W+\D*$)", "a1 -_", {"-1a", " "}},
      {R"([.]\*[+?])", ".*+?a", {".*+"}},
      {R"(^https?://[a-z]+(\.[a-z]+)*(/[a-z]*)?$)", "htps:/.a", {"http://a.b/c", "https://x"}},
      {R"(^(a*)*b)", "ab", {"aab"}},
      {R"(a$|^b|c)", "abcx", {"xa", "bx", "xcx"}},
      {R"(^(?:\d{3}|\(\d{3}\))[ -]?\d{4}$)", "()0- 1", {"(555) 1234", "5551234"}},
      {R"(^[a-c]{0,2}x|y{2}$)", "abcxy", {"abx", "yy"}},
      {R"(^\t[^\n]*\n?$)", "\ta\nb", {"\tab\n"}},
  };
  return cases;
}

// A random string: mostly `alphabet`, sometimes other printable ASCII or \t \n \r, and now and
// then an unwritable control byte (\x01, \v), with which the DFA accepts nothing.
std::string RandomString(const Case& c, std::mt19937& rng) {
  std::string s;
  if (!c.examples.empty() && rng() % 2 == 0) {
    s = c.examples[rng() % c.examples.size()];
    const int edits = static_cast<int>(rng() % 3);
    const std::string alphabet = c.alphabet;
    for (int i = 0; i < edits; ++i) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      const char ch = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s.insert(s.begin() + at, ch);
          break;
        case 1:
          if (at < s.size()) s.erase(at, 1);
          break;
        default:
          if (at < s.size()) s[at] = ch;
      }
    }
    return s;
  }
  const int length = static_cast<int>(rng() % 12);
  const std::string alphabet = c.alphabet;
  for (int i = 0; i < length; ++i) {
    const unsigned r = rng() % 100;
    if (r < 80) {
      s += alphabet[rng() % alphabet.size()];
    } else if (r < 95) {
      s += static_cast<char>(0x20 + rng() % 95);
    } else if (r < 98) {
      s += "\t\n\r"[rng() % 3];
    } else {
      s += "\x01\v"[rng() % 2];
    }
  }
  return s;
}

// `pattern` for std::regex, which lacks named groups: (?<name>...) as (...).
std::regex StdRegex(const std::string& pattern) {
  return std::regex(std::regex_replace(pattern, std::regex(R"(\(\?<[A-Za-z]\w*>)"), "("),
                    std::regex::ECMAScript);
}

bool Writable(std::string_view s) {
  for (const char ch : s) {
    if (Unwritable(static_cast<uint8_t>(ch))) return false;
  }
  return true;
}

TEST(PatternDfa, AgreesWithStdRegexOnAscii) {
  std::mt19937 rng(1234);
  for (const Case& c : Cases()) {
    const PatternDfa dfa = Compiled(c.pattern);
    if (dfa.next.empty()) continue;
    const std::regex re = StdRegex(c.pattern);
    int matches = 0;
    int mismatches = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::string s = RandomString(c, rng);
      const bool expected = Writable(s) && std::regex_search(s, re);
      matches += expected;
      if (Accepts(dfa, s) != expected && ++mismatches <= 5) {
        ADD_FAILURE() << c.pattern << " on \"" << s << "\": regex_search says " << expected;
      }
    }
    for (const std::string& example : c.examples) {
      EXPECT_EQ(Accepts(dfa, example), std::regex_search(example, re))
          << c.pattern << " " << example;
    }
    EXPECT_GT(matches, 0) << c.pattern << ": no random string matched; the test proves little";
  }
}

// Counted repetitions, where the compiler leaves out of a DFA state the NFA states that an
// earlier or later copy of the same repetition covers: every string over the alphabet up to a
// length, against std::regex_search.
TEST(PatternDfa, RepetitionsAgreeWithStdRegexExhaustively) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"^(?:[a-z]+ ?){1,3}$", "ab "},  {"^(?:ab?){2,4}c$", "abc"},
      {"(?:ab?){2,4}c", "abc"},        {"a(a|b){3}", "abc"},
      {"a(a|b){1,3}", "abc"},          {"^a(a|b){3}", "abc"},
      {"a(a|b){3}$", "abc"},           {"a(?:a|b){2}c?", "abc"},
      {"((a|b){1,2}c){1,3}$", "abc"},  {"^((a|b){1,2}c){2,3}", "abc"},
      {"(a{1,3}b){2}", "ab"},          {"(?:a|ab){2,3}(?:b|c)", "abc"},
      {"(?:(?:a|b){0,2}c){2}", "abc"}, {"^(?:a?b?){2,3}c", "abc"},
      {"(?:^a|b){2,3}", "ab"},         {"(?:a|b$){1,3}", "ab"},
      {"^(?:a|ba){1,4}b?$", "ab"},     {"(?:a+b){1,3}", "ab"},
  };
  for (const auto& [pattern, alphabet] : cases) {
    const PatternDfa dfa = Compiled(pattern);
    if (dfa.next.empty()) continue;
    const std::regex re = StdRegex(pattern);
    const std::string letters = alphabet;
    int mismatches = 0;
    std::vector<std::string> strings = {""};
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string s = strings[i];  // a copy: strings grows below
      if (Accepts(dfa, s) != std::regex_search(s, re) && ++mismatches <= 5) {
        ADD_FAILURE() << pattern << " on \"" << s << "\"";
      }
      if (s.size() < 8) {
        for (const char c : letters) strings.push_back(s + c);
      }
    }
  }
}

TEST(PatternDfa, NonAsciiLiteralsAndClasses) {
  const PatternDfa e_acute = Compiled("^é+$");
  EXPECT_TRUE(Accepts(e_acute, "ééé"));
  EXPECT_FALSE(Accepts(e_acute, "e"));
  EXPECT_FALSE(Accepts(e_acute, ""));
  EXPECT_FALSE(Accepts(e_acute, "\xC3"));  // half of é

  const PatternDfa latin = Compiled("^[à-ÿ]$");
  for (const char* yes : {"à", "é", "ÿ"}) EXPECT_TRUE(Accepts(latin, yes)) << yes;
  for (const char* no : {"a", "ß", "Ā", "àà"}) EXPECT_FALSE(Accepts(latin, no)) << no;

  const PatternDfa escaped = Compiled(R"(^\u00e9\x41[\u4e00-\u9fff]$)");
  EXPECT_TRUE(Accepts(escaped, "éA中"));
  EXPECT_FALSE(Accepts(escaped, "éAa"));

  const PatternDfa any = Compiled("^.$");
  for (const char* yes : {"a", "é", "中", "😀", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(Accepts(any, yes)) << yes;
  }
  for (const char* no :
       {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "\xF8\x88\x80\x80\x80", "\xE4\xB8", "\n", "\r", "\xE2\x80\xA8", "\xE2\x80\xA9", "ab", ""}) {
    EXPECT_FALSE(Accepts(any, no)) << "bytes of length " << std::string(no).size();
  }

  const PatternDfa non_space = Compiled(R"(^\S$)");
  EXPECT_TRUE(Accepts(non_space, "中"));
  for (const char* no : {"\xE3\x80\x80", "\xC2\xA0", "\xEF\xBB\xBF", " "}) {
    EXPECT_FALSE(Accepts(non_space, no));
  }
  const PatternDfa space = Compiled(R"(^\s+$)");
  EXPECT_TRUE(Accepts(space, " \t\n\r\f\xE3\x80\x80\xE2\x80\xA8"));
  EXPECT_FALSE(Accepts(space, " \v"));  // \v is white space, but a writer cannot write it

  // Negated classes and \D \W match non-ASCII code points whole.
  EXPECT_TRUE(Accepts(Compiled("^[^a]$"), "😀"));
  EXPECT_TRUE(Accepts(Compiled(R"(^\D\W$)"), "中é"));
  EXPECT_TRUE(Accepts(Compiled(R"(^[\s\S]{2}$)"), "é😀"));
  // Unanchored: any valid UTF-8 around the match.
  const PatternDfa inner = Compiled("b");
  EXPECT_TRUE(Accepts(inner, "中b😀"));
  EXPECT_FALSE(Accepts(inner,
                       "\xFF"
                       "b"));
}

TEST(PatternDfa, AnnexBLiterals) {
  const PatternDfa dfa = Compiled(R"(^[\w-.]+\}]a{$)");
  EXPECT_TRUE(Accepts(dfa, "a-.b}]a{"));
  EXPECT_FALSE(Accepts(dfa, "a,b}]a{"));
  EXPECT_TRUE(Accepts(Compiled(R"(^\@\#\:$)"), "@#:"));
  EXPECT_TRUE(Accepts(Compiled(R"(^[\b]$)"), "\b"));
  EXPECT_TRUE(Accepts(Compiled("^[]a]$|^x$"), "x"));  // [] matches nothing
  EXPECT_TRUE(Accepts(Compiled("^[^]$"), "\n"));
}

// Every state is reached from the start and can reach an accepting state; no transition on an
// unwritable control byte.
void ExpectAllLive(const PatternDfa& dfa, std::string_view pattern) {
  const size_t n = dfa.next.size();
  ASSERT_EQ(dfa.accepting.size(), n) << pattern;
  std::vector<std::vector<int>> into(n);
  std::vector<uint8_t> reached(n, 0);
  std::vector<int> stack = {0};
  reached[0] = 1;
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int b = 0; b < 256; ++b) {
      const int t = dfa.next[s][b];
      if (t == PatternDfa::kNone) continue;
      ASSERT_TRUE(t >= 0 && static_cast<size_t>(t) < n) << pattern;
      EXPECT_FALSE(Unwritable(static_cast<uint8_t>(b))) << pattern << " byte " << b;
      into[t].push_back(s);
      if (!reached[t]) reached[t] = 1, stack.push_back(t);
    }
  }
  std::vector<uint8_t> live(n, 0);
  for (size_t s = 0; s < n; ++s) {
    EXPECT_TRUE(reached[s]) << pattern << " state " << s;
    if (dfa.accepting[s]) live[s] = 1, stack.push_back(static_cast<int>(s));
  }
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int from : into[s]) {
      if (!live[from]) live[from] = 1, stack.push_back(from);
    }
  }
  for (size_t s = 0; s < n; ++s) EXPECT_TRUE(live[s]) << pattern << " state " << s;
}

TEST(PatternDfa, EveryStateCanStillAccept) {
  for (const Case& c : Cases()) ExpectAllLive(Compiled(c.pattern), c.pattern);
  for (const char* p : {"^é+$", "^.$", R"(^\S$)", "b", R"(^\v?\x01?a$)", R"([\s\S]\0?)"}) {
    ExpectAllLive(Compiled(p), p);
  }
}

TEST(PatternDfa, RefusesUnsupportedConstructs) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"((a)\1)", "backreference"},
      {R"((?<n>a)\k<n>)", "backreference"},
      {"a(?=b)", "lookahead"},
      {"a(?!b)", "lookahead"},
      {"(?<=a)b", "lookbehind"},
      {"(?<!a)b", "lookbehind"},
      {R"(\bfoo)", "word boundar"},
      {R"(a\B)", "word boundar"},
      {R"(\p{L})", "property"},
      {R"(\P{Lu})", "property"},
      {"(ab", "parenthes"},
      {"ab)", "parenthes"},
      {"[ab", "bracket"},
      {"*a", "nothing to repeat"},
      {"a**", "nothing to repeat"},
      {"^*", "nothing to repeat"},
      {"(+)", "nothing to repeat"},
      {"a|?", "nothing to repeat"},
      {"{2}", "nothing to repeat"},
      {"a{3,2}", "n > m"},
      {"a{1001}", "1000"},
      {"a{1,1001}", "1000"},
      {"[z-a]", "out of order"},
      {R"(\uD800)", "surrogate"},
      {R"(\u{1F600})", R"(\u{)"},
      {R"(\cA)", "control"},
      {R"(\q)", "escape"},
      {R"([\1])", "octal"},
      {R"(\01)", "octal"},
      {"(?i)a", "(?"},
      {"(?<1)a", "group name"},
      {"a\\", "backslash"},
      {"\xC3", "utf-8"},
      {R"((?:a{1000}){1000})", "repetition"},
      {R"(((((((((((){1000}){1000}){1000}){1000}){1000}){1000}){1000}){1000}){1000}))",
       "repetition"},
      {R"(^\x01$)", "admits no string"},
      {"[]", "admits no string"},
      {"a^b", "admits no string"},
      {R"(^(a|b)*a(a|b){12}$)", "more than 2048 states"},
      {R"(^[ab]*a[ab]{13}[ab]*$)", "states before minimising"},
      {R"(^(?:[a-z]+ ?){100}$)", "too complex"},
      {R"(^[\s\S]{1000}$)", "states"},
  };
  for (const auto& [pattern, why] : cases) {
    const std::string message = Refusal(pattern);
    EXPECT_NE(message.find(why), std::string::npos) << pattern << ": " << message;
  }
  EXPECT_NE(Refusal(std::string(150, '(') + std::string(150, ')')).find("nested"),
            std::string::npos);
}

TEST(PatternDfa, MinimalStateCounts) {
  const std::vector<std::pair<const char*, size_t>> cases = {
      {"^(a|a)*$", 1}, {"^a*$", 1},      {"^$", 1}, {"^abc$", 4}, {"^[ab]{2}$", 3},
      {"^a{0,3}$", 4}, {"^(ab|ab)$", 3}, {"x*", 8},  // any UTF-8: 1 + 7 mid-character
      {"abc", 18},  // 3 before the match, 1 after, 7 mid-character states for each side
  };
  for (const auto& [pattern, states] : cases) {
    EXPECT_EQ(Compiled(pattern).next.size(), states) << pattern;
  }
}

// Counted repetitions whose subset construction would track every set of copies reached (about
// n^2 / 2 sets for the first two, 2^31 for the third) compile because twin states of the copies
// are left out where another covers them.
TEST(PatternDfa, CountedRepetitionsCompile) {
  EXPECT_EQ(Compiled("^(?:[a-z]+ ?){1,100}$").next.size(), 201u);  // 100 words, space or not
  EXPECT_TRUE(Accepts(Compiled(R"(^(?:\w+\s?){1,100}$)"), "a b c"));
  const PatternDfa capitalised = Compiled("[A-Z][A-Za-z]{30}");
  EXPECT_TRUE(Accepts(capitalised, "x " + std::string(20, 'a') + "B" + std::string(30, 'C')));
  EXPECT_FALSE(Accepts(capitalised, "x B" + std::string(29, 'c') + " " + std::string(40, 'd')));
}

// Patterns whose automata grow fast either compile within the bound or are refused for their size
// (the construction stops early: build/json_mask_bench times them).
TEST(PatternDfa, LargePatternsCompileOrAreRefusedForTheirSize) {
  for (const char* pattern :
       {"(a|b)*a(a|b){12}", "^(a|b)*a(a|b){12}$", "^[ab]*a[ab]{12}[ab]*$", "^[ab]*a[ab]{13}[ab]*$",
        "^[a-z]{1000}$", R"(^(?:\w+\s?){1,100}$)", R"(^(?:\w+\s?){40}$)", "^(?:[a-z]+ ?){100}$",
        "^.{0,200}$", "(x+x+)+y", "[A-Z][A-Za-z]{30}", "(?:(?:(?:a{0,10}){0,10}){0,10}){0,10}"}) {
    const Result<PatternDfa> dfa = CompilePattern(pattern);
    if (dfa.ok()) {
      EXPECT_LE(dfa->next.size(), static_cast<size_t>(kMaxPatternStates)) << pattern;
    } else {
      const std::string& why = dfa.status().message();
      EXPECT_TRUE(why.find("states") != std::string::npos ||
                  why.find("too complex") != std::string::npos)
          << pattern << ": " << why;
    }
  }
  EXPECT_TRUE(CompilePattern("^[ab]*a[ab]{12}[ab]*$").ok());
  EXPECT_FALSE(CompilePattern("^.{0,205}$").ok());
}

// The UTF-8 sequences of a range match exactly the encodings of its code points.
TEST(PatternDfaUtf8, SequencesMatchExactlyTheEncodings) {
  const std::vector<CodePointRange> ranges = {
      {0, kMaxCodePoint}, {0x41, 0x5A},       {0x7F, 0x80},       {0xF80, 0x1040}, {0xD7FF, 0xE000},
      {0xD800, 0xDFFF},   {0x10000, 0x10000}, {0xFFFF, 0x10FFFF}, {0x123, 0x45678}};
  for (const CodePointRange& r : ranges) {
    std::vector<Utf8Sequence> sequences;
    AppendUtf8Sequences(r, &sequences);
    uint64_t matched = 0;  // byte strings the sequences match, summed
    for (const Utf8Sequence& seq : sequences) {
      uint64_t product = 1;
      for (int i = 0; i < seq.length; ++i) product *= seq.bytes[i].hi - seq.bytes[i].lo + 1;
      matched += product;
    }
    uint64_t encodable = 0;
    for (uint32_t cp = r.lo; cp <= r.hi; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      ++encodable;
      std::string bytes;
      utf8::AppendCodePoint(cp, &bytes);  // the tokenizer's encoder, written apart from these
      int hits = 0;
      for (const Utf8Sequence& seq : sequences) {
        bool hit = seq.length == static_cast<int>(bytes.size());
        for (int i = 0; hit && i < seq.length; ++i) {
          const auto b = static_cast<uint8_t>(bytes[i]);
          hit = b >= seq.bytes[i].lo && b <= seq.bytes[i].hi;
        }
        hits += hit;
      }
      ASSERT_EQ(hits, 1) << std::hex << cp;
    }
    // Each encoding matches exactly one sequence, and the sequences match no more strings than
    // there are encodings: so they match nothing else.
    EXPECT_EQ(matched, encodable) << std::hex << r.lo << "-" << r.hi;
  }
}

}  // namespace
}  // namespace pattern_dfa_test
}  // namespace dscale
