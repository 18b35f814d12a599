// The pattern compiler: the pattern parsed to a syntax tree, the tree built into an NFA over bytes
// (code point sets as UTF-8 byte sequences, spec/utf8_ranges.h), then the DFA stages
// (spec/pattern_automata.h): subset construction, pruning, minimising.

#include "spec/pattern_dfa.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "io/tokenizer/utf8.h"
#include "spec/pattern_automata.h"
#include "spec/utf8_ranges.h"

namespace dscale {
// Unity builds compile this file in one unit with others: its internals get a namespace of their
// own.
namespace pattern_compiler {
namespace {

constexpr int kMaxRepeatCount = 1000;
constexpr int kMaxGroupDepth = 100;
constexpr int32_t kMaxNfaStates = 20000;
// Emit calls: what an empty group repeated within a repeated group costs without adding states.
constexpr int64_t kMaxEmitCalls = 200000;
constexpr int kUnbounded = -1;

// ----------------------------------------------------------------------------------------------
// The syntax tree.

enum class NodeKind { kSet, kConcat, kAlt, kRepeat, kAtStart, kAtEnd };

struct Node {
  NodeKind kind = NodeKind::kConcat;
  CodePointSet set;           // kSet: the code points one character may be
  std::vector<int32_t> kids;  // kConcat, kAlt: in order (none: the empty string); kRepeat: one
  int min = 0;                // kRepeat
  int max = 0;                // kRepeat: kUnbounded for no limit
};

CodePointSet Single(uint32_t cp) { return {{cp, cp}}; }
CodePointSet Digits() { return {{'0', '9'}}; }
CodePointSet WordChars() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
CodePointSet LineTerminators() { return {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}; }
// ECMA-262 WhiteSpace and LineTerminator: what \s matches.
CodePointSet WhiteSpace() {
  return Normalized({{0x09, 0x0D},
                     {0x20, 0x20},
                     {0xA0, 0xA0},
                     {0x1680, 0x1680},
                     {0x2000, 0x200A},
                     {0x2028, 0x2029},
                     {0x202F, 0x202F},
                     {0x205F, 0x205F},
                     {0x3000, 0x3000},
                     {0xFEFF, 0xFEFF}});
}

// One element of a class: a code point (which may end a range) or a class escape such as \d.
struct ClassAtom {
  bool is_set = false;
  uint32_t cp = 0;
  CodePointSet set;
};

// Recursive descent over ECMA-262's Pattern grammar (the subset in pattern_dfa.h). The pattern is
// UTF-8; its syntax characters are all ASCII, and other characters are decoded as literals.
class Parser {
 public:
  explicit Parser(std::string_view pattern) : p_(pattern) {}

  // The root of the tree of the whole pattern, whose nodes nodes() then holds.
  Result<int32_t> Parse() {
    DSCALE_ASSIGN_OR_RETURN(const int32_t root, Disjunction(0));
    if (!AtEnd()) return InvalidArgument("unbalanced parentheses: a ) without (");
    return root;
  }
  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  // The byte `ahead` bytes on, or 0 past the end (callers that care about NUL check AtEnd).
  char Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : '\0'; }
  bool Eat(char c) {
    if (AtEnd() || p_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  int32_t Add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
  }
  int32_t AddSet(CodePointSet set) {
    Node n;
    n.kind = NodeKind::kSet;
    n.set = std::move(set);
    return Add(std::move(n));
  }
  int32_t AddList(NodeKind kind, std::vector<int32_t> kids) {
    if (kids.size() == 1) return kids[0];
    Node n;
    n.kind = kind;
    n.kids = std::move(kids);
    return Add(std::move(n));
  }

  Result<int32_t> Disjunction(int depth) {
    std::vector<int32_t> alternatives;
    do {
      std::vector<int32_t> terms;
      while (!AtEnd() && Peek() != '|' && Peek() != ')') {
        DSCALE_ASSIGN_OR_RETURN(const int32_t term, Term(depth));
        terms.push_back(term);
      }
      alternatives.push_back(AddList(NodeKind::kConcat, std::move(terms)));
    } while (Eat('|'));
    return AddList(NodeKind::kAlt, std::move(alternatives));
  }

  Result<int32_t> Term(int depth) {
    if (Peek() == '^' || Peek() == '$') {
      const NodeKind kind = Peek() == '^' ? NodeKind::kAtStart : NodeKind::kAtEnd;
      ++pos_;
      if (QuantifierAhead()) return InvalidArgument("a quantifier with nothing to repeat");
      Node n;
      n.kind = kind;
      return Add(std::move(n));
    }
    if (QuantifierAhead()) return InvalidArgument("a quantifier with nothing to repeat");
    DSCALE_ASSIGN_OR_RETURN(const int32_t atom, Atom(depth));
    return Quantified(atom);
  }

  // Reads {n}, {n,} or {n,m} at p_[at] into *min, *max and *end (just past it); false where the
  // text there is not one (Annex B then reads the { as a literal). Numbers saturate far above
  // kMaxRepeatCount.
  bool BracedQuantifier(size_t at, int* min, int* max, size_t* end) const {
    const auto number = [&](int* value) {
      const size_t start = at;
      *value = 0;
      while (at < p_.size() && p_[at] >= '0' && p_[at] <= '9') {
        *value = std::min(*value * 10 + (p_[at] - '0'), 10 * kMaxRepeatCount);
        ++at;
      }
      return at > start;
    };
    if (at >= p_.size() || p_[at++] != '{' || !number(min)) return false;
    *max = *min;
    if (at < p_.size() && p_[at] == ',') {
      ++at;
      if (!number(max)) *max = kUnbounded;
    }
    if (at >= p_.size() || p_[at++] != '}') return false;
    *end = at;
    return true;
  }

  bool QuantifierAhead() const {
    if (AtEnd()) return false;
    int min = 0;
    int max = 0;
    size_t end = 0;
    return Peek() == '*' || Peek() == '+' || Peek() == '?' ||
           BracedQuantifier(pos_, &min, &max, &end);
  }

  // `atom` with the quantifier that follows it, if any.
  Result<int32_t> Quantified(int32_t atom) {
    int min = 0;
    int max = kUnbounded;
    size_t end = 0;
    if (Eat('*')) {
    } else if (Eat('+')) {
      min = 1;
    } else if (Eat('?')) {
      max = 1;
    } else if (BracedQuantifier(pos_, &min, &max, &end)) {
      pos_ = end;
      if (min > kMaxRepeatCount || max > kMaxRepeatCount) {
        return InvalidArgument("a repetition count above 1000");
      }
      if (max != kUnbounded && min > max) return InvalidArgument("a repetition {n,m} with n > m");
    } else {
      return atom;
    }
    Eat('?');  // lazy: the same strings match
    if (QuantifierAhead()) return InvalidArgument("a quantifier with nothing to repeat");
    if (min == 1 && max == 1) return atom;
    Node n;
    n.kind = NodeKind::kRepeat;
    n.kids = {atom};
    n.min = min;
    n.max = max;
    return Add(std::move(n));
  }

  Result<int32_t> Atom(int depth) {
    if (Eat('.')) return AddSet(Complement(LineTerminators()));
    if (Eat('(')) return Group(depth);
    if (Eat('[')) {
      DSCALE_ASSIGN_OR_RETURN(CodePointSet set, Class());
      return AddSet(std::move(set));
    }
    if (Eat('\\')) {
      DSCALE_ASSIGN_OR_RETURN(ClassAtom atom, Escape(/*in_class=*/false));
      return AddSet(atom.is_set ? std::move(atom.set) : Single(atom.cp));
    }
    DSCALE_ASSIGN_OR_RETURN(const uint32_t cp, Literal());
    return AddSet(Single(cp));
  }

  // After "(": the group's contents and its ")".
  Result<int32_t> Group(int depth) {
    if (depth >= kMaxGroupDepth) return InvalidArgument("groups nested more than 100 deep");
    if (Eat('?')) {
      if (Peek() == '=' || Peek() == '!') {
        return InvalidArgument("lookahead assertions are not supported");
      }
      if (Peek() == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
        return InvalidArgument("lookbehind assertions are not supported");
      }
      if (Eat('<')) {
        const size_t start = pos_;
        while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_' ||
                            Peek() == '$' || static_cast<unsigned char>(Peek()) >= 0x80)) {
          ++pos_;
        }
        if (pos_ == start || !Eat('>')) return InvalidArgument("a malformed group name");
      } else if (!Eat(':')) {
        return InvalidArgument("group syntax (? other than (?: and (?<name> is not supported");
      }
    }
    DSCALE_ASSIGN_OR_RETURN(const int32_t inner, Disjunction(depth + 1));
    if (!Eat(')')) return InvalidArgument("unbalanced parentheses: a ( without )");
    return inner;
  }

  // After "[": the class's code points, through its "]".
  Result<CodePointSet> Class() {
    const bool negated = Eat('^');
    CodePointSet set;
    const auto add = [&set](const ClassAtom& a) {
      if (a.is_set) {
        set.insert(set.end(), a.set.begin(), a.set.end());
      } else {
        set.push_back({a.cp, a.cp});
      }
    };
    while (true) {
      if (AtEnd()) return InvalidArgument("unbalanced brackets: a [ without ]");
      if (Eat(']')) break;
      DSCALE_ASSIGN_OR_RETURN(const ClassAtom first, ClassAtomHere());
      // A - before the closing ] is a literal, as is one first in the class (read as an atom).
      if (Peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        DSCALE_ASSIGN_OR_RETURN(const ClassAtom last, ClassAtomHere());
        if (first.is_set || last.is_set) {  // Annex B: [\w-.] is \w, - and .
          add(first);
          set.push_back({'-', '-'});
          add(last);
        } else if (first.cp > last.cp) {
          return InvalidArgument("a class range out of order");
        } else {
          set.push_back({first.cp, last.cp});
        }
      } else {
        add(first);
      }
    }
    set = Normalized(std::move(set));
    return negated ? Complement(set) : set;
  }

  Result<ClassAtom> ClassAtomHere() {
    if (Eat('\\')) return Escape(/*in_class=*/true);
    DSCALE_ASSIGN_OR_RETURN(const uint32_t cp, Literal());
    return ClassAtom{false, cp, {}};
  }

  Result<uint32_t> Literal() {
    const utf8::Step step = AtEnd() ? utf8::Step{} : utf8::Read(p_, pos_);
    if (!step.valid) return InvalidArgument("the pattern is not valid utf-8");
    pos_ += step.length;
    return step.code_point;
  }

  // `digits` hex digits as a number, or -1 where there are not that many.
  int64_t Hex(int digits) {
    if (p_.size() - pos_ < static_cast<size_t>(digits)) return -1;
    int64_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = p_[pos_ + i];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return -1;
      value = value * 16 + d;
    }
    pos_ += digits;
    return value;
  }

  // After "\": what the escape stands for.
  Result<ClassAtom> Escape(bool in_class) {
    if (AtEnd()) return InvalidArgument("the pattern ends with a lone backslash");
    const char c = p_[pos_++];
    const auto set = [](CodePointSet s) { return ClassAtom{true, 0, std::move(s)}; };
    const auto code = [](uint32_t cp) { return ClassAtom{false, cp, {}}; };
    switch (c) {
      case 'd':
        return set(Digits());
      case 'D':
        return set(Complement(Digits()));
      case 'w':
        return set(WordChars());
      case 'W':
        return set(Complement(WordChars()));
      case 's':
        return set(WhiteSpace());
      case 'S':
        return set(Complement(WhiteSpace()));
      case 't':
        return code('\t');
      case 'n':
        return code('\n');
      case 'r':
        return code('\r');
      case 'f':
        return code('\f');
      case 'v':
        return code('\v');
      case 'b':
        if (in_class) return code('\b');
        return InvalidArgument("word boundaries \\b are not supported");
      case 'B':
        return InvalidArgument("word boundaries \\B are not supported");
      case 'k':
        return InvalidArgument("backreferences are not supported");
      case 'p':
      case 'P':
        return InvalidArgument("unicode property escapes \\p \\P are not supported");
      case 'c':
        return InvalidArgument("control escapes \\c are not supported");
      case '0':
        if (Peek() >= '0' && Peek() <= '9') {
          return InvalidArgument("octal escapes are not supported");
        }
        return code(0);
      case 'x': {
        const int64_t v = Hex(2);
        if (v < 0) return InvalidArgument("an escape \\x without two hex digits");
        return code(static_cast<uint32_t>(v));
      }
      case 'u': {
        if (Peek() == '{') return InvalidArgument("escapes \\u{...} are not supported");
        const int64_t v = Hex(4);
        if (v < 0) return InvalidArgument("an escape \\u without four hex digits");
        if (v >= 0xD800 && v <= 0xDFFF) {
          return InvalidArgument("surrogate escapes \\uD800-\\uDFFF are not supported");
        }
        return code(static_cast<uint32_t>(v));
      }
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      return InvalidArgument(in_class ? "octal escapes are not supported"
                                      : "backreferences are not supported");
    }
    // Any other ASCII character that is not a letter or digit stands for itself: the syntax
    // characters ^ $ \ . * + ? ( ) [ ] { } | / -, and punctuation schemas escape needlessly.
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F && !std::isalnum(u)) return code(u);
    return InvalidArgument(u >= 0x20 && u < 0x7F ? std::string("an unsupported escape \\") + c
                                                 : std::string("an unsupported escape"));
  }

  std::string_view p_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
};

// ----------------------------------------------------------------------------------------------
// The tree as an NFA (Thompson's construction) over bytes.

class NfaBuilder {
 public:
  explicit NfaBuilder(const std::vector<Node>& nodes) : nodes_(nodes) {}

  // The NFA of "[\s\S]*(?:root)[\s\S]*", ^ and $ edges left for the subset construction to follow
  // where they hold.
  Result<PatternNfa> Build(int32_t root) {
    const CodePointSet any = {{0, kMaxCodePoint}};
    nfa_.start = NewState();
    AddEdge(EmitSet(any, nfa_.start), PatternNfaEdge::kEpsilon, nfa_.start);
    const int32_t end = Emit(root, nfa_.start, /*tail=*/true);
    nfa_.matched = NewState();
    AddEdge(end, PatternNfaEdge::kEpsilon, nfa_.matched);
    AddEdge(EmitSet(any, nfa_.matched), PatternNfaEdge::kEpsilon, nfa_.matched);
    nfa_.final = NewState();
    AddEdge(nfa_.matched, PatternNfaEdge::kEpsilon, nfa_.final);
    if (too_large_) {
      return InvalidArgument("counted repetition too large: more than 20000 automaton states");
    }
    return std::move(nfa_);
  }

 private:
  // A new state; once there are kMaxNfaStates, state 0 (the caller then stops building).
  int32_t NewState() {
    if (nfa_.out.size() >= static_cast<size_t>(kMaxNfaStates)) {
      too_large_ = true;
      return 0;
    }
    nfa_.out.emplace_back();
    nfa_.twin.push_back(-1);
    nfa_.copy.push_back(0);
    return static_cast<int32_t>(nfa_.out.size() - 1);
  }
  void AddEdge(int32_t from, PatternNfaEdge::Kind kind, int32_t to, uint8_t lo = 0,
               uint8_t hi = 0) {
    if (!too_large_) nfa_.out[from].push_back({kind, lo, hi, to});
  }

  // Adds the states of `node` entered at `in` and returns the state it leaves by. Contract: it adds
  // edges out of `in` but never into it, so that constructs entered at the same state (the
  // alternatives of a |) or chained through one cannot run into each other's loops. `tail`: only
  // the [\s\S]* after the pattern follows the node, so any text may.
  int32_t Emit(int32_t index, int32_t in, bool tail) {
    if (too_large_ || ++emit_calls_ > kMaxEmitCalls) {
      too_large_ = true;
      return in;
    }
    const Node& node = nodes_[index];
    switch (node.kind) {
      case NodeKind::kSet:
        return EmitSet(node.set, in);
      case NodeKind::kConcat: {
        int32_t at = in;
        for (size_t i = 0; i < node.kids.size(); ++i) {
          at = Emit(node.kids[i], at, tail && i + 1 == node.kids.size());
        }
        return at;
      }
      case NodeKind::kAlt: {
        const int32_t out = NewState();
        for (int32_t kid : node.kids) AddEdge(Emit(kid, in, tail), PatternNfaEdge::kEpsilon, out);
        return out;
      }
      case NodeKind::kRepeat:
        return EmitRepeat(node, in, tail);
      case NodeKind::kAtStart:
      case NodeKind::kAtEnd: {
        const int32_t out = NewState();
        AddEdge(in,
                node.kind == NodeKind::kAtStart ? PatternNfaEdge::kAtStart : PatternNfaEdge::kAtEnd,
                out);
        return out;
      }
    }
    return in;
  }

  // The copies of x{n,m} are made one after another, so a state of one copy has a twin made at the
  // same point of another (PatternNfa::twin). Twinned: the optional copies, after which the later
  // the copy the fewer may follow (earlier copies accept more); and where the repetition is in
  // tail position, every copy (any text may follow it, so a later copy, with fewer copies still
  // needed, accepts more).
  int32_t EmitRepeat(const Node& node, int32_t in, bool tail) {
    Twins twins;
    twins.later_wins = tail;
    int32_t at = in;
    for (int i = 0; i < node.min; ++i) {
      const auto begin = static_cast<int32_t>(nfa_.out.size());
      at = Emit(node.kids[0], at, /*tail=*/false);
      if (tail) AddTwins(&twins, begin, i);
    }
    if (node.max == kUnbounded) {
      const int32_t loop = NewState();  // fresh, so the back edge cannot reach `in`
      AddEdge(at, PatternNfaEdge::kEpsilon, loop);
      AddEdge(Emit(node.kids[0], loop, /*tail=*/false), PatternNfaEdge::kEpsilon, loop);
      const int32_t out = NewState();
      AddEdge(loop, PatternNfaEdge::kEpsilon, out);
      return out;
    }
    const int32_t out = NewState();
    for (int i = node.min; i < node.max; ++i) {
      AddEdge(at, PatternNfaEdge::kEpsilon, out);
      const auto begin = static_cast<int32_t>(nfa_.out.size());
      at = Emit(node.kids[0], at, /*tail=*/false);
      AddTwins(&twins, begin, i);
    }
    AddEdge(at, PatternNfaEdge::kEpsilon, out);
    return out;
  }

  // The twinned copies of one repetition so far.
  struct Twins {
    bool later_wins = false;
    int32_t first = -1;  // the first state of the first copy
    int32_t size = 0;    // states per copy
  };

  // Twins the states from `begin` to now, the copy numbered `copy`, with the first copy's.
  void AddTwins(Twins* twins, int32_t begin, int copy) {
    const auto size = static_cast<int32_t>(nfa_.out.size()) - begin;
    if (twins->first < 0) {
      twins->first = begin;
      twins->size = size;
      return;
    }
    if (size != twins->size || too_large_) return;
    for (int32_t k = 0; k < size; ++k) {
      const int32_t twin = twins->first + k;
      // A state already twinned by a repetition inside this one keeps that twin; then so does the
      // state at the same point of every copy, so no two repetitions share a twin.
      if (nfa_.twin[twin] < 0) nfa_.twin[twin] = twin;  // the first copy's own: copy 0
      if (nfa_.twin[begin + k] < 0) {
        nfa_.twin[begin + k] = twin;
        nfa_.copy[begin + k] = twins->later_wins ? -copy : copy;
      }
    }
  }

  // One character of `set`: its UTF-8 sequences as a trie from `in` to one exit state. Tails of
  // whole continuation bytes (80-BF) are shared: most sequences end in one.
  int32_t EmitSet(const CodePointSet& set, int32_t in) {
    std::vector<Utf8Sequence> sequences;
    for (const CodePointRange& r : set) AppendUtf8Sequences(r, &sequences);
    const int32_t out = NewState();
    int32_t tails[4] = {out, -1, -1, -1};  // tails[k]: k more continuation bytes, then out
    const auto tail = [&](int k) {
      for (int i = 1; i <= k; ++i) {
        if (tails[i] >= 0) continue;
        tails[i] = NewState();
        AddEdge(tails[i], PatternNfaEdge::kByte, tails[i - 1], 0x80, 0xBF);
      }
      return tails[k];
    };
    std::map<std::tuple<int32_t, uint8_t, uint8_t>, int32_t> trie;  // (state, lo, hi) -> child
    for (const Utf8Sequence& seq : sequences) {
      int32_t at = in;
      for (int i = 0; i < seq.length && !too_large_; ++i) {
        const auto [lo, hi] = seq.bytes[i];
        bool whole_tail = true;  // every byte after this one may be any continuation byte
        for (int j = i + 1; j < seq.length; ++j) {
          whole_tail = whole_tail && seq.bytes[j].lo == 0x80 && seq.bytes[j].hi == 0xBF;
        }
        if (whole_tail) {
          AddEdge(at, PatternNfaEdge::kByte, tail(seq.length - 1 - i), lo, hi);
          break;
        }
        auto [it, added] = trie.try_emplace({at, lo, hi}, 0);
        if (added) {
          it->second = NewState();
          AddEdge(at, PatternNfaEdge::kByte, it->second, lo, hi);
        }
        at = it->second;
      }
    }
    return out;
  }

  const std::vector<Node>& nodes_;
  PatternNfa nfa_;
  int64_t emit_calls_ = 0;
  bool too_large_ = false;
};

}  // namespace
}  // namespace pattern_compiler

Result<PatternDfa> CompilePattern(std::string_view pattern) {
  pattern_compiler::Parser parser(pattern);
  DSCALE_ASSIGN_OR_RETURN(const int32_t root, parser.Parse());
  DSCALE_ASSIGN_OR_RETURN(const PatternNfa nfa,
                          pattern_compiler::NfaBuilder(parser.nodes()).Build(root));
  DSCALE_ASSIGN_OR_RETURN(RawPatternDfa dfa, DeterminizePatternNfa(nfa));
  DSCALE_RETURN_IF_ERROR(PruneUnwritable(&dfa));
  return MinimizePatternDfa(dfa);
}

}  // namespace dscale
