#pragma once
// The text a JSON-mode output may still become, as a byte-level pushdown automaton over a compiled
// schema (json_schema.h; JSON mode's "any object" is one): JSON (RFC 8259) whose top-level value
// the schema admits, starting at its first byte and ending at its last, whitespace where JSON
// allows it inside, in runs of at most kMaxJsonWhitespaceRun bytes (a model that would rather pad
// than write is held to writing), strings of any bytes but the control characters 0x00-0x1F (a
// quote and a backslash only as JSON spells them), nesting up to kMaxJsonDepth (of which up to
// kMaxOpenUniqueArrays arrays of unique items). A schema whose
// root is a pattern's text (JsonSchema::Pattern) holds the output's bytes to its automaton
// instead: no JSON at all; one whose root is calls in free text (JsonSchema::Calls) takes any
// text, except that each call its syntax opens is a value of the call's schema, closed by the
// syntax's close marker.
// A state copies freely (its open frames, no pointers owned); the schema outlives it.
// JsonTokenMasks (json_token_mask.h) walks the vocabulary with it.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "spec/json_schema.h"

namespace dscale {

inline constexpr int kMaxJsonDepth = 64;
// Arrays of unique items open at once (uniqueItems, json_schema.h), within the nesting.
inline constexpr int kMaxOpenUniqueArrays = 16;
// A newline and indentation 23 levels deep at two spaces.
inline constexpr int kMaxJsonWhitespaceRun = 48;

class JsonGrammar {
 public:
  // Dead: continues nothing (a placeholder to assign to).
  JsonGrammar() = default;
  // Before the first byte: the top-level value is due.
  explicit JsonGrammar(const JsonSchema& schema);
  // Before the first byte of an output whose value follows its reasoning (thinking on): any text
  // up to and including the first `reasoning_end` (the chat format's, "</think>"; static storage,
  // at most 255 bytes), then whitespace, then the top-level value (a pattern's text: straight
  // after the marker; calls in free text: the free text) — it is the answer, as vLLM
  // holds only the answer. An empty `reasoning_end`: JsonGrammar(schema).
  static JsonGrammar Start(const JsonSchema& schema, std::string_view reasoning_end);
  // Copies the open frames only: the vocabulary walk copies a state for every byte it feeds.
  JsonGrammar(const JsonGrammar& other) { *this = other; }
  JsonGrammar& operator=(const JsonGrammar& other);

  // False when `byte` continues no text the schema admits; the state is then dead for good.
  bool Feed(uint8_t byte);
  // Feeds every byte; false at the first that fails.
  bool Feed(std::string_view bytes);

  bool dead() const { return lex_ == Lex::kDead; }
  // Inside a string where plain text (IsPlainStringText: every byte but a quote, a backslash and
  // a control character) changes nothing but a count of its characters (CharactersIn): how many
  // more it may take (kUnboundedRoom: any number). -1 elsewhere, a pattern's string included.
  int64_t plain_text_room() const;
  static constexpr int64_t kUnboundedRoom = INT64_MAX;
  // In free text (a reasoning block's, or a kCalls root's between calls) whose end holds no part
  // of the marker it looks for: the one byte that may change the state (the marker's first), -1
  // where none may (a whole-answer call's free text once the answer began otherwise); kNotFree
  // elsewhere. Text without that byte leaves the state as it is.
  int free_text_trigger() const;
  static constexpr int kNotFree = -2;
  // In a call's JSON value (JsonSchema::Calls, not a whole-answer call: it has no closers),
  // where closer_lead() may begin a closer: plain_text_room() then covers only plain text
  // without it.
  bool in_call_value() const;
  // The byte every closer begins with ("<"), where there are closers; else -1.
  int closer_lead() const { return closer_lead_; }
  // Inside a string's text (not in an escape), held or not.
  bool in_string() const { return lex_ == Lex::kString; }
  static bool IsPlainStringText(std::string_view bytes);
  // The characters (Unicode code points) `bytes` begin, as a held string counts them: its bytes
  // that are not UTF-8 continuation bytes.
  static int CharactersIn(std::string_view bytes);
  // The output may end here: its top-level value is whole (and nothing may follow); a pattern's
  // text (JsonSchema::Pattern): the text so far matches; calls in free text (JsonSchema::Calls):
  // no call is open.
  bool complete() const {
    switch (lex_) {
      case Lex::kDone:
      case Lex::kFree:
      case Lex::kFreeAfterCall:
      case Lex::kCallStart:
        return true;
      case Lex::kText:
        return schema_->pattern(schema_->node(node_).pattern).accepting[pos_] != 0;
      case Lex::kReasoning:
        return calls();
      default:
        return false;
    }
  }

  // Two states with equal keys accept the same continuations (schemas told apart by their id).
  std::string key() const;

 private:
  enum class Lex : uint8_t {
    kStart,          // before the top-level value (node_)
    kReasoning,      // before reasoning_end_ (aux_: how much of it the text ends with)
    kAnswerStart,    // after reasoning_end_: whitespace, then the top-level value
    kValue,          // a value of node_ is due (after ":", or "," in an array)
    kArrayFirst,     // after "[": an item or "]"
    kItem,           // after "," in an array: an item
    kObjectFirst,    // after "{": a key or "}"
    kKey,            // after "," in an object: a key
    kColon,          // after a key: ":", then a value of node_
    kAfter,          // after a value in a container: "," or its closer
    kDone,           // the top-level value closed
    kText,           // a pattern's text (a kText root), pos_ its automaton's state
    kFree,           // a kCalls root's free text (aux_: how much of the open marker it ends with)
    kFreeAfterCall,  // kFree after a one_call syntax's call: the open marker refused
    kCallStart,      // a whole-answer call's answer before its first bytes (aux_: as kFree)
    kCallClose,      // after a call's value: whitespace, then the close marker (pos_: matched)
    // CallSyntax::xml_parameters:
    kXmlTag,         // one of node_'s xml_tags (choices_: those still possible, pos_: matched)
    kXmlText,        // a string argument's text, up to its "</parameter>" (Closers)
    kXmlParamClose,  // after an argument's JSON: whitespace, then "</parameter>" (pos_: matched)
    kXmlFreeBody,    // any arguments: text up to the close marker (aux_: matched)
    kString,         // in a string (aux_ kKeyString: a map's key); a held string's node_ in node_
    kEscape,         // after a backslash in such a string
    kUnicode,        // in \uXXXX (pos_: hex digits left)
    kChoice,         // in a key (aux_ 1) or an enum value: one of choices_, pos_ bytes matched
    kMinus,          // a number's "-": a digit is due
    kZero,           // a number's leading "0"
    kInt,            // a number's integer digits
    kFracStart,      // after ".": a digit is due
    kFrac,           // fraction digits
    kExpStart,       // after "e": a sign or a digit
    kExpSign,        // after the exponent's sign: a digit is due
    kExp,            // exponent digits
    kDead,
  };
  // An open object or array.
  struct Frame {
    uint16_t node;
    uint16_t count;  // an array's items so far, capped where its bounds stop telling them apart
    uint8_t next;    // an object's first declared property not yet passed
  };
  // The literals written so far in the top frame (bit i: its items' literal i), where it is an
  // array whose items must differ; else null.
  uint64_t* UniqueItemsUsed();

  // aux_'s bits in a string: a map's key; a \u escape in a held string beginning with "d".
  static constexpr uint8_t kKeyString = 1;
  static constexpr uint8_t kSurrogateLead = 2;

  bool FeedReasoning(uint8_t byte);
  bool calls() const { return schema_->node(schema_->root()).kind == JsonSchemaNode::Kind::kCalls; }
  // A kCalls root's free text begins (after the reasoning, or a call).
  void StartFreeText(bool after_call = false);
  bool FeedFree(uint8_t byte);
  bool FeedCallStart(uint8_t byte);
  bool FeedCallClose(uint8_t byte);
  // The call's value is due (node_ the call), after whitespace; its XML form's function tag.
  void OpenCall();
  bool xml() const { return schema_->call_syntax().xml_parameters; }
  void ExpectXmlTags(uint16_t node, uint64_t choices);
  // The arguments' next tag: a property not passed yet (up to the first required), or
  // "</function>" where no required one remains.
  void ExpectParameterTags();
  bool FeedXmlTag(uint8_t byte);
  bool EndXmlTag(int i);
  bool FeedXmlText(uint8_t byte);
  // The tags that end a call's value or XML argument in the chat format's parser
  // (JsonSchema::call_closers): a JSON value in a call may hold none of them, even in a string;
  // a string argument's text ends at the first, "</parameter>".
  const std::vector<std::string>& Closers() const { return schema_->call_closers(); }
  // The closer `byte` completes (its index), else -1.
  int MatchCloser(uint8_t byte);
  bool FeedXmlParamClose(uint8_t byte);
  bool FeedXmlFreeBody(uint8_t byte);
  bool EndString();
  bool FeedEscape(uint8_t byte);
  bool SomeEscapeFollows() const;
  bool StringByte(uint8_t byte);
  bool in_held_string() const;
  bool FeedStructural(uint8_t byte);
  bool FeedChoice(uint8_t byte);
  void EndLiteral(int i);
  bool StartValue(int32_t node, uint8_t byte);
  bool StartKey(uint8_t byte);
  bool StartItem(uint8_t byte);
  bool Comma();
  bool Close(uint8_t closer);
  void AfterValue();
  bool EndNumber(uint8_t byte);
  bool TakeDigit(uint8_t byte);
  bool TakeFractionDigit(uint8_t byte);
  SchemaBound Magnitude() const;
  bool Meets(SchemaBound a, SchemaBound b) const;
  bool InBoundsReachable() const;
  bool Kill() {
    lex_ = Lex::kDead;
    return false;
  }
  const JsonSchemaNode& Node(int32_t i) const { return schema_->node(i); }
  const JsonSchemaNode& TopNode() const { return Node(frames_[depth_ - 1].node); }
  // The declared properties a key in the top object may be: from the next one not passed up to
  // the first required one.
  uint64_t KeyChoices() const;
  bool MayClose() const;
  bool uses_node() const;

  const JsonSchema* schema_ = nullptr;
  std::string_view reasoning_end_;
  // kChoice: bit i, choice i (a property or a literal) still possible; a bounded number's
  // states: its digits before the point so far, as a magnitude; a held string's: its characters
  // (without a maximum, at most its minimum).
  uint64_t choices_ = 0;
  // The value due or in progress (kValue, kColon, kChoice, numbers, held strings).
  uint16_t node_ = 0;
  // kChoice: bytes matched; kUnicode: hex digits left; a bounded integer: its digits; a
  // pattern's string: its automaton's state.
  uint16_t pos_ = 0;
  Lex lex_ = Lex::kDead;
  uint8_t depth_ = 0;
  // Strings and kChoice: kKeyString for a key (kSurrogateLead); a bounded number: 1 if negative.
  uint8_t aux_ = 0;
  // A bounded number's digits after its point, as an integer, and how many.
  uint64_t fraction_ = 0;
  uint8_t fraction_digits_ = 0;
  uint8_t spaces_ = 0;  // the whitespace run the text ends with (between tokens)
  // Inside a call's value (Closers): bytes matched of the closers still possible (bit i: i).
  uint8_t closer_pos_ = 0;
  uint8_t closer_set_ = 0;
  int16_t closer_lead_ = -1;                 // closer_lead(), kept: Feed asks at every byte
  std::array<Frame, kMaxJsonDepth> frames_;  // [0, depth_) open; the rest never read
  // Per open array of unique items, innermost last, the literals written (UniqueItemsUsed);
  // copied only while unique_open_ (how many are open) is not 0, so that other states copy no
  // more than their frames.
  std::array<uint64_t, kMaxOpenUniqueArrays> used_;
  uint8_t unique_open_ = 0;
};

}  // namespace dscale
