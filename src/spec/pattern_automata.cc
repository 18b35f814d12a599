#include "spec/pattern_automata.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

namespace dscale {
// Unity builds compile this file in one unit with others: its internals get a namespace of their
// own.
namespace pattern_automata {
namespace {

constexpr int32_t kNone = -1;
constexpr int32_t kMaxSubsetStates = 8 * kMaxPatternStates;
// NFA states visited by closures, summed over the construction: with kMaxSubsetStates, what bounds
// its time (some tens of ms at most; common patterns visit thousands).
constexpr int64_t kMaxSubsetWork = 1'000'000;
constexpr int32_t kAcceptMark = -1;

struct KeyHash {
  size_t operator()(const std::vector<int32_t>& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
    for (int32_t v : key) {
      h ^= static_cast<uint32_t>(v);
      h *= 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

// The states from which `final` can be reached by the edges `follow` accepts, backwards from it.
template <typename Follow>
std::vector<uint8_t> Reaching(const PatternNfa& nfa, Follow follow) {
  std::vector<std::vector<int32_t>> into(nfa.out.size());
  for (size_t s = 0; s < nfa.out.size(); ++s) {
    for (const PatternNfaEdge& e : nfa.out[s]) {
      if (follow(e.kind)) into[e.to].push_back(static_cast<int32_t>(s));
    }
  }
  std::vector<uint8_t> reaches(nfa.out.size(), 0);
  std::vector<int32_t> stack = {nfa.final};
  reaches[nfa.final] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t from : into[s]) {
      if (!reaches[from]) {
        reaches[from] = 1;
        stack.push_back(from);
      }
    }
  }
  return reaches;
}

// The subset construction. A DFA state stands for the NFA states the input so far may have
// reached; its key is the sorted "kernel" of them, then kAcceptMark when the input so far is
// accepted. The kernel keeps only what can still make a difference: states with a byte edge from
// which `final` can be reached without ^ (which never holds after the first byte), less those
// whose twin in another copy of the same repetition accepts all they do (PatternNfa::twin). Other
// states matter only to decide acceptance, which the mark records. Smaller keys merge DFA states
// early, and keep a counted repetition from making a DFA state of every set of copies reached.
class SubsetBuilder {
 public:
  explicit SubsetBuilder(const PatternNfa& nfa)
      : nfa_(nfa),
        seen_(nfa.out.size(), 0),
        best_copy_seen_(nfa.out.size(), 0),
        best_copy_(nfa.out.size(), 0),
        kernel_(Reaching(nfa, [](auto kind) { return kind != PatternNfaEdge::kAtStart; })),
        ends_(Reaching(nfa,
                       [](auto kind) {
                         return kind == PatternNfaEdge::kEpsilon || kind == PatternNfaEdge::kAtEnd;
                       })),
        ends_at_start_(Reaching(nfa, [](auto kind) { return kind != PatternNfaEdge::kByte; })) {
    for (size_t s = 0; s < nfa.out.size(); ++s) {
      bool has_byte_edge = false;
      for (const PatternNfaEdge& e : nfa.out[s]) has_byte_edge |= e.kind == PatternNfaEdge::kByte;
      kernel_[s] = kernel_[s] && has_byte_edge;
    }
  }

  Result<RawPatternDfa> Build() {
    start_key_ = Key({nfa_.start}, /*at_start=*/true);
    keys_.push_back(&start_key_);
    dfa_.accepting.push_back(IsAccepting(start_key_));
    // States are numbered in the order they are found, so their spans come out in order too.
    for (size_t s = 0; s < keys_.size(); ++s) {
      DSCALE_ASSIGN_OR_RETURN(std::vector<RawPatternDfa::Span> spans, Spans(*keys_[s]));
      dfa_.spans.push_back(std::move(spans));
    }
    return std::move(dfa_);
  }

 private:
  static bool IsAccepting(const std::vector<int32_t>& key) {
    return !key.empty() && key.back() == kAcceptMark;
  }

  // The key of the DFA state for NFA states `seeds` reached by the same input (the empty input
  // where `at_start`, where ^ edges hold).
  std::vector<int32_t> Key(const std::vector<int32_t>& seeds, bool at_start) {
    // The epsilon closure, depth first.
    ++stamp_;
    std::vector<int32_t> candidates;  // the kernel states of the closure
    std::vector<int32_t> stack = seeds;
    bool accepting = false;
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (seen_[s] == stamp_) continue;
      seen_[s] = stamp_;
      ++work_;
      // Past a match only the [\s\S]* loop matters: every continuation is accepted.
      if (s == nfa_.matched) return {nfa_.matched, kAcceptMark};
      accepting = accepting || (at_start ? ends_at_start_[s] : ends_[s]);
      if (kernel_[s]) candidates.push_back(s);
      for (const PatternNfaEdge& e : nfa_.out[s]) {
        if (e.kind == PatternNfaEdge::kEpsilon ||
            (at_start && e.kind == PatternNfaEdge::kAtStart)) {
          stack.push_back(e.to);
        }
      }
    }
    // Of twins, only the one of the least copy number.
    for (int32_t s : candidates) {
      const int32_t twin = nfa_.twin[s];
      if (twin < 0) continue;
      if (best_copy_seen_[twin] != stamp_ || nfa_.copy[s] < best_copy_[twin]) {
        best_copy_seen_[twin] = stamp_;
        best_copy_[twin] = nfa_.copy[s];
      }
    }
    std::vector<int32_t> key;
    for (int32_t s : candidates) {
      if (nfa_.twin[s] < 0 || nfa_.copy[s] == best_copy_[nfa_.twin[s]]) key.push_back(s);
    }
    std::sort(key.begin(), key.end());
    if (accepting) key.push_back(kAcceptMark);
    return key;
  }

  // The DFA state of `key`, new or not; kNone for the empty key (no way on, not accepting).
  Result<int32_t> StateFor(std::vector<int32_t> key) {
    if (key.empty()) return kNone;
    if (const auto it = ids_.find(key); it != ids_.end()) return it->second;
    if (keys_.size() >= static_cast<size_t>(kMaxSubsetStates)) {
      return InvalidArgument("more than " + std::to_string(kMaxSubsetStates) +
                             " states before minimising");
    }
    if (work_ > kMaxSubsetWork) return InvalidArgument("the pattern is too complex to compile");
    const int32_t id = static_cast<int32_t>(keys_.size());
    const auto it = ids_.emplace(std::move(key), id).first;
    keys_.push_back(&it->first);
    dfa_.accepting.push_back(IsAccepting(it->first));
    return id;
  }

  // The transitions of the DFA state with `key`. Bytes are taken in runs on which no NFA edge
  // begins or ends, since each run leads to one state.
  Result<std::vector<RawPatternDfa::Span>> Spans(const std::vector<int32_t>& key) {
    std::array<bool, 257> cut{};  // cut[b]: a run starts at b
    cut[0] = true;
    for (int32_t s : key) {
      if (s == kAcceptMark) continue;
      for (const PatternNfaEdge& e : nfa_.out[s]) {
        if (e.kind == PatternNfaEdge::kByte) cut[e.lo] = cut[e.hi + 1] = true;
      }
    }
    std::array<int32_t, 256> run_of;  // [byte]
    std::array<int, 257> run_start;   // [run]
    int runs = 0;
    for (int b = 0; b < 256; ++b) {
      if (cut[b]) run_start[runs++] = b;
      run_of[b] = runs - 1;
    }
    run_start[runs] = 256;
    // (run, target) pairs, sorted: each run's targets together.
    pairs_.clear();
    for (int32_t s : key) {
      if (s == kAcceptMark) continue;
      for (const PatternNfaEdge& e : nfa_.out[s]) {
        if (e.kind != PatternNfaEdge::kByte) continue;
        for (int32_t r = run_of[e.lo]; r <= run_of[e.hi]; ++r) {
          pairs_.push_back(static_cast<uint64_t>(r) << 32 | static_cast<uint32_t>(e.to));
        }
      }
    }
    std::sort(pairs_.begin(), pairs_.end());
    pairs_.erase(std::unique(pairs_.begin(), pairs_.end()), pairs_.end());
    std::vector<RawPatternDfa::Span> spans;
    previous_targets_.clear();
    int32_t previous = kNone;
    for (size_t i = 0; i < pairs_.size();) {
      const auto run = static_cast<int32_t>(pairs_[i] >> 32);
      targets_.clear();
      for (; i < pairs_.size() && static_cast<int32_t>(pairs_[i] >> 32) == run; ++i) {
        targets_.push_back(static_cast<int32_t>(pairs_[i] & 0xFFFFFFFF));
      }
      if (targets_ != previous_targets_) {
        DSCALE_ASSIGN_OR_RETURN(previous, StateFor(Key(targets_, /*at_start=*/false)));
        std::swap(previous_targets_, targets_);
      }
      if (previous == kNone) continue;
      const auto lo = static_cast<uint8_t>(run_start[run]);
      const auto hi = static_cast<uint8_t>(run_start[run + 1] - 1);
      if (!spans.empty() && spans.back().hi + 1 == lo && spans.back().to == previous) {
        spans.back().hi = hi;
      } else {
        spans.push_back({lo, hi, previous});
      }
    }
    return spans;
  }

  const PatternNfa& nfa_;
  uint32_t stamp_ = 0;          // one per Key call
  std::vector<uint32_t> seen_;  // [NFA state] stamp_ where this Key's closure has reached it
  std::vector<uint32_t> best_copy_seen_;  // [NFA state] stamp_ where best_copy_ is this Key's
  std::vector<int32_t> best_copy_;      // [twin] the least copy number among this Key's candidates
  std::vector<uint8_t> kernel_;         // [NFA state] may be part of a key
  std::vector<uint8_t> ends_;           // [NFA state] reaches final by epsilon and $ edges
  std::vector<uint8_t> ends_at_start_;  // ... and ^ edges
  int64_t work_ = 0;
  std::vector<int32_t> start_key_;
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> ids_;
  std::vector<const std::vector<int32_t>*> keys_;  // [DFA state] its key (in ids_ or start_key_)
  RawPatternDfa dfa_;
  // Buffers of Spans, kept to spare allocations.
  std::vector<uint64_t> pairs_;
  std::vector<int32_t> targets_;
  std::vector<int32_t> previous_targets_;
};

// The partition of states 0..n-1 that Hopcroft's algorithm refines: each block is a contiguous
// span of elems_, its marked states first.
class Partition {
 public:
  explicit Partition(int32_t n) : elems_(n), pos_(n), block_(n, 0), first_{0}, end_{n}, marked_{0} {
    std::iota(elems_.begin(), elems_.end(), 0);
    std::iota(pos_.begin(), pos_.end(), 0);
  }

  int32_t blocks() const { return static_cast<int32_t>(first_.size()); }
  int32_t block_of(int32_t s) const { return block_[s]; }
  int32_t size(int32_t b) const { return end_[b] - first_[b]; }
  const int32_t* begin(int32_t b) const { return elems_.data() + first_[b]; }
  const int32_t* end(int32_t b) const { return elems_.data() + end_[b]; }

  void Mark(int32_t s) {
    const int32_t b = block_[s];
    const int32_t boundary = first_[b] + marked_[b];
    if (pos_[s] < boundary) return;  // already marked
    const int32_t other = elems_[boundary];
    std::swap(elems_[pos_[s]], elems_[boundary]);
    pos_[other] = pos_[s];
    pos_[s] = boundary;
    if (marked_[b]++ == 0) touched_.push_back(b);
  }

  // Every block with marked states and unmarked ones gives its marked ones to a new block, then
  // on_split(old block, new block); all marks are cleared.
  template <typename OnSplit>
  void SplitMarked(OnSplit on_split) {
    for (int32_t b : touched_) {
      const int32_t marked = marked_[b];
      marked_[b] = 0;
      if (marked == size(b)) continue;
      const int32_t added = blocks();
      first_.push_back(first_[b]);
      end_.push_back(first_[b] + marked);
      marked_.push_back(0);
      first_[b] += marked;
      for (int32_t i = first_[added]; i < end_[added]; ++i) block_[elems_[i]] = added;
      on_split(b, added);
    }
    touched_.clear();
  }

 private:
  std::vector<int32_t> elems_;
  std::vector<int32_t> pos_;    // [state] its index in elems_
  std::vector<int32_t> block_;  // [state]
  std::vector<int32_t> first_;  // [block] its span of elems_
  std::vector<int32_t> end_;
  std::vector<int32_t> marked_;  // [block] how many of its states are marked
  std::vector<int32_t> touched_;
};

// Merges the letters (columns of delta, n rows of *k) that lead every state to the same place,
// since Hopcroft's work grows with the letters: e.g. the runs of \w's bytes.
void MergeAlikeLetters(int32_t n, int32_t* k, std::vector<int32_t>* delta) {
  const int32_t letters = *k;
  std::vector<uint64_t> hash(letters, 1469598103934665603ull);  // FNV-1a of each column
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t c = 0; c < letters; ++c) {
      hash[c] = (hash[c] ^ static_cast<uint32_t>((*delta)[static_cast<size_t>(s) * letters + c])) *
                1099511628211ull;
    }
  }
  std::vector<int32_t> like(letters);  // the first letter with the same hash
  for (int32_t c = 0; c < letters; ++c) {
    like[c] = static_cast<int32_t>(std::find(hash.begin(), hash.end(), hash[c]) - hash.begin());
  }
  std::vector<uint8_t> same(letters, 1);  // whether the column is like[c]'s, hash aside
  for (int32_t s = 0; s < n; ++s) {
    const int32_t* row = delta->data() + static_cast<size_t>(s) * letters;
    for (int32_t c = 0; c < letters; ++c) same[c] = same[c] && row[c] == row[like[c]];
  }
  std::vector<int32_t> kept;
  for (int32_t c = 0; c < letters; ++c) {
    if (like[c] == c || !same[c]) kept.push_back(c);
  }
  *k = static_cast<int32_t>(kept.size());
  std::vector<int32_t> merged(static_cast<size_t>(n) * *k);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t j = 0; j < *k; ++j) {
      merged[static_cast<size_t>(s) * *k + j] =
          (*delta)[static_cast<size_t>(s) * letters + kept[j]];
    }
  }
  *delta = std::move(merged);
}

}  // namespace
}  // namespace pattern_automata

Result<RawPatternDfa> DeterminizePatternNfa(const PatternNfa& nfa) {
  return pattern_automata::SubsetBuilder(nfa).Build();
}

Status PruneUnwritable(RawPatternDfa* dfa) {
  const auto n = static_cast<int32_t>(dfa->spans.size());
  // The bytes a writer can write, as spans: \b \t \n, \f \r, and from the space up.
  static constexpr std::array<std::pair<uint8_t, uint8_t>, 3> kWritable = {
      {{0x08, 0x0A}, {0x0C, 0x0D}, {0x20, 0xFF}}};
  for (auto& spans : dfa->spans) {
    std::vector<RawPatternDfa::Span> kept;
    for (const RawPatternDfa::Span& span : spans) {
      for (const auto& [lo, hi] : kWritable) {
        if (span.lo <= hi && lo <= span.hi) {
          kept.push_back({std::max(span.lo, lo), std::min(span.hi, hi), span.to});
        }
      }
    }
    spans = std::move(kept);
  }
  // The transitions backwards, as lists by target: into[into_first[t] .. into_first[t + 1]].
  std::vector<int32_t> into_first(n + 1, 0);
  for (const auto& spans : dfa->spans) {
    for (const RawPatternDfa::Span& span : spans) ++into_first[span.to + 1];
  }
  std::partial_sum(into_first.begin(), into_first.end(), into_first.begin());
  std::vector<int32_t> into(into_first[n]);
  std::vector<int32_t> fill(into_first.begin(), into_first.end() - 1);
  for (int32_t s = 0; s < n; ++s) {
    for (const RawPatternDfa::Span& span : dfa->spans[s]) into[fill[span.to]++] = s;
  }
  // Backwards from the accepting states.
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> stack;
  for (int32_t s = 0; s < n; ++s) {
    if (dfa->accepting[s]) {
      live[s] = 1;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t i = into_first[s]; i < into_first[s + 1]; ++i) {
      if (!live[into[i]]) {
        live[into[i]] = 1;
        stack.push_back(into[i]);
      }
    }
  }
  if (!live[0]) return InvalidArgument("the pattern admits no string that can be written");
  for (auto& spans : dfa->spans) {
    std::erase_if(spans, [&](const RawPatternDfa::Span& span) { return !live[span.to]; });
  }
  return Status::Ok();
}

Result<PatternDfa> MinimizePatternDfa(const RawPatternDfa& dfa) {
  // Hopcroft's algorithm, over the DFA made complete by a sink state (where bytes led nowhere).
  // Its letters are the runs of bytes on which no span of any state begins or ends.
  const auto sink = static_cast<int32_t>(dfa.spans.size());
  const int32_t n = sink + 1;
  std::array<bool, 257> cut{};
  cut[0] = true;
  for (const auto& spans : dfa.spans) {
    for (const RawPatternDfa::Span& span : spans) cut[span.lo] = cut[span.hi + 1] = true;
  }
  std::array<int32_t, 256> letter_of{};  // [byte]
  int32_t k = 0;                         // letters
  for (int b = 0; b < 256; ++b) letter_of[b] = cut[b] ? k++ : k - 1;
  // delta[s * k + c]: the state after letter c from s.
  std::vector<int32_t> delta(static_cast<size_t>(n) * k, sink);
  for (int32_t s = 0; s < sink; ++s) {
    for (const RawPatternDfa::Span& span : dfa.spans[s]) {
      for (int32_t c = letter_of[span.lo]; c <= letter_of[span.hi]; ++c) {
        delta[static_cast<size_t>(s) * k + c] = span.to;
      }
    }
  }
  pattern_automata::MergeAlikeLetters(n, &k, &delta);
  // into[into_first[c * n + t] ..]: the states s with delta(s, c) == t.
  std::vector<int32_t> into_first(static_cast<size_t>(k) * n + 1, 0);
  std::vector<int32_t> into(static_cast<size_t>(k) * n);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t c = 0; c < k; ++c) {
      ++into_first[static_cast<size_t>(c) * n + delta[static_cast<size_t>(s) * k + c] + 1];
    }
  }
  std::partial_sum(into_first.begin(), into_first.end(), into_first.begin());
  std::vector<int32_t> fill(into_first.begin(), into_first.end() - 1);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t c = 0; c < k; ++c) {
      into[fill[static_cast<size_t>(c) * n + delta[static_cast<size_t>(s) * k + c]]++] = s;
    }
  }

  pattern_automata::Partition partition(n);
  std::vector<std::pair<int32_t, int32_t>> work;  // (block, letter) splitters
  std::vector<uint8_t> in_work(static_cast<size_t>(k) * n, 0);
  const auto push = [&](int32_t b, int32_t c) {
    if (!in_work[static_cast<size_t>(b) * k + c]) {
      in_work[static_cast<size_t>(b) * k + c] = 1;
      work.emplace_back(b, c);
    }
  };
  for (int32_t s = 0; s < sink; ++s) {
    if (dfa.accepting[s]) partition.Mark(s);
  }
  partition.SplitMarked([](int32_t, int32_t) {});
  for (int32_t b = 0; b < partition.blocks(); ++b) {
    for (int32_t c = 0; c < k; ++c) push(b, c);
  }
  std::vector<int32_t> splitter;
  while (!work.empty()) {
    const auto [b, c] = work.back();
    work.pop_back();
    in_work[static_cast<size_t>(b) * k + c] = 0;
    splitter.assign(partition.begin(b), partition.end(b));  // Mark reorders the blocks
    for (int32_t t : splitter) {
      const size_t at = static_cast<size_t>(c) * n + t;
      for (int32_t i = into_first[at]; i < into_first[at + 1]; ++i) partition.Mark(into[i]);
    }
    partition.SplitMarked([&](int32_t old, int32_t added) {
      const int32_t smaller = partition.size(added) <= partition.size(old) ? added : old;
      for (int32_t c2 = 0; c2 < k; ++c2) {
        push(in_work[static_cast<size_t>(old) * k + c2] ? added : smaller, c2);
      }
    });
  }

  // Number the blocks breadth first from the start's; the sink's is never reached, since every
  // transition leads to a state that can still accept.
  constexpr int32_t kUnnumbered = -1;
  std::vector<int32_t> id(partition.blocks(), kUnnumbered);
  std::vector<int32_t> order = {partition.block_of(0)};
  id[order[0]] = 0;
  PatternDfa out;
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t state = *partition.begin(order[i]);
    std::array<int16_t, 256> row;
    row.fill(PatternDfa::kNone);
    for (const RawPatternDfa::Span& span : dfa.spans[state]) {
      int32_t& target = id[partition.block_of(span.to)];
      if (target == kUnnumbered) {
        if (order.size() >= static_cast<size_t>(kMaxPatternStates)) {
          return InvalidArgument("more than " + std::to_string(kMaxPatternStates) + " states");
        }
        target = static_cast<int32_t>(order.size());
        order.push_back(partition.block_of(span.to));
      }
      std::fill(row.begin() + span.lo, row.begin() + span.hi + 1, static_cast<int16_t>(target));
    }
    out.next.push_back(row);
    out.accepting.push_back(dfa.accepting[state]);
  }
  return out;
}

// The product of the automaton with a count of the characters read (a UTF-8 lead byte begins
// one), capped where it tells nothing more: at max_length, past which no character may come, or
// without a maximum at min_length. Only the pairs reachable from the start are made.
Result<PatternDfa> WithLength(const PatternDfa& dfa, int32_t min_length,
                              std::optional<int32_t> max_length) {
  const int64_t cap = max_length.value_or(min_length);
  RawPatternDfa product;
  std::vector<std::pair<int32_t, int64_t>> pairs;  // [product state] (state of dfa, count)
  std::unordered_map<int64_t, int32_t> index;      // state · (cap + 1) + count → product state
  const auto state_of = [&](int32_t s, int64_t count) {
    const auto [it, added] =
        index.try_emplace(s * (cap + 1) + count, static_cast<int32_t>(pairs.size()));
    if (added) {
      pairs.emplace_back(s, count);
      product.spans.emplace_back();
      product.accepting.push_back(dfa.accepting[static_cast<size_t>(s)] != 0 &&
                                  count >= min_length);
    }
    return it->second;
  };
  state_of(0, 0);
  for (size_t p = 0; p < pairs.size(); ++p) {
    if (pairs.size() > 8 * static_cast<size_t>(kMaxPatternStates)) {
      return InvalidArgument("more than " + std::to_string(kMaxPatternStates) +
                             " states with its minLength and maxLength");
    }
    const auto [s, count] = pairs[p];
    for (int b = 0; b < 256; ++b) {
      const int16_t t = dfa.next[static_cast<size_t>(s)][static_cast<size_t>(b)];
      if (t == PatternDfa::kNone) continue;
      int64_t next_count = count + ((b & 0xC0) != 0x80 ? 1 : 0);
      if (next_count > cap) {
        if (max_length.has_value()) continue;
        next_count = cap;
      }
      const int32_t to = state_of(t, next_count);
      std::vector<RawPatternDfa::Span>& spans = product.spans[p];
      if (!spans.empty() && spans.back().hi + 1 == b && spans.back().to == to) {
        spans.back().hi = static_cast<uint8_t>(b);
      } else {
        spans.push_back({.lo = static_cast<uint8_t>(b), .hi = static_cast<uint8_t>(b), .to = to});
      }
    }
  }
  DSCALE_RETURN_IF_ERROR(PruneUnwritable(&product));
  return MinimizePatternDfa(product);
}

}  // namespace dscale
