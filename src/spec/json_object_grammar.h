#pragma once
// The text a JSON-mode output (response_format {"type": "json_object"}) may still become, as a
// byte-level pushdown automaton: JSON (RFC 8259) whose top-level value is an object, starting at
// its "{" and ending at its "}", whitespace where JSON allows it inside, in runs of at most
// kMaxJsonWhitespaceRun bytes (a model that would rather pad than write is held to writing),
// strings of any bytes but the control characters 0x00-0x1F (a quote and a backslash only as JSON
// spells them), nesting up to kMaxJsonDepth.
// A state is 16 bytes and copies freely; JsonTokenMasks (json_token_mask.h) walks the vocabulary
// with it.

#include <cstdint>
#include <string_view>

namespace dscale {

inline constexpr int kMaxJsonDepth = 64;
// A newline and indentation 23 levels deep at two spaces.
inline constexpr int kMaxJsonWhitespaceRun = 48;

class JsonObjectGrammar {
 public:
  // Before the first byte: "{" is due.
  JsonObjectGrammar() = default;
  // After reasoning (thinking on): any text up to and including the first "</think>", then
  // whitespace, then "{" — the object is the answer, as vLLM holds only the answer to it.
  static JsonObjectGrammar AfterReasoning();

  // False when `byte` continues no JSON object text; the state is then dead for good.
  bool Feed(uint8_t byte);
  // Feeds every byte; false at the first that fails.
  bool Feed(std::string_view bytes);

  bool dead() const { return lex_ == Lex::kDead; }
  // Inside a string, where every byte but a quote, a backslash and a control character leaves
  // the state as it is (IsPlainStringText).
  bool in_string() const { return lex_ == Lex::kString; }
  static bool IsPlainStringText(std::string_view bytes);
  // The object is whole: nothing may follow.
  bool complete() const { return lex_ == Lex::kDone; }

  // Two states with the same key accept the same continuations.
  struct Key {
    uint64_t stack;
    uint32_t rest;
    bool operator==(const Key&) const = default;
  };
  Key key() const;

 private:
  enum class Lex : uint8_t {
    kStart,        // before the top-level "{"
    kReasoning,    // before "</think>" (aux_: how much of it the text ends with)
    kAnswerStart,  // after "</think>": whitespace, then the top-level "{"
    kValue,        // a value is due (after ":", or "," in an array)
    kArrayFirst,   // after "[": a value or "]"
    kObjectFirst,  // after "{": a key or "}"
    kKey,          // after "," in an object: a key
    kColon,        // after a key
    kAfter,        // after a value in a container: "," or its closer
    kDone,         // the top-level object closed
    kString,       // in a string (aux_ 1: a key)
    kEscape,       // after a backslash in a string
    kUnicode,      // in \uXXXX (digits_ left)
    kMinus,        // a number's "-": a digit is due
    kZero,         // a number's leading "0"
    kInt,          // a number's integer digits
    kFracStart,    // after ".": a digit is due
    kFrac,         // fraction digits
    kExpStart,     // after "e": a sign or a digit
    kExpSign,      // after the exponent's sign: a digit is due
    kExp,          // exponent digits
    kLiteral,      // in true, false or null (literal_, at position aux_)
    kDead,
  };

  bool FeedStructural(uint8_t byte);
  bool StartValue(uint8_t byte);
  bool Open(bool object);
  bool Close(bool object);
  void AfterValue();
  bool EndNumber(uint8_t byte);
  bool Kill() {
    lex_ = Lex::kDead;
    return false;
  }
  bool TopIsObject() const { return ((stack_ >> (depth_ - 1)) & 1) != 0; }

  uint64_t stack_ = 0;  // bit i: level i + 1 is an object (else an array)
  Lex lex_ = Lex::kStart;
  uint8_t depth_ = 0;
  uint8_t aux_ = 0;      // kString / kEscape / kUnicode: 1 for a key; kLiteral: position
  uint8_t literal_ = 0;  // kLiteral: 0 true, 1 false, 2 null; kUnicode: hex digits left
  uint8_t spaces_ = 0;   // the whitespace run the text ends with (between tokens)
};

}  // namespace dscale
