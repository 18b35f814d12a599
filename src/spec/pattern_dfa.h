#pragma once
// A JSON Schema "pattern" (an ECMA-262 regular expression) compiled to a deterministic automaton
// over the UTF-8 bytes of the string value it constrains, for a grammar to walk as the value is
// written.
//
// What the automaton accepts: the byte strings that are valid UTF-8 (RFC 3629), that contain no
// control byte a JSON string cannot get from the escapes a writer is offered (\b \t \n \f \r; no
// \u escapes), so none of 0x00-0x07, 0x0B, 0x0E-0x1F, and whose code points the pattern matches
// somewhere, as RegExp.prototype.test does: the pattern is not anchored unless it says ^ or $,
// which are assertions at the start and the end of the whole value (no multiline flag), wherever
// they appear (e.g. "^a|b$").
//
// Syntax: literals; . (any code point but \n \r U+2028 U+2029); classes [...] and [^...] with
// ranges, a - first or last taken literally, and inside them \b for U+0008; \d \D \w \W \s \S
// (\s: ECMA-262's white space and line terminators, Unicode ones included); \t \n \r \f \v \0
// \xHH \uHHHH (not a surrogate); a backslash before any ASCII character that is neither a letter
// nor a digit stands for that character; groups (...), (?:...), (?<name>...); alternatives |,
// empty ones included; quantifiers * + ? {n} {n,} {n,m} (n, m at most 1000), greedy or lazy (the
// same strings match either way).
//
// Where it departs from ECMA-262 (JSON Schema names the dialect without the u flag):
// - it matches code points, not UTF-16 code units: . and [^...] match one astral character whole
//   (as with the u flag);
// - as Annex B (web browsers) does and the u flag would not: lone ] and }, and a { that does not
//   begin a quantifier, are literals, and so is the - of a class range one of whose ends is a
//   class escape ([\w-.] is \w, - and .);
// - refused, naming the construct: backreferences, lookahead and lookbehind, \b and \B outside a
//   class, \p{...} and \P{...}, \u{...}, \cX, octal escapes, a backslash before any other letter
//   or digit, inline flags (?i) and other (? groups, and a pattern whose automaton would need more
//   than kMaxPatternStates states. So that no pattern takes long to refuse, the construction also
//   stops past 8 * kMaxPatternStates states before minimising, or a bound on its work: a few
//   patterns whose minimal automaton is small are refused that way (e.g. "^[ab]*a[ab]{13}[ab]*$",
//   15 states, found among 2^14 sets of NFA states). Counting a character class costs the states
//   of its UTF-8 encodings at each count: "^.{0,200}$" takes 2001 states, "^.{0,205}$" is refused.

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dscale {

// A JSON Schema "pattern" as a deterministic automaton over the UTF-8 bytes of a string's value.
// Every transition leads to a state from which an accepting state can be reached, and the
// automaton is minimal: no two states accept the same continuations.
struct PatternDfa {
  static constexpr int16_t kNone = -1;
  // next[s][b]: the state after byte b from state s, or kNone. State 0 is the start.
  std::vector<std::array<int16_t, 256>> next;
  std::vector<uint8_t> accepting;  // [states] 1 where the bytes so far are a whole matching value
};

inline constexpr int kMaxPatternStates = 2048;

// `pattern` compiled, or InvalidArgument "<why>" (short, lower case, naming the construct, e.g.
// "backreferences are not supported", "more than 2048 states"); the caller prefixes the field
// path. A pattern that no writable string matches (e.g. "^\x01$") is refused too.
Result<PatternDfa> CompilePattern(std::string_view pattern);

// The values `dfa` accepts that are min_length to max_length characters long (code points: the
// bytes that are not UTF-8 continuation bytes; no max_length: no maximum), as a minimal automaton
// (JSON Schema's minLength and maxLength beside a pattern). InvalidArgument where none is left
// ("... admits no string that can be written") or it would pass kMaxPatternStates.
Result<PatternDfa> WithLength(const PatternDfa& dfa, int32_t min_length,
                              std::optional<int32_t> max_length);

}  // namespace dscale
