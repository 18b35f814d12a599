// JSON schemas compiled (spec/json_schema.h) and the grammar over them (spec/json_grammar.h):
// texts admitted and refused, refusals naming the keyword, and random walks of the grammar whose
// every finished text a validator written from the specification accepts, with no dead end.

#include "spec/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "spec/json_grammar.h"
#include "spec/json_token_mask.h"
#include "support/json_grammar_feed.h"
#include "support/json_schema_check.h"

namespace dscale {
namespace {

using Ordered = nlohmann::ordered_json;

std::shared_ptr<const JsonSchema> Compiled(const std::string& schema) {
  Result<std::shared_ptr<const JsonSchema>> s = JsonSchema::Compile(Ordered::parse(schema), "S");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : JsonSchema::AnyObject();
}

std::string Refusal(const std::string& schema) {
  const Result<std::shared_ptr<const JsonSchema>> s =
      JsonSchema::Compile(Ordered::parse(schema), "S");
  return s.ok() ? "compiled" : s.status().message();
}

// A person: properties in order, two required, an enum array with bounds, recursion through
// a union with null.
constexpr const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "an annotation"},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "cd"]}, "minItems": 1, "maxItems": 2},
    "spouse": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
  },
  "required": ["name", "age"]
})";

TEST(JsonSchemaTest, AnObjectsPropertiesInOrderRequiredOnesPresent) {
  const auto person = Compiled(kPerson);
  for (const char* text : {
           R"({"name":"A","age":3})",
           R"({"name": "A\"b", "age": -0, "tags": ["a"]})",
           R"({"name":"A","age":30,"tags":["a","cd"],"spouse":null})",
           R"({"name":"A","age":3,"spouse":{"name":"B","age":4,"spouse":null}})",
           "{\n  \"name\": \"\xc3\xa9\",\n  \"age\": 12,\n  \"tags\": [ \"b\" ]\n}",
       }) {
    EXPECT_TRUE(testing::GrammarCompletes(*person, text)) << text;
    const std::string s(text);
    for (size_t i = 0; i < s.size(); ++i)
      EXPECT_TRUE(testing::GrammarTakes(*person, s.substr(0, i))) << s.substr(0, i);
    EXPECT_TRUE(testing::SchemaAdmits(nlohmann::json::parse(s), nlohmann::json::parse(kPerson)));
  }
  for (const char* text : {
           R"({"age":3,"name":"A"})",                       // out of the schema's order
           R"({"name":"A"})",                               // age is required
           R"({"name":"A","age":3.5})",                     // not an integer
           R"({"name":"A","age":3e2})",                     // nor this
           R"({"name":"A","age":3,"tags":[]})",             // minItems
           R"({"name":"A","age":3,"tags":["a","b","a"]})",  // maxItems
           R"({"name":"A","age":3,"tags":["c"]})",          // not in the enum
           R"({"name":"A","age":3,"extra":1})",             // not declared
           R"({"name":1,"age":3})",                         // not a string
           R"({"name":"A","age":3,"spouse":"B"})",          // neither a person nor null
           R"({"name":"A","age":3,"spouse":{"name":"B"}})",
           R"({"name":"A","age":3,})",
           R"([])",
       }) {
    EXPECT_FALSE(testing::GrammarCompletes(*person, text)) << text;
  }
}

TEST(JsonSchemaTest, EnumsMapsUnionsAndArraysAtTheTop) {
  const auto numbers = Compiled(R"({"properties": {"n": {"enum": [1, 12, -3.5]}}})");
  for (const char* text : {R"({"n":1})", R"({"n":12})", R"({"n":-3.5})", R"({"n":1 })", "{}"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*numbers, text)) << text;
  }
  for (const char* text : {R"({"n":123})", R"({"n":2})", R"({"n":-3})", R"({"n":"1"})"}) {
    EXPECT_FALSE(testing::GrammarCompletes(*numbers, text)) << text;
  }
  const auto map = Compiled(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(testing::GrammarCompletes(*map, R"({"a":1,"b":-2,"":0})"));
  EXPECT_FALSE(testing::GrammarTakes(*map, R"({"a":"x")"));
  const auto empty = Compiled(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(testing::GrammarCompletes(*empty, "{ }"));
  EXPECT_FALSE(testing::GrammarTakes(*empty, R"({")"));
  const auto scalars = Compiled(
      R"({"type": "object", "properties": {"v": {"type": ["string", "integer", "boolean", "null"]},
          "w": {"type": ["integer", "number"]}, "c": {"const": "fixed"}}, "required": ["c"]})");
  for (const char* text : {R"({"v":"s","w":1.5,"c":"fixed"})", R"({"v":-7,"c":"fixed"})",
                           R"({"v":false,"w":2,"c":"fixed"})", R"({"v":null,"c":"fixed"})"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*scalars, text)) << text;
  }
  EXPECT_FALSE(testing::GrammarCompletes(*scalars, R"({"v":1.5,"c":"fixed"})"));
  EXPECT_FALSE(testing::GrammarCompletes(*scalars, R"({"c":"fixe"})"));
  // A tuple: its first items by position, none after them.
  const auto pair = Compiled(R"({"type": "array", "prefixItems": [{"type": "string"},
      {"type": "integer"}], "items": false})");
  for (const char* text : {R"(["a", 1])", R"(["a"])", "[]"})
    EXPECT_TRUE(testing::GrammarCompletes(*pair, text));
  for (const char* text : {R"(["a", 1, 2])", "[1]", R"(["a", "b"])"}) {
    EXPECT_FALSE(testing::GrammarCompletes(*pair, text)) << text;
  }
  const auto list = Compiled(R"({"type": "array", "items": {"type": "number"}, "maxItems": 2})");
  EXPECT_TRUE(testing::GrammarCompletes(*list, "[1, 2e5]"));
  EXPECT_FALSE(testing::GrammarTakes(*list, "[1, 2, "));
  // Any value at the top means any object; Pydantic's $defs and allOf of one.
  EXPECT_TRUE(testing::GrammarCompletes(*Compiled("{}"), R"({"a":[1]})"));
  EXPECT_FALSE(testing::GrammarTakes(*Compiled("true"), "["));
  const auto pydantic =
      Compiled(R"({"$defs": {"Color": {"enum": ["red", "green"], "type": "string"}},
      "properties": {"c": {"allOf": [{"$ref": "#/$defs/Color"}], "default": "red"},
                     "d": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]}},
      "required": ["c"], "title": "M", "type": "object"})");
  EXPECT_TRUE(testing::GrammarCompletes(*pydantic, R"({"c":"green","d":null})"));
  EXPECT_FALSE(testing::GrammarCompletes(*pydantic, R"({"c":"blue"})"));
}

// Objects told apart by the tag they begin with: forced tool calls' array of {name, parameters}.
constexpr const char* kCalls = R"({"type": "array", "minItems": 1, "items": {"anyOf": [
    {"type": "object", "properties": {"name": {"const": "get_weather"}, "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
     "required": ["name", "parameters"]},
    {"type": "object", "properties": {"name": {"enum": ["get_time", "now"]}, "parameters":
        {"type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}}}},
     "required": ["name", "parameters"]}]}})";

constexpr const char* kPets = R"({"type": "array", "items": {"oneOf": [
    {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"const": "cat"},
                                      "lives": {"type": "integer"}},
     "required": ["name", "kind"]},
    {"type": "object", "properties": {"kind": {"const": "dog", "type": "string"},
                                      "name": {"type": "string"}},
     "required": ["kind", "name"]}]}})";

TEST(JsonSchemaTest, ObjectsToldApartByTheTagTheyBeginWith) {
  const auto calls = Compiled(kCalls);
  for (
      const char* text : {
          R"([{"name":"get_weather","parameters":{"city":"Paris"}}])",
          R"([{"name": "now", "parameters": {}}, {"name": "get_weather", "parameters": {"city": ""}}])",
          R"([{"name":"get_time","parameters":{"tz":"CET"}}])",
      }) {
    EXPECT_TRUE(testing::GrammarCompletes(*calls, text)) << text;
    EXPECT_TRUE(testing::SchemaAdmits(nlohmann::json::parse(text), nlohmann::json::parse(kCalls)));
  }
  for (const char* text : {
           R"([{"name":"get_weather","parameters":{"tz":"UTC"}}])",  // the other's parameters
           R"([{"name":"get_weather","parameters":{}}])",            // city is required
           R"([{"parameters":{},"name":"now"}])",                    // the tag comes first
           R"([{"name":"other","parameters":{}}])",
           R"([{"name":"now"}])",
           "[]",
       }) {
    EXPECT_FALSE(testing::GrammarCompletes(*calls, text)) << text;
  }
  // Pydantic's discriminated union: the tag ("kind") wherever the model declares it, written
  // first.
  const auto pets = Compiled(kPets);
  EXPECT_TRUE(testing::GrammarCompletes(
      *pets, R"([{"kind":"cat","name":"Tom","lives":9},{"kind":"dog","name":"Rex"}])"));
  EXPECT_FALSE(testing::GrammarCompletes(*pets, R"([{"name":"Tom","kind":"cat"}])"));
  EXPECT_FALSE(testing::GrammarCompletes(*pets, R"([{"kind":"dog","name":"Rex","lives":1}])"));
  // Tags two alternatives share tell nothing apart.
  EXPECT_NE(Refusal(R"({"anyOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]},
                                   {"properties": {"t": {"enum": ["b", "a"]}}, "required": ["t"]}]})")
                .find("alternatives that begin with the same byte are not supported"),
            std::string::npos);
}

// Integers held to their bounds digit by digit: a prefix no completion of which is inside the
// bounds is refused at once.
TEST(JsonSchemaTest, IntegersWithinTheirBounds) {
  const auto bounded = Compiled(R"({"type": "object", "properties": {
      "age": {"type": "integer", "minimum": 0, "maximum": 130},
      "t": {"type": "integer", "exclusiveMinimum": -12.5, "exclusiveMaximum": -3},
      "big": {"type": "integer", "minimum": 1000}}})");
  for (const char* text : {R"({"age":0})", R"({"age":130})", R"({"age":7,"t":-12})", R"({"t":-4})",
                           R"({"big":1000})", R"({"big":999999999999999999})"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*bounded, text)) << text;
  }
  for (const char* text :
       {R"({"age":-1)", R"({"age":131)", R"({"age":1300)", R"({"age":00)", R"({"t":-13)",
        R"({"t":-2)", R"({"t":5)", R"({"t":-0)", R"({"big":1000000000000000000)"}) {
    EXPECT_FALSE(testing::GrammarTakes(*bounded, text)) << text;
  }
  // "-0" is 0, inside the bounds; too small as written, though its digits could still grow:
  // alive, but not an end.
  EXPECT_TRUE(testing::GrammarCompletes(*bounded, R"({"age":-0})"));
  EXPECT_TRUE(testing::GrammarTakes(*bounded, R"({"big":99)"));
  EXPECT_FALSE(testing::GrammarCompletes(*bounded, R"({"big":99})"));
  EXPECT_FALSE(testing::GrammarCompletes(*bounded, R"({"t":-3})"));
}

// Strings held to a length in characters (code points): raw UTF-8 and escapes count one each, a
// surrogate's escape is refused where the length is counted.
TEST(JsonSchemaTest, StringsWithinTheirLength) {
  const auto sized = Compiled(R"({"type": "object", "properties": {
      "code": {"type": "string", "minLength": 2, "maxLength": 3},
      "name": {"minLength": 1},
      "note": {"type": ["string", "null"], "maxLength": 2},
      "any": {"type": "string", "minLength": 0}}})");
  for (const char* text : {R"({"code":"ab"})", R"({"code":"aéc"})", "{\"code\":\"\xc3\xa9!\"}",
                           "{\"code\":\"\xf0\x9f\x98\x80\xe4\xb8\xad\"}", R"({"code":"\n\t\""})",
                           R"({"name":"x"})", R"({"name":"\u00e9"})", R"({"note":null})",
                           R"({"note":"ab"})", R"({"note":""})", R"({"any":""})"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*sized, text)) << text;
  }
  for (const char* text : {R"({"code":"abcd)", R"({"note":"abc)", R"({"code":"\ud83d)",
                           R"({"code":"\uDE)", R"({"code":"ab\u0041\u)"}) {
    EXPECT_FALSE(testing::GrammarTakes(*sized, text)) << text;
  }
  for (const char* text : {R"({"code":"a"})", R"({"code":""})", R"({"name":""})"}) {
    EXPECT_FALSE(testing::GrammarCompletes(*sized, text)) << text;
  }
  EXPECT_TRUE(testing::GrammarTakes(
      *sized, R"({"code":"\ud7ff)"));  // the last code point before surrogates
}

// Strings held to a pattern (spec/pattern_dfa.h: matched anywhere unless anchored) over their
// value's bytes, escapes decoded; its length joins its automaton.
TEST(JsonSchemaTest, StringsMatchingTheirPattern) {
  const auto patterned = Compiled(R"({"type": "object", "properties": {
      "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
      "has": {"pattern": "ab"},
      "word": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4},
      "quoted": {"type": "string", "pattern": "^\"[a-z]\"\n?$"},
      "email": {"type": ["string", "null"],
                "pattern": "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$"}}})");
  for (const char* text :
       {R"({"code":"ABC-12"})", R"({"has":"ab"})", R"({"has":"xxabyy"})", R"({"word":"ab"})",
        R"({"word":"abcd"})", R"({"quoted":"\"q\""})", R"({"quoted":"\"q\"\n"})",
        R"({"email":"ann.lee@example.org"})", R"({"email":null})", R"({"code":"ABC\u002d12"})"}) {
    const bool unicode_escape = std::string_view(text).find("\\u") != std::string_view::npos;
    EXPECT_EQ(testing::GrammarCompletes(*patterned, text), !unicode_escape)
        << text;  // no \u in a pattern's string
  }
  for (const char* text :
       {R"({"code":"AB1)", R"({"code":"ABC-123)", R"({"word":"abcde)", R"({"word":"A)",
        R"({"quoted":"q)", R"({"quoted":"\"q\"x)", R"({"email":"ann@@)", R"({"code":"\t)"}) {
    EXPECT_FALSE(testing::GrammarTakes(*patterned, text)) << text;
  }
  for (const char* text : {R"({"code":"ABC-1"})", R"({"has":"a"})", R"({"word":"a"})",
                           R"({"email":"ann@example.c"})"}) {
    EXPECT_FALSE(testing::GrammarCompletes(*patterned, text)) << text;
  }
}

// The formats OpenAI's structured outputs hold, held as patterns; others stay annotations.
TEST(JsonSchemaTest, FormatsHeldAsPatterns) {
  const auto formatted = Compiled(R"({"type": "object", "properties": {
      "d": {"type": "string", "format": "date"}, "t": {"type": "string", "format": "time"},
      "dt": {"type": "string", "format": "date-time"}, "u": {"type": "string", "format": "uuid"},
      "e": {"type": "string", "format": "email"}, "ip": {"type": "string", "format": "ipv4"},
      "uri": {"type": "string", "format": "uri"}}})");
  for (const char* text :
       {R"({"d":"2024-02-29"})", R"({"d":"2000-02-29"})", R"({"d":"1999-12-31"})",
        R"({"t":"23:59:60Z"})", R"({"t":"00:00:00.125-08:30"})",
        R"({"dt":"2024-01-31T10:20:30.5+02:00"})",
        R"({"u":"123e4567-E89B-12d3-a456-426614174000"})",
        R"({"e":"first.last+tag@mail.example.org"})", R"({"ip":"192.168.0.1"})",
        R"({"ip":"0.0.0.0"})", R"({"uri":"not checked"})"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*formatted, text)) << text;
  }
  for (const char* text :
       {R"({"d":"2023-02-29)", R"({"d":"1900-02-29)", R"({"d":"2024-13)", R"({"d":"2024-04-31)",
        R"({"t":"24)", R"({"t":"12:60)", R"({"dt":"2024-01-31 )", R"({"u":"123g)", R"({"e":"a..)",
        R"({"e":".a)", R"({"e":"a@-)", R"({"ip":"256)", R"({"ip":"01)", R"({"ip":"1.2.3.4.)"}) {
    EXPECT_FALSE(testing::GrammarTakes(*formatted, text)) << text;
  }
  for (const char* text : {R"({"t":"12:00:00"})", R"({"e":"a@localhost"})", R"({"ip":"1.2.3"})"}) {
    EXPECT_FALSE(testing::GrammarCompletes(*formatted, text)) << text;
  }
}

// Not JSON: the output's whole text held to a pattern (structured_outputs regex and choice),
// straight after the reasoning where there is one.
TEST(JsonSchemaTest, AWholeTextHeldToAPattern) {
  const auto apples = *JsonSchema::Pattern(R"(\d+ apples?)", "R");
  for (const char* text : {"1 apple", "12 apples"})
    EXPECT_TRUE(testing::GrammarCompletes(*apples, text)) << text;
  for (const char* text : {"", "1", "1 apple "})
    EXPECT_FALSE(testing::GrammarCompletes(*apples, text)) << text;
  for (const char* text : {" ", "x", "1 apples!"})
    EXPECT_FALSE(testing::GrammarTakes(*apples, text)) << text;
  EXPECT_TRUE(testing::GrammarCompletes(*apples, "3 apple") &&
              testing::GrammarTakes(*apples, "3 apples"));  // may end, or go on
  const auto choice =
      *JsonSchema::Pattern(JsonSchema::ChoicesPattern({"yes", "no", "a.b (c)", "no way"}), "C");
  for (const char* text : {"yes", "no", "a.b (c)", "no way"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*choice, text)) << text;
  }
  for (const char* text : {"ye", "no w", "aXb (c)", "yes "}) {
    EXPECT_FALSE(testing::GrammarCompletes(*choice, text)) << text;
  }
  JsonGrammar reasoning = JsonGrammar::Start(*choice, "</think>");
  EXPECT_TRUE(reasoning.Feed("<think>\nyes or no?\n</think>no"));
  EXPECT_TRUE(reasoning.complete());
  JsonGrammar spaced = JsonGrammar::Start(*choice, "</think>");
  EXPECT_FALSE(spaced.Feed("</think> no"));  // the pattern's text is all that follows the marker
  EXPECT_EQ(JsonSchema::Pattern(R"(\d+)", "R").value().get(),
            JsonSchema::Pattern(R"(\d+)", "R").value().get());
  EXPECT_EQ(JsonSchema::Pattern("(?<=a)b", "structured_outputs.regex").status().message(),
            "structured_outputs.regex: lookbehind assertions are not supported");
}

// An array of an enum's values, each at most once (Pydantic's set of a Literal or an Enum).
TEST(JsonSchemaTest, UniqueItemsOfAnEnum) {
  const auto set = Compiled(R"({"type": "array", "items": {"enum": ["a", "b", 1, 12]},
      "uniqueItems": true, "minItems": 1})");
  for (const char* text :
       {R"(["a"])", R"(["a", "b"])", "[1, 12]", "[12, 1]", R"(["b", 1, "a", 12])"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*set, text)) << text;
  }
  for (const char* text : {R"(["a", "a)", "[12, 12", R"(["b", 1, "a", 12, )"}) {
    EXPECT_FALSE(testing::GrammarTakes(*set, text)) << text;
  }
  EXPECT_TRUE(testing::GrammarTakes(*set, "[1, 1"));  // 12 may follow
  EXPECT_FALSE(testing::GrammarTakes(*set, "[1, 1]"));
  EXPECT_FALSE(testing::GrammarCompletes(*set, "[]"));
  EXPECT_NE(Refusal(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})")
                .find("S.uniqueItems: is supported on an array whose items are an enum"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": true,
                        "minItems": 3})")
                .find("S.minItems: is above the number of distinct items"),
            std::string::npos);
  EXPECT_TRUE(
      testing::GrammarCompletes(*Compiled(R"({"type": "array", "uniqueItems": false})"), "[1, 1]"));
}

// Numbers held to their bounds exactly in decimal, digit by digit on both sides of the point,
// without an exponent.
TEST(JsonSchemaTest, NumbersWithinTheirBounds) {
  const auto bounded = Compiled(R"({"type": "object", "properties": {
      "p": {"type": "number", "minimum": 0, "maximum": 1},
      "t": {"type": "number", "exclusiveMinimum": -2.5, "exclusiveMaximum": 0.125},
      "x": {"type": ["number", "null"], "minimum": 0.1},
      "i": {"type": ["integer", "number"], "maximum": 3.5},
      "tiny": {"exclusiveMinimum": 1e-20, "maximum": 1}}})");
  for (const char* text :
       {R"({"p":0})", R"({"p":1})", R"({"p":0.5})", R"({"p":1.000})", R"({"p":-0.0})",
        R"({"p":0.999999999999999999})", R"({"t":-2.4})", R"({"t":-2.499999})", R"({"t":0.124999})",
        R"({"x":null})", R"({"x":0.1})", R"({"x":12345})", R"({"i":3.5})", R"({"i":-7})",
        R"({"tiny":0.000000000000000001})"}) {
    EXPECT_TRUE(testing::GrammarCompletes(*bounded, text)) << text;
  }
  for (const char* text :
       {R"({"p":2)", R"({"p":1.1)", R"({"p":1.0001)", R"({"p":-0.1)", R"({"p":0e)", R"({"p":1E)",
        R"({"p":0.1234567890123456789)", R"({"t":-2.5)", R"({"t":-3)", R"({"t":0.125)",
        R"({"t":0.2)", R"({"x":0.0)", R"({"x":-)", R"({"i":3.6)", R"({"i":4)",
        R"({"tiny":0.000000000000000000)"}) {
    EXPECT_FALSE(testing::GrammarTakes(*bounded, text)) << text;
  }
  EXPECT_TRUE(testing::GrammarTakes(*bounded, R"({"t":-2.4)"));
  EXPECT_FALSE(testing::GrammarCompletes(*bounded, R"({"t":-2.5})"));
  EXPECT_TRUE(testing::GrammarTakes(*bounded, R"({"x":0.)"));
  EXPECT_FALSE(testing::GrammarCompletes(*bounded, R"({"tiny":0})"));
}

TEST(JsonSchemaTest, WhatCannotBeHeldIsRefusedNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"j({"properties": {"a": {"pattern": "(?=x)"}}})j", "S.properties.a.pattern: lookahead"},
      {R"({"properties": {"a": {"pattern": "(a"}}})", "S.properties.a.pattern: "},
      {R"({"properties": {"a": {"pattern": 3}}})",
       "S.properties.a.pattern: expected a regular expression"},
      {R"({"properties": {"a": {"pattern": "^[ab]$", "minLength": 2}}})",
       "S.properties.a.pattern: the pattern admits no string that can be written"},
      {R"({"properties": {"a": {"type": "integer", "pattern": "x"}}})",
       "S.properties.a.pattern: is supported on a schema whose types include string"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}})",
       "S.properties.a.maxLength: expected an integer from 0 to 1000000"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "minLength": 3,
          "maxLength": 2}}})",
       "S.properties.a.minLength: is above maxLength"},
      {R"({"type": "object", "properties": {"a": {"enum": ["x"], "maxLength": 2}}})",
       "S.properties.a.maxLength: is supported on a schema whose types include string"},
      {R"({"type": "object", "properties": {"a": {"type": "integer", "minLength": 2}}})",
       "S.properties.a.minLength: is supported on a schema whose types include string"},
      {R"({"type": "object", "properties": {"a": {"anyOf": [{"type": "string",
          "maxLength": 2}, {"type": "string", "minLength": 4}]}}})",
       "S.properties.a.anyOf: alternatives that begin with the same byte"},
      {R"({"type": "object", "properties": {"n": {"type": "string", "minimum": 1}}})",
       "S.properties.n.minimum: is supported on a schema whose types include integer or number"},
      {R"({"type": "object", "properties": {"n": {"enum": [1, 2], "maximum": 1}}})",
       "S.properties.n.maximum: is supported on a schema whose types include integer or number "
       "(without enum)"},
      {R"({"type": "object", "properties": {"n": {"type": "number", "minimum": 2,
          "exclusiveMaximum": 2}}})",
       "S.properties.n: its bounds admit no number"},
      {R"({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}})",
       "S.properties.n.multipleOf: is not supported"},
      {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3,
          "exclusiveMaximum": 3}}})",
       "S.properties.n: its bounds admit no integer"},
      {R"({"type": "object", "properties": {"n": {"type": "integer", "maximum": 1e16}}})",
       "S.properties.n.maximum: expected a number of at most 10^15"},
      {R"({"type": "string"})", "S: the top-level value must be an object or an array"},
      {"false", "S: false admits no value"},
      {R"({"type": "widget"})", "S.type: expected object, array"},
      {R"({"type": "object", "required": ["a"]})", "S.required: names \"a\", which properties"},
      {R"({"$ref": "#/$defs/Missing"})", "S.$ref: #/$defs/Missing names nothing"},
      {R"({"$ref": "https://example.com/s.json"})", "S.$ref: expected a reference into this"},
      {R"({"$ref": "#", "type": "object"})", "S.type: is not supported beside $ref"},
      {R"({"anyOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]})",
       "S.anyOf: alternatives that begin with the same byte are not supported"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "S.minItems: is above maxItems"},
      {R"({"type": "array", "maxItems": -1})", "S.maxItems: expected an integer"},
      {R"({"type": "array", "items": [{"type": "string"}]})", "S.items: a list of item schemas"},
      {R"({"type": "array", "prefixItems": {"type": "string"}})", "S.prefixItems: expected a list"},
      {R"({"allOf": [{"type": "object"}, {"type": "object"}]})", "S.allOf: only a list of one"},
      {R"({"type": "object", "properties": {"n": {"oneOf": [{"type": "integer"},
          {"type": "number"}]}}})",
       "S.properties.n.oneOf: alternatives that admit the same value are not supported in oneOf"},
      {R"({"type": "object", "properties": {"a": {"enum": []}}})", "S.properties.a.enum: expected"},
      {R"({"type": "object", "properties": {"a": {"type": "string", "enum": [1]}}})",
       "S.properties.a.enum: no value has the schema's type"},
      {R"({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
          "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}})",
       "references that only refer to each other admit no value"},
      {R"({"$defs": {"U": {"anyOf": [{"$ref": "#/$defs/U"}, {"type": "null"}]}},
          "type": "object", "properties": {"a": {"$ref": "#/$defs/U"}}})",
       "a union that contains itself admits no value"},
  };
  for (const auto& [schema, refusal] : cases) {
    EXPECT_NE(Refusal(schema).find(refusal), std::string::npos)
        << schema << "\n  gave: " << Refusal(schema);
  }
  nlohmann::json many = {{"type", "object"},
                         {"properties", {{"e", {{"enum", nlohmann::json::array()}}}}}};
  for (int i = 0; i < kMaxSchemaChoices + 1; ++i) many["properties"]["e"]["enum"].push_back(i);
  EXPECT_NE(Refusal(many.dump()).find("S.properties.e.enum: more than 64 values"),
            std::string::npos);
}

TEST(JsonSchemaTest, WhatAdmitsAnyValue) {
  for (const char* any : {"true", "{}", R"({"title": "T", "description": "d", "x-y": 1})"}) {
    EXPECT_TRUE(JsonSchema::AdmitsAnyValue(Ordered::parse(any))) << any;
  }
  for (const char* some :
       {"false", R"({"type": "object"})", R"({"properties": {}})", R"({"anyOf": [{}]})",
        R"({"minimum": 1})", R"({"pattern": "x"})", R"({"maxLength": 3})"}) {
    EXPECT_FALSE(JsonSchema::AdmitsAnyValue(Ordered::parse(some))) << some;
  }
}

TEST(JsonSchemaTest, TheSameTextSharesOneCompiledSchema) {
  const auto a = Compiled(kPerson);
  const auto b = Compiled(kPerson);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a->id(), JsonSchema::AnyObject()->id());
  EXPECT_NE(a->id(), Compiled(R"({"type": "array"})")->id());
}

// Random walks of the grammar, each byte drawn from those it allows (closers, quotes and commas
// favoured, so that walks end; an exponent only where nothing else may come, as a parser refuses
// numbers past a double's range): every state short of complete allows some byte, and every
// finished text parses and validates.
TEST(JsonSchemaTest, EveryTextTheGrammarFinishesValidates) {
  const std::vector<std::string> schemas = {
      kPerson,
      kCalls,
      kPets,
      R"({"type": "array", "items": {"type": "object", "properties": {
           "k": {"enum": ["x", "xy", 1, 10, true, null, {"a": [1]}]},
           "v": {"type": ["number", "string", "array"], "items": {"type": "boolean"}, "maxItems": 3},
           "m": {"additionalProperties": {"type": "integer"}}}, "required": ["v"]}, "minItems": 1})",
      R"({"$defs": {"Tree": {"type": "object", "properties": {"label": {"type": "string"},
           "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}, "maxItems": 2}},
           "required": ["label"]}}, "$ref": "#/$defs/Tree"})",
      R"({"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}})",
      R"({"type": "array", "items": {"type": "integer", "minimum": -20, "exclusiveMaximum": 7}})",
      R"({"type": "array", "prefixItems": [{"type": "boolean"}, {"enum": ["a", 2]}],
          "items": {"type": "null"}, "minItems": 1, "maxItems": 4})",
      R"({"type": "array", "items": {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 4},
          {"type": "null"}]}, "maxItems": 5})",
      R"({"properties": {"a": {"type": "string", "minLength": 7}, "b": {"maxLength": 1}},
          "required": ["a", "b"]})",
      R"({"type": "array", "items": {"type": "number", "exclusiveMinimum": -1.5,
          "maximum": 20.25}, "minItems": 2})",
      R"({"type": "object", "properties": {"code": {"pattern": "^[A-Z]{2,3}-\\d+$"},
          "has": {"pattern": "a|b"}, "words": {"pattern": "^(\\w+\\s?){1,3}$", "maxLength": 9},
          "odd": {"pattern": "^[a\"\\\\/]{1,3}\n?$"}}, "required": ["code", "has"]})",
      R"({"type": "array", "items": {"type": "string", "format": "date-time"}, "maxItems": 2})",
      R"({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true,
          "items": {"enum": ["x", "xy", 1, 10, 100, null]}}}, "required": ["tags"]})",
      R"({"type": "object", "properties": {"e": {"format": "email", "type": "string"},
          "ip": {"type": "string", "format": "ipv4"}, "u": {"type": "string", "format": "uuid"}},
          "required": ["e", "ip", "u"]})",
      "{}",
  };
  std::mt19937 rng(17);
  for (const std::string& text_of_schema : schemas) {
    SCOPED_TRACE(text_of_schema);
    const auto schema = Compiled(text_of_schema);
    const nlohmann::json reference = nlohmann::json::parse(text_of_schema);
    int finished = 0;
    for (int walk = 0; walk < 300; ++walk) {
      JsonGrammar g(*schema);
      std::string text;
      while (!g.complete() && text.size() < 400) {
        std::vector<std::pair<uint8_t, int>> allowed;  // byte, weight
        int total = 0;
        for (int b = 1; b < 128; ++b) {  // ASCII: the parser reads UTF-8 only
          JsonGrammar next = g;
          if (!next.Feed(static_cast<uint8_t>(b))) continue;
          const int weight = b == '}' || b == ']'   ? 40
                             : b == '"' || b == ',' ? 10
                             : b == ' '             ? 1
                                                    : 2;
          allowed.emplace_back(static_cast<uint8_t>(b), weight);
          total += weight;
        }
        ASSERT_FALSE(allowed.empty()) << "a dead end after " << text;
        if (!g.in_string() && allowed.size() > 1) {
          std::erase_if(allowed, [&](const auto& a) {
            const bool exponent = a.first == 'e' || a.first == 'E';
            if (exponent) total -= a.second;
            return exponent;
          });
        }
        int pick = static_cast<int>(rng() % total);
        size_t i = 0;
        while (pick >= allowed[i].second) pick -= allowed[i++].second;
        text += static_cast<char>(allowed[i].first);
        ASSERT_TRUE(g.Feed(allowed[i].first));
      }
      if (!g.complete()) continue;
      ++finished;
      const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << text;
      ASSERT_TRUE(testing::SchemaAdmits(value, reference)) << text;
    }
    EXPECT_GT(finished, 100);
  }
}

// Masks over a schema: every token whose text continues, as for any object.
TEST(JsonSchemaTest, AMaskIsEveryTokenWhoseTextContinues) {
  const std::vector<std::string> vocab = {"",    "{",   "}",   "\"",    "\"name", "\":",  "\": \"",
                                          "A\"", ",",   " ",   "\"age", "3",      "12",   "}}",
                                          "\"t", "ags", "[\"", "a\"",   "cd\"]",  "null", "nu"};
  JsonTokenMasks masks(static_cast<int64_t>(vocab.size()),
                       [&](int32_t id) { return std::string_view(vocab[id]); });
  const auto person = Compiled(kPerson);
  for (const std::vector<int32_t>& output : std::vector<std::vector<int32_t>>{
           {}, {1}, {1, 4}, {1, 4, 6, 7, 8}, {1, 4, 6, 7, 8, 10, 5, 11}}) {
    const JsonGrammar state = masks.StateAfter(JsonGrammar(*person), output);
    ASSERT_FALSE(state.dead());
    const std::span<const uint64_t> allowed = masks.Allowed(state);
    for (size_t t = 0; t < vocab.size(); ++t) {
      JsonGrammar alone = state;
      const bool continues = !vocab[t].empty() && alone.Feed(vocab[t]);
      EXPECT_EQ(((allowed[0] >> t) & 1) != 0, continues) << vocab[t];
    }
  }
}

// A held string's masks: plain text by its count of characters, the rest walked; a pattern's
// string walked whole.
TEST(JsonSchemaTest, AHeldStringsMaskCountsCharacters) {
  const std::vector<std::string> vocab = {"",      "{",   "\"s\":\"", "a",    "bc",    "def",
                                          "\"",    "g\"", "\xc3\xa9", "\xc3", "\xa9h", "\\n",
                                          "\\u00", "e9",  "\"}",      "}",    "ij\"}", "\xa9"};
  JsonTokenMasks masks(static_cast<int64_t>(vocab.size()),
                       [&](int32_t id) { return std::string_view(vocab[id]); });
  for (const char* schema : {
           R"({"type": "object", "properties": {"s": {"type": "string", "minLength": 2,
               "maxLength": 4}}})",
           R"({"type": "object", "properties": {"s": {"type": "string",
               "pattern": "^[a-f]*(g|\u00e9h|\n)?$"}}})"}) {
    SCOPED_TRACE(schema);
    const auto held = Compiled(schema);
    for (const std::vector<int32_t>& output : std::vector<std::vector<int32_t>>{
             {1, 2}, {1, 2, 3}, {1, 2, 4}, {1, 2, 5}, {1, 2, 9}, {1, 2, 3, 9, 10}, {1, 2, 11}}) {
      const JsonGrammar state = masks.StateAfter(JsonGrammar(*held), output);
      ASSERT_FALSE(state.dead());
      const std::span<const uint64_t> allowed = masks.Allowed(state);
      for (size_t t = 0; t < vocab.size(); ++t) {
        JsonGrammar alone = state;
        const bool continues = !vocab[t].empty() && alone.Feed(vocab[t]);
        EXPECT_EQ(((allowed[0] >> t) & 1) != 0, continues)
            << vocab[t] << " after " << output.size();
      }
    }
  }
}

}  // namespace
}  // namespace dscale
