#pragma once
// A JSON Schema (response_format {"type": "json_schema"}) compiled to the nodes JsonGrammar
// (json_grammar.h) walks, and JSON mode's "any object" as the same.
//
// What a compiled schema holds an output to (the text is always JSON, RFC 8259):
// - "type" (one or a list), "enum", "const", "anyOf", "oneOf" (of alternatives that share no
//   value), "allOf" of one schema, "$ref" to a part of the same document ("#", "#/$defs/...",
//   any JSON pointer), recursion included;
// - objects: "properties" written in the order the schema lists them, each one that is not
//   "required" optional, no others (a schema with properties never gets undeclared members, as
//   OpenAI's strict mode and xgrammar write them); an object without "properties" is a map whose
//   values follow "additionalProperties" (absent or true: any value; false: only "{}");
// - arrays: "prefixItems", "items", "minItems", "maxItems", and "uniqueItems" where the items
//   are an enum or a const (each item a value not written before);
// - numbers and integers: "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum" (on a
//   schema whose types include integer or number, to those), held digit by digit, exactly in
//   decimal;
// - strings: "minLength", "maxLength" (in code points) and "pattern" (an ECMA-262 regular
//   expression, pattern_dfa.h, matched anywhere in the value as JSON Schema says; its string
//   takes no \u escape), on a schema whose types include string, to strings (a string's
//   keywords without "type" make it a string);
//   without a pattern, "format" date, time, date-time (RFC 3339), uuid, email and ipv4, as the
//   patterns FormatPattern gives them (other formats are annotations);
// - "integer" a number without fraction or exponent, enum and const values exactly as compact
//   JSON writes them (strings as written, UTF-8 not escaped).
// Annotations ("title", "description", "default", "examples", other formats, ...) and keywords it
// does not know are ignored, as JSON Schema ignores them; an assertion it cannot hold an output
// to ("multipleOf", "uniqueItems" of other items, "not", ...) is refused naming it, so
// that what it returns always validates. The alternatives of a union must begin with different
// bytes (a string or null; an object or an array), after merging what one admits of another's
// (an integer into a number, enum strings into any string, enums into one; a bounded number or a
// held string absorbs nothing), except objects that
// all require one property holding a string const or enum of their own (a tagged union: the
// tag, written first whatever its place in the schema, tells them apart). The top-level value
// must be an object or an array; a schema that admits any value means any object.

#include <bitset>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "spec/pattern_dfa.h"

namespace dscale {

// A key or an enum value in progress is the set of those it may still become, 64 bits.
inline constexpr int kMaxSchemaChoices = 64;
inline constexpr int kMaxSchemaNodes = 4096;
// An array's item bounds; an unbounded maxItems is kMaxSchemaItems.
inline constexpr int32_t kMaxSchemaItems = 65535;
// A number's bounds: at most 10^15 in size, held exactly in units of 10^-18 (a bound with more
// digits after the point rounded inwards). A bounded value has at most 18 digits before its
// point and, a number's, at most 18 after it, and no exponent.
inline constexpr int64_t kMaxSchemaBound = 1'000'000'000'000'000;
inline constexpr int kMaxBoundedDigits = 18;
inline constexpr int kBoundFractionDigits = 18;
__extension__ using SchemaBound = __int128;
inline constexpr SchemaBound kBoundUnitsPerOne = 1'000'000'000'000'000'000;
// A string's minLength and maxLength: at most a million characters.
inline constexpr int32_t kMaxSchemaLength = 1'000'000;
inline constexpr int32_t kUnboundedLength = INT32_MAX;

struct JsonSchemaNode {
  enum class Kind : uint8_t {
    kPending,   // a $ref being compiled
    kObject,    // "{"
    kArray,     // "["
    kString,    // any string
    kNumber,    // any number
    kInteger,   // a number without fraction or exponent
    kLiterals,  // one of `literals`
    kUnion,     // one of `alternatives`
    // "{": an object of one of `alternatives` (objects, each with the tag as its first
    // property), told apart by the value of a property every one of them requires, the same key
    // in each and a string const or enum of its own (a tagged union: OpenAI's forced tool calls,
    // Pydantic's discriminated unions). properties[0] is that key, its node the literals of
    // every alternative's tags; tag_owner[i] the alternative whose tag literal i is.
    kTagged,
    // Not JSON: the output's whole text, its bytes walking `pattern` (JsonSchema::Pattern).
    kText,
    // Not JSON: free text with calls in it, each a value of `values` (JsonSchema::Calls).
    kCalls,
  };
  struct Property {
    std::string key;  // the name as JSON text, quotes included
    int32_t node = 0;
    bool required = false;
  };

  Kind kind = Kind::kPending;
  std::vector<Property> properties;  // kObject; at most kMaxSchemaChoices
  // kObject without properties: every member's value (-1: no member may be written);
  // kArray: every item's.
  int32_t values = -1;
  std::vector<int32_t> prefix_items;    // kArray: the first items' nodes, then `values`'s
  int32_t min_items = 0;                // kArray
  int32_t max_items = kMaxSchemaItems;  // kArray
  bool unique_items = false;  // kArray: `values` is kLiterals, each item a different one of them
  std::vector<std::string> literals;    // kLiterals: compact JSON texts, at most kMaxSchemaChoices
  std::vector<int32_t> alternatives;    // kUnion: first bytes disjoint; kTagged: objects
  std::vector<int32_t> tag_owner;       // kTagged
  std::bitset<256> first_bytes;         // the bytes a value of this node may begin with
  // kInteger and kNumber: the bounds (minimum, maximum, their exclusive forms) in units of
  // 10^-18, inclusive (an exclusive bound moved one unit in; an integer's rounded into the
  // integers it admits).
  std::optional<SchemaBound> min_value;
  std::optional<SchemaBound> max_value;
  // kString: its length in characters (Unicode code points, as JSON Schema counts them), from
  // minLength and maxLength (kUnboundedLength: none); or, where the schema gives a pattern,
  // the automaton its value's bytes walk (JsonSchema::pattern(), with the length folded in).
  int32_t min_length = 0;
  int32_t max_length = kUnboundedLength;
  int32_t pattern = -1;

  bool bounded() const { return min_value.has_value() || max_value.has_value(); }
  // A string that not every string text completes: its bytes are counted or walked.
  bool held_string() const {
    return kind == Kind::kString &&
           (min_length > 0 || max_length != kUnboundedLength || pattern >= 0);
  }
};

// Where a chat format's model writes its calls to tools in free text (JsonSchema::Calls).
struct CallSyntax {
  // Opens a call anywhere in the free text ("<tool_call>"); the call's value follows it after
  // whitespace, then whitespace and `close` ("</tool_call>"), then free text again.
  std::string open;
  std::string close;
  // The call is the whole answer (Llama 3.1's): `open` is its value's first bytes ('{"name"'),
  // a call only where the answer begins with them (whitespace before them allowed), and nothing
  // follows its value; an answer that does not begin so is free text.
  bool whole_answer = false;
  // Not a JSON value but Qwen3-Coder's XML form (Qwen3.5's and Qwen3.6's calls): after `open`,
  // "<function=NAME>", then a "<parameter=KEY>" block per argument in the order the arguments
  // object lists them, "\nVALUE\n</parameter>", then "</function>", then `close`. The call's
  // schema is one object or a tagged union of them, each its tag (the name) and an arguments
  // object; an argument that is a string (not held to a length or pattern) is its text, which
  // holds none of the four tags' closers, an enum of strings one of them, any other value its
  // JSON. Arguments of any object (no properties): any text up to `close`.
  bool xml_parameters = false;
  // At most one call (OpenAI's parallel_tool_calls false): the free text after it may not open
  // another.
  bool one_call = false;
};

class JsonSchema {
 public:
  // Any JSON object: JSON mode (response_format {"type": "json_object"}).
  static std::shared_ptr<const JsonSchema> AnyObject();
  // `schema` compiled, or InvalidArgument "<field><path>: <why>" naming where it is refused
  // (`field` names the schema itself, e.g. "response_format.json_schema.schema"). Schemas with
  // the same text share one compiled schema (and so the masks kept for it).
  static Result<std::shared_ptr<const JsonSchema>> Compile(const nlohmann::ordered_json& schema,
                                                           const std::string& field);

  // Not JSON: the output's whole text matching `regex` (an ECMA-262 regular expression,
  // pattern_dfa.h, that all of it must match: vLLM's structured_outputs regex and choice), as a
  // schema whose root is a kText node. InvalidArgument "<field>: <why>". Shared by text as Compile.
  static Result<std::shared_ptr<const JsonSchema>> Pattern(std::string_view regex,
                                                           const std::string& field);
  // Not JSON: free text in which every call written in `syntax` is a value `call` admits (an
  // object: the tagged union of a request's tools, server/tool_choice.h). InvalidArgument
  // "<field><path>: <why>" as Compile; shared by text as Compile.
  static Result<std::shared_ptr<const JsonSchema>> Calls(const nlohmann::ordered_json& call,
                                                         const CallSyntax& syntax,
                                                         const std::string& field);
  // The regular expression whose only matches are `choices`, each as written.
  static std::string ChoicesPattern(const std::vector<std::string>& choices);

  // Whether `schema` admits any value: true, or an object of annotations alone (a top-level
  // such schema compiles to any object).
  static bool AdmitsAnyValue(const nlohmann::ordered_json& schema);

  int32_t root() const { return root_; }
  const JsonSchemaNode& node(int32_t i) const { return nodes_[static_cast<size_t>(i)]; }
  // The node a value of `node` beginning with `byte` is (an alternative, where `node` is a
  // union), or -1 where no value of it begins so.
  int32_t Resolve(int32_t node, uint8_t byte) const;
  // A string's pattern (JsonSchemaNode::pattern), its bytes' automaton.
  const PatternDfa& pattern(int32_t i) const { return patterns_[static_cast<size_t>(i)]; }
  // A kCalls root's syntax.
  const CallSyntax& call_syntax() const { return call_syntax_; }
  // The tags that end a call's value early in the chat format's parser, wherever they appear:
  // the close marker; in the XML form first "</parameter>", then "<parameter=" and "</function>"
  // (empty for a whole-answer call). They begin with one byte, the only one of it each holds,
  // which JSON writes only in strings ("<" in every chat format).
  const std::vector<std::string>& call_closers() const { return call_closers_; }
  // CallSyntax::xml_parameters: the tags a node's value may be at a point, whole (empty for
  // others): the call's "<function=NAME>" per tag literal; an arguments object's
  // "<parameter=KEY>" per property, then "</function>"; an enum of strings' (and null's)
  // "\nVALUE\n</parameter>" per literal.
  const std::vector<std::string>& xml_tags(int32_t node) const;
  // CallSyntax::xml_parameters: whether an argument of `node` is written as its text (a string
  // not held to a length or pattern, or one or null: the parser reads "null" as null), not JSON.
  bool xml_text(int32_t node) const;
  // The arguments object of the call's tag literal i (-1: any object, its body free text).
  int32_t xml_arguments(int i) const { return xml_arguments_[static_cast<size_t>(i)]; }
  // Unique to this schema in the process: the masks kept per grammar state tell schemas apart by
  // it.
  uint64_t id() const { return id_; }

 private:
  friend class JsonSchemaCompiler;
  friend Status AddXmlCallTags(JsonSchema& schema, int32_t call,
                               std::span<const std::string> paths);  // xml_call_tags.h
  std::vector<JsonSchemaNode> nodes_;
  std::vector<PatternDfa> patterns_;
  CallSyntax call_syntax_;
  std::vector<std::string> call_closers_;
  std::vector<std::vector<std::string>> xml_tags_;  // [node] where xml_parameters
  std::vector<int32_t> xml_arguments_;              // [tag literal]
  int32_t root_ = 0;
  uint64_t id_ = 0;
};

}  // namespace dscale
