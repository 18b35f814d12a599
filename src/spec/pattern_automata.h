#pragma once
// The automaton stages of the pattern compiler (spec/pattern_dfa.h), after the pattern has become
// an NFA over bytes: the subset construction, the removal of what a JSON writer cannot write, and
// minimising. Only pattern_dfa.cc uses them.

#include <array>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "spec/pattern_dfa.h"

namespace dscale {

struct PatternNfaEdge {
  enum Kind : uint8_t {
    kByte,     // consumes one byte in lo..hi
    kEpsilon,  // consumes nothing
    kAtStart,  // consumes nothing, and holds only before the first byte (^)
    kAtEnd,    // consumes nothing, and holds only after the last byte ($)
  };
  Kind kind = kEpsilon;
  uint8_t lo = 0;
  uint8_t hi = 0;
  int32_t to = 0;
};

// The NFA of "[\s\S]*(?:pattern)[\s\S]*" over the UTF-8 bytes of a value: it accepts a value when
// some path from `start` consumes all of its bytes and ends at `final`, following the ^ and $
// edges only where they hold. Byte edges only ever spell UTF-8 encodings of code points.
struct PatternNfa {
  std::vector<std::vector<PatternNfaEdge>> out;  // [state] the edges leaving it
  int32_t start = 0;
  // Entered only once the pattern has matched, at a code point boundary; from it every valid UTF-8
  // continuation reaches `final` (it is the [\s\S]* loop after the pattern).
  int32_t matched = 0;
  int32_t final = 0;  // no edges leave it
  // [state] The copies of a repetition x{n,m} are made alike: a state of one has a twin, made at
  // the same point of the first copy, in every other. For twinned states (pattern_dfa.cc says
  // which: NfaBuilder::EmitRepeat), twin[s] is the first copy's, and of twins reached by the same
  // input the one with the least copy[s] accepts all that the others do, which the subset
  // construction can then leave out. twin[s] is -1 for states not twinned.
  std::vector<int32_t> twin;
  std::vector<int32_t> copy;
};

// A DFA as the subset construction makes it: not minimal, and with transitions as spans of bytes
// (most states have a few), where PatternDfa has a row of 256.
struct RawPatternDfa {
  struct Span {
    uint8_t lo = 0;  // bytes lo..hi lead to state `to`
    uint8_t hi = 0;
    int32_t to = 0;
  };
  std::vector<std::vector<Span>> spans;  // [state] sorted, disjoint; other bytes lead nowhere
  std::vector<uint8_t> accepting;        // [state]; state 0 is the start
};

// The DFA accepting what `nfa` accepts, or InvalidArgument where it would pass a generous limit
// on states (8 * kMaxPatternStates) or work: minimising could not bring it down to
// kMaxPatternStates anyway, or compiling it would take too long.
Result<RawPatternDfa> DeterminizePatternNfa(const PatternNfa& nfa);

// Removes the transitions on the bytes that a JSON string cannot get from the escapes a writer is
// offered (0x00-0x1F but \b \t \n \f \r), then those into states from which no accepting state can
// be reached. InvalidArgument where the start state is then one of those.
Status PruneUnwritable(RawPatternDfa* dfa);

// The minimal DFA for what `dfa` accepts, states numbered breadth first from the start, or
// InvalidArgument "more than 2048 states". Every transition of `dfa` must lead to a state from
// which an accepting state can be reached (as PruneUnwritable leaves it).
Result<PatternDfa> MinimizePatternDfa(const RawPatternDfa& dfa);

}  // namespace dscale
