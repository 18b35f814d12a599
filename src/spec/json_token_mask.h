#pragma once
// JSON mode over a vocabulary: which tokens may come next after an output whose text left the
// grammar in a given state (json_grammar.h), and the rows of logits held to them. A token is
// allowed when all its bytes continue the text; a token without text (a special token) never is;
// a stop id is allowed exactly where the value is complete, whatever its text. Masks are
// computed by walking the vocabulary in byte order, so tokens that share a prefix share its steps
// and a prefix the grammar refuses skips every token under it (inside a string, tokens of plain
// string text are allowed at once and only the others walked), and kept per grammar state (an
// output visits few: the nesting it is in, and whether it is in a string, a number or between
// them, and a held string's count or pattern state), up to a bound, for every schema alike.
// Engine thread only.

#include <array>
#include <cstdint>
#include <functional>
#include <list>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "spec/json_grammar.h"

namespace dscale {

class JsonTokenMasks {
 public:
  // `token_text(id)`: the bytes token `id` adds to the output's text, for id in [0, vocab).
  JsonTokenMasks(int64_t vocab, const std::function<std::string_view(int32_t)>& token_text);

  // The state after `tokens`' texts, from `start`.
  JsonGrammar StateAfter(JsonGrammar start, std::span<const int32_t> tokens) const;
  // The state after one more token (dead where its text is refused).
  JsonGrammar Advance(JsonGrammar state, int32_t token) const;

  // Bit t set: token t may follow `state` (stop ids not included). Computed once per state.
  std::span<const uint64_t> Allowed(const JsonGrammar& state);

  // Sets every logit of a token that may not follow `state` to the lowest float (a dead state
  // changes nothing: its row is past a draft the row before refused). `stop_ids` are allowed
  // where the value is complete and nowhere else.
  void Mask(const JsonGrammar& state, std::span<const int64_t> stop_ids, std::span<float> logits);

  int64_t cached_states() const { return static_cast<int64_t>(masks_.size()); }

 private:
  // Tokens in byte order, each one's common prefix length with the one before, and where the
  // tokens sharing its first d bytes end (skip[i][d - 1]: the first j > i whose common prefix
  // with the one before is under d), so that a refused short prefix skips its tokens in one step.
  static constexpr size_t kSkipDepth = 4;
  struct Walk {
    std::vector<int32_t> ids;
    std::vector<int32_t> common_prefix;
    std::vector<std::array<int32_t, kSkipDepth>> skip;
  };
  Walk MakeWalk(std::vector<int32_t> ids) const;
  std::vector<uint64_t> Compute(const JsonGrammar& state);
  // In free text (JsonGrammar::free_text_trigger): the tokens with text but without `byte`
  // (-1: every token with text), which leave the state as it is, and a walk of the others.
  struct FreeTextSplit {
    std::vector<uint64_t> without;
    Walk with;
  };
  const FreeTextSplit& FreeText(int byte);
  // In a string of a call's value: the tokens that are not plain string text or hold `byte`
  // (its closers' first).
  const Walk& NotPlainOrHolding(int byte);
  // The plain string texts of at most `room` characters.
  std::vector<uint64_t> PlainTextWithin(int64_t room) const;

  int64_t vocab_;
  std::vector<std::string> texts_;  // [vocab]
  std::vector<float> stop_logits_;  // Mask's scratch
  Walk all_;                        // every token with text
  Walk not_plain_;                  // those whose text is not plain string text
  std::vector<uint64_t> plain_;     // bit t: token t's text is plain string text
  std::vector<int32_t> plain_characters_;  // [vocab] a plain text's characters (CharactersIn)
  std::vector<int32_t> longest_plain_first_;  // the plain texts' ids, most characters first
  size_t longest_ = 0;              // the longest token's bytes
  std::unordered_map<int, FreeTextSplit> free_text_;  // FreeText's, per byte (a marker's first)
  std::unordered_map<int, Walk> not_plain_or_holding_;  // NotPlainOrHolding's, per byte
  // The masks, most recently used first, at most kMaxCachedStates.
  static constexpr size_t kMaxCachedStates = 512;
  std::list<std::pair<std::string, std::vector<uint64_t>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> masks_;
};

}  // namespace dscale
