// Calls held in free text (JsonSchema::Calls): what the grammar admits in Qwen3's syntax (calls
// between markers anywhere) and Llama 3.1's (the whole answer one call), after a reasoning block,
// random walks whose every call validates against the call's schema, and the token masks against
// feeding each token's text alone.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "io/tokenizer/tool_call_format.h"
#include "spec/json_grammar.h"
#include "spec/json_schema.h"
#include "spec/json_token_mask.h"
#include "support/json_grammar_feed.h"
#include "support/json_schema_check.h"

namespace dscale {
namespace json_calls_test {

using Ordered = nlohmann::ordered_json;

// Two tools as a request's call union: {"name", <arguments key>} told apart by the name.
std::string CallSchema(const std::string& arguments) {
  return R"({"anyOf": [
    {"type": "object", "properties": {"name": {"const": "get_weather"}, ")" +
         arguments +
         R"(": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
           "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}, "required": ["name", ")" +
         arguments + R"("]},
    {"type": "object", "properties": {"name": {"const": "search"}, ")" +
         arguments +
         R"(": {"type": "object", "properties": {"query": {"type": "string"},
           "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
           "required": ["query", "limit"]}}, "required": ["name", ")" +
         arguments + R"("]}]})";
}

const CallSyntax kQwen3 = {.open = "<tool_call>", .close = "</tool_call>"};
const CallSyntax kLlama3 = {.open = R"({"name")", .close = "", .whole_answer = true};

std::shared_ptr<const JsonSchema> Calls(const CallSyntax& syntax, const std::string& arguments) {
  Result<std::shared_ptr<const JsonSchema>> s =
      JsonSchema::Calls(Ordered::parse(CallSchema(arguments)), syntax, "tools");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

constexpr const char* kWeather =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
constexpr const char* kSearch =
    "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\", \"limit\": 3}}\n"
    "</tool_call>";

TEST(JsonCallsTest, QwenCallsBetweenMarkersInFreeText) {
  const auto calls = Calls(kQwen3, "arguments");
  const std::string weather = kWeather;
  for (const std::string& text :
       {std::string(), std::string("Hello! {\"name\": 1} </tool_call> <tool_ca"), weather,
        "I'll look.\n\n" + weather + "\n" + std::string(kSearch) + "\nDone.",
        std::string("<<tool_call>{\"name\":\"search\",\"arguments\":{\"query\":\"\",\"limit\":10}}"
                    "</tool_call>")}) {
    EXPECT_TRUE(testing::GrammarCompletes(*calls, text)) << text;
  }
  // Open calls: alive, not complete.
  for (const std::string& text :
       {std::string("<tool_call>"), weather.substr(0, 40), weather.substr(0, weather.size() - 1)}) {
    EXPECT_TRUE(testing::GrammarTakes(*calls, text)) << text;
    EXPECT_FALSE(testing::GrammarCompletes(*calls, text)) << text;
  }
  for (const char* text : {
           "<tool_call>hello",                    // not JSON
           "<tool_call>{\"name\": \"get_time\"",  // no such tool
           "<tool_call>{\"arguments\": {}",       // the name first
           "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}",  // limit
           "<tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\", \"limit\": 11",
           "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}} x",
           "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool>",
       }) {
    EXPECT_FALSE(testing::GrammarTakes(*calls, text)) << text;
  }
}

// parallel_tool_calls false: after one call the free text may not open another.
TEST(JsonCallsTest, OneCallAtMost) {
  CallSyntax one = kQwen3;
  one.one_call = true;
  const auto calls = Calls(one, "arguments");
  const std::string weather = kWeather;
  EXPECT_TRUE(testing::GrammarCompletes(*calls, "Sure. " + weather + "\nDone, <tool_ca"));
  EXPECT_FALSE(testing::GrammarTakes(*calls, weather + "\n" + kSearch));
  EXPECT_TRUE(testing::GrammarTakes(*Calls(kQwen3, "arguments"), weather + "\n" + kSearch));
  CallSyntax xml = {
      .open = "<tool_call>", .close = "</tool_call>", .xml_parameters = true, .one_call = true};
  const auto xml_calls = JsonSchema::Calls(Ordered::parse(R"({"type": "object", "properties": {
      "name": {"const": "now"}, "arguments": {"type": "object"}}, "required": ["name",
      "arguments"]})"),
                                           xml, "tools")
                             .value();
  const std::string now = "<tool_call><function=now>any</tool_call>";
  EXPECT_TRUE(testing::GrammarCompletes(*xml_calls, now + " done"));
  EXPECT_FALSE(testing::GrammarTakes(*xml_calls, now + now));
}

TEST(JsonCallsTest, LlamaTheWholeAnswerOneCall) {
  const auto calls = Calls(kLlama3, "parameters");
  const std::string call =
      R"({"name": "get_weather", "parameters": {"city": "Oslo", "unit": "c"}})";
  for (const std::string& text : {std::string(), std::string("The weather is fine."), call,
                                  "\n  " + call, std::string(R"({"answer": 42} and more)"),
                                  std::string(R"({"nam)"), std::string(R"(x {"name": 1})")}) {
    EXPECT_TRUE(testing::GrammarCompletes(*calls, text)) << text;
  }
  EXPECT_TRUE(testing::GrammarTakes(*calls, call.substr(0, 20)));
  EXPECT_FALSE(testing::GrammarCompletes(*calls, call.substr(0, 20)));
  for (const std::string& text :
       {call + " ", call + "\n" + call, std::string(R"({"name": "other")"),
        std::string(R"({"name": "search", "parameters": {"limit": 1})")}) {
    EXPECT_FALSE(testing::GrammarTakes(*calls, text)) << text;
  }
}

TEST(JsonCallsTest, AfterReasoning) {
  const auto calls = Calls(kQwen3, "arguments");
  JsonGrammar g = JsonGrammar::Start(*calls, "</think>");
  ASSERT_TRUE(g.Feed("<think>\nA <tool_call> here is only thought"));
  EXPECT_TRUE(g.complete());  // the free text may end anywhere
  ASSERT_TRUE(g.Feed("</think>\n\n"));
  ASSERT_TRUE(g.Feed(kWeather));
  EXPECT_TRUE(g.complete());
  JsonGrammar held = JsonGrammar::Start(*calls, "</think>");
  EXPECT_FALSE(held.Feed("</think><tool_call> here is no call"));
}

// The calls in a finished text, as a chat format's parser cuts them out.
std::vector<std::string> CallsIn(const std::string& text, const CallSyntax& syntax) {
  std::vector<std::string> bodies;
  for (size_t at = text.find(syntax.open); at != std::string::npos;
       at = text.find(syntax.open, at)) {
    const size_t end = text.find(syntax.close, at + syntax.open.size());
    if (end == std::string::npos) break;
    bodies.push_back(text.substr(at + syntax.open.size(), end - at - syntax.open.size()));
    at = end + syntax.close.size();
  }
  return bodies;
}

// A random ASCII byte the grammar takes next (-1: none, a dead end), each of `favoured` (closers
// and quotes, so that values end) one time in `odds` where it may come, and no exponent where
// another byte may come.
int RandomNextByte(const JsonGrammar& g, std::initializer_list<uint8_t> favoured, int odds,
                   std::mt19937& rng) {
  std::vector<uint8_t> allowed;
  for (int b = 1; b < 128; ++b) {
    JsonGrammar next = g;
    if (next.Feed(static_cast<uint8_t>(b))) allowed.push_back(static_cast<uint8_t>(b));
  }
  if (allowed.empty()) return -1;
  if (!g.in_string() && !g.complete() && allowed.size() > 1) {
    std::erase_if(allowed, [](uint8_t b) { return b == 'e' || b == 'E'; });
  }
  uint8_t byte = allowed[rng() % allowed.size()];
  for (const uint8_t c : favoured) {
    if (std::find(allowed.begin(), allowed.end(), c) != allowed.end() &&
        rng() % static_cast<unsigned>(odds) == 0) {
      byte = c;
    }
  }
  return byte;
}

// Random texts: free text, sometimes a marker, calls walked byte by byte among the bytes the
// grammar allows; every call a finished text holds is a value the call's schema admits.
TEST(JsonCallsTest, EveryCallOfAFinishedTextValidates) {
  const auto calls = Calls(kQwen3, "arguments");
  const nlohmann::json reference = nlohmann::json::parse(CallSchema("arguments"));
  std::mt19937 rng(5);
  int checked = 0;
  for (int walk = 0; walk < 300; ++walk) {
    JsonGrammar g(*calls);
    std::string text;
    int opened = 0;
    while (text.size() < 600 && !(g.complete() && opened == 2)) {
      if (g.complete() && rng() % 8 == 0) {  // free text: open a call
        ASSERT_TRUE(g.Feed(kQwen3.open));
        text += kQwen3.open;
        ++opened;
        continue;
      }
      const int byte = RandomNextByte(g, {'}', '"', '<', '/'}, 3, rng);
      ASSERT_GE(byte, 0) << "a dead end after " << text;
      ASSERT_TRUE(g.Feed(static_cast<uint8_t>(byte)));
      text += static_cast<char>(byte);
    }
    if (!g.complete()) continue;
    for (const std::string& body : CallsIn(text, kQwen3)) {
      const nlohmann::json value = nlohmann::json::parse(body, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << body;
      ASSERT_TRUE(testing::SchemaAdmits(value, reference)) << body;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// Qwen3.5's calls (Qwen3-Coder's XML parameters): three tools' definitions, two held (a string,
// an enum, an integer, an object, a boolean; a string, an enum and an integer that may be null),
// the third any arguments.
const char* const kXmlTools[] = {
    R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string",
        "enum": ["c", "f"]}, "note": {"type": ["string", "null"]}, "days": {"type": ["null",
        "integer"]}, "wind": {"type": ["string", "null"], "enum": ["kmh", null]}},
        "required": ["city"]}}})",
    R"({"type": "function", "function": {"name": "search", "parameters": {"type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1,
        "maximum": 10}, "filters": {"type": "object", "properties": {"lang": {"type": "string"}}},
        "exact": {"type": "boolean"}}, "required": ["query", "limit"]}}})",
    R"({"type": "function", "function": {"name": "now"}})"};

std::shared_ptr<const JsonSchema> XmlCalls() {
  Ordered alternatives = Ordered::array();
  for (const char* tool : kXmlTools) {
    const Ordered f = Ordered::parse(tool)["function"];
    alternatives.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"const", f["name"]}}},
           {"arguments",
            f.contains("parameters") ? f["parameters"] : Ordered{{"type", "object"}}}}},
         {"required", {"name", "arguments"}}});
  }
  const CallSyntax syntax = {
      .open = "<tool_call>", .close = "</tool_call>", .xml_parameters = true};
  Result<std::shared_ptr<const JsonSchema>> s =
      JsonSchema::Calls(Ordered{{"anyOf", alternatives}}, syntax, "tools");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

TEST(JsonCallsTest, Qwen3_5sXmlParameters) {
  const auto calls = XmlCalls();
  const std::string weather =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew <York> & co\n</parameter>\n"
      "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>";
  const std::string search =
      "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n<parameter=limit>\n"
      "10\n</parameter>\n<parameter=filters>\n{\"lang\": \"en\"}\n</parameter>\n"
      "<parameter=exact>\ntrue\n</parameter>\n</function>\n</tool_call>";
  // Parameters that may be null: "null" is null, else the text (a string) or the JSON.
  const std::string nulls =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
      "<parameter=note>\nnull\n</parameter>\n<parameter=days>\nnull\n</parameter>\n"
      "<parameter=wind>\nnull\n</parameter>\n</function>\n</tool_call>";
  const std::vector<std::string> tools(std::begin(kXmlTools), std::end(kXmlTools));
  const std::optional<ChatToolCall> read = ParseToolCall(
      ChatFormat::kQwen3_5, nulls.substr(11, nulls.size() - 23), ToolParameterTypes(tools));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(nlohmann::json::parse(read->arguments),
            nlohmann::json::parse(R"({"city": "Oslo", "note": null, "days": null, "wind": null})"));
  for (const std::string& text : {weather, "Sure. " + search + "\nDone.", nulls,
                                  std::string("<tool_call><function=now>{\"a\": "
                                              "1}</tool_call>")}) {
    EXPECT_TRUE(testing::GrammarCompletes(*calls, text)) << text;
  }
  for (const std::string& text : {
           std::string("<tool_call>\n<function=get_weather>\n</function>"),  // city required
           std::string("<tool_call>\n<function=get_weather>\n<parameter=unit>\nc\n</parameter>\n"
                       "<parameter=city>"),  // out of order
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\na</function>"),
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\na<parameter="),
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\na</tool_call>"),
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\na\n</parameter>\n"
                       "<parameter=unit>\nk"),
           std::string("<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n"
                       "<parameter=limit>\n11"),
           std::string("<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n"
                       "<parameter=limit>\n3 </parameter>x"),
           std::string("<tool_call>\n<function=nope>"),
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\na\n</parameter>\n"
                       "<parameter=days>\nx"),
           std::string("<tool_call>\n<function=get_weather>\n<parameter=city>\na\n</parameter>\n"
                       "<parameter=wind>\nmph"),
       }) {
    EXPECT_FALSE(testing::GrammarTakes(*calls, text)) << text;
  }
  for (const std::string& text : {weather.substr(0, 60), search.substr(0, 120)}) {
    EXPECT_TRUE(testing::GrammarTakes(*calls, text)) << text;
    EXPECT_FALSE(testing::GrammarCompletes(*calls, text)) << text;
  }
}

// Random XML calls: every call a finished text holds reads back, through the chat format's own
// parser, as arguments the tool's parameters admit.
TEST(JsonCallsTest, EveryXmlCallReadsBackAsItsParametersAdmit) {
  const auto calls = XmlCalls();
  std::vector<std::string> tools(std::begin(kXmlTools), std::end(kXmlTools));
  const ToolParameterTypes types(tools);
  std::mt19937 rng(11);
  int checked = 0;
  for (int walk = 0; walk < 300; ++walk) {
    JsonGrammar g(*calls);
    std::string text;
    while (text.size() < 800 && !(g.complete() && text.find("</tool_call>") != std::string::npos)) {
      // Now and then a whole tag where one may come, so that texts end.
      bool fed = false;
      for (const char* tag : {"<tool_call>", "\n</parameter>", "</tool_call>"}) {
        JsonGrammar next = g;
        if (rng() % 6 == 0 && next.Feed(tag)) {
          g = next;
          text += tag;
          fed = true;
          break;
        }
      }
      if (fed) continue;
      const int byte = RandomNextByte(g, {'}', '"', '<', '>'}, 4, rng);
      ASSERT_GE(byte, 0) << "a dead end after " << text;
      ASSERT_TRUE(g.Feed(static_cast<uint8_t>(byte)));
      text += static_cast<char>(byte);
    }
    if (!g.complete()) continue;
    for (const std::string& body : CallsIn(text, kQwen3)) {
      if (body.find("<function=now>") != std::string::npos) continue;  // any text: not held
      const std::optional<ChatToolCall> call = ParseToolCall(ChatFormat::kQwen3_5, body, types);
      ASSERT_TRUE(call.has_value()) << body;
      const nlohmann::json arguments = nlohmann::json::parse(call->arguments);
      const size_t tool = call->name == "get_weather" ? 0 : 1;
      const nlohmann::json parameters =
          nlohmann::json::parse(kXmlTools[tool])["function"]["parameters"];
      ASSERT_TRUE(testing::SchemaAdmits(arguments, parameters)) << body;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// The XML form's masks: every token whose text continues, in its tags, a string argument's
// text (a "<" there walked), an enum's, an argument's JSON (a "<" in its strings walked too) and
// a free body.
TEST(JsonCallsTest, AnXmlCallsMaskIsEveryTokenWhoseTextContinues) {
  const std::vector<std::string> vocab = {"",
                                          "<tool_call>",
                                          "\n",
                                          "<function=",
                                          "get_weather>",
                                          "search>",
                                          "now>",
                                          "<",
                                          "parameter=",
                                          "city>",
                                          "query>",
                                          "limit>",
                                          "unit>",
                                          "c",
                                          "f",
                                          "\nc",
                                          "\n</",
                                          "parameter>",
                                          "</parameter>",
                                          "Oslo",
                                          "Oslo<",
                                          "/",
                                          "</function>",
                                          "1",
                                          "10",
                                          "x",
                                          "filters>",
                                          "{\"",
                                          "lang",
                                          "\":\"",
                                          "<b>",
                                          "\"}",
                                          "</tool_call>",
                                          " ",
                                          "exact>",
                                          "true",
                                          "\nt",
                                          "</tool",
                                          "_call>",
                                          "param",
                                          "\n</parameter>\n"};
  JsonTokenMasks masks(static_cast<int64_t>(vocab.size()),
                       [&](int32_t id) { return std::string_view(vocab[id]); });
  const auto calls = XmlCalls();
  const std::vector<int32_t> weather = {1, 2, 3, 4, 2, 7, 8, 9, 2};
  const std::vector<int32_t> search = {1, 3, 5, 7, 8, 10, 25, 40, 7, 8, 11, 2, 24, 2};
  const auto then = [](std::vector<int32_t> ids, std::initializer_list<int32_t> more) {
    ids.insert(ids.end(), more);
    return ids;
  };
  for (const std::vector<int32_t>& output : std::vector<std::vector<int32_t>>{
           {1},
           {1, 3},
           {1, 3, 4},
           weather,
           then(weather, {19}),
           then(weather, {20}),
           then(weather, {19, 7}),
           then(weather, {19, 16}),
           then(weather, {19, 40}),
           then(weather, {19, 40, 7, 8, 12}),
           then(weather, {19, 40, 7, 8, 12, 2}),
           then(weather, {19, 40, 22}),
           search,
           then(search, {7, 21}),
           then(search, {18, 7, 8, 26, 27, 28, 29}),
           then(search, {18, 7, 8, 26, 27, 28, 29, 30}),
           then(search, {18, 7, 8, 26, 27, 28, 29, 7}),
           then(search, {18, 7, 8, 26, 27, 28, 29, 25, 31}),
           {1, 3, 6},
           {1, 3, 6, 25, 7},
       }) {
    const JsonGrammar state = masks.StateAfter(JsonGrammar(*calls), output);
    ASSERT_FALSE(state.dead()) << output.size();
    const std::span<const uint64_t> allowed = masks.Allowed(state);
    for (size_t t = 0; t < vocab.size(); ++t) {
      JsonGrammar alone = state;
      const bool continues = !vocab[t].empty() && alone.Feed(vocab[t]);
      EXPECT_EQ(((allowed[0] >> t) & 1) != 0, continues) << vocab[t] << " after " << output.size();
    }
  }
}

// Masks: every token whose text continues (free text walking only the tokens that hold its
// marker's first byte); a token without text never, a stop id exactly where no call is open.
TEST(JsonCallsTest, AMaskIsEveryTokenWhoseTextContinues) {
  const std::vector<std::string> vocab = {"",
                                          "Hi",
                                          "<",
                                          "tool",
                                          "_call",
                                          ">",
                                          "<tool_call>",
                                          "\n",
                                          "{\"",
                                          "name",
                                          "\": \"",
                                          "search\"",
                                          ", \"",
                                          "arguments\": {",
                                          "\"query",
                                          "\": ",
                                          "\"x\"",
                                          "limit",
                                          "1",
                                          "}}",
                                          "</tool_call>",
                                          "</",
                                          "x",
                                          "<tool_call>\n{",
                                          "}}\n</tool_call>",
                                          " <",
                                          "</think>",
                                          "</th",
                                          "ink>",
                                          "{\"name\"",
                                          "<tool_call>x"};
  JsonTokenMasks masks(static_cast<int64_t>(vocab.size()),
                       [&](int32_t id) { return std::string_view(vocab[id]); });
  const auto calls = Calls(kQwen3, "arguments");
  const auto whole = Calls(kLlama3, "parameters");
  const std::vector<int64_t> stop = {0};
  const std::vector<int32_t> call = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 12, 17, 15, 18};
  const auto then = [&](std::vector<int32_t> ids, std::initializer_list<int32_t> more) {
    ids.insert(ids.end(), more);
    return ids;
  };
  const std::vector<std::pair<JsonGrammar, std::vector<int32_t>>> cases = {
      {JsonGrammar(*calls), {}},
      {JsonGrammar(*calls), {1, 2}},
      {JsonGrammar(*calls), {2, 3, 4}},
      {JsonGrammar(*calls), {6}},
      {JsonGrammar(*calls), {23}},
      {JsonGrammar(*calls), call},
      {JsonGrammar(*calls), then(call, {19})},
      {JsonGrammar(*calls), then(call, {19, 7, 21})},
      {JsonGrammar(*calls), then(call, {19, 20, 25})},
      {JsonGrammar::Start(*calls, "</think>"), {1}},
      {JsonGrammar::Start(*calls, "</think>"), {1, 27}},
      {JsonGrammar::Start(*calls, "</think>"), {1, 26}},
      {JsonGrammar(*whole), {}},
      {JsonGrammar(*whole), {8}},
      {JsonGrammar(*whole), {1}},
      {JsonGrammar(*whole), {7, 29}},
  };
  for (const auto& [start, output] : cases) {
    const JsonGrammar state = masks.StateAfter(start, output);
    ASSERT_FALSE(state.dead()) << output.size();
    const std::span<const uint64_t> allowed = masks.Allowed(state);
    for (size_t t = 0; t < vocab.size(); ++t) {
      JsonGrammar alone = state;
      const bool continues = !vocab[t].empty() && alone.Feed(vocab[t]);
      EXPECT_EQ(((allowed[0] >> t) & 1) != 0, continues) << vocab[t] << " after " << output.size();
    }
    std::vector<float> logits(vocab.size(), 1.0f);
    masks.Mask(state, stop, logits);
    EXPECT_EQ(logits[0] == 1.0f, state.complete()) << output.size();
  }
  // A token without text ends a free text's walk (a draft the row before refused).
  EXPECT_TRUE(masks.Advance(JsonGrammar(*calls), 0).dead());
}

}  // namespace json_calls_test
}  // namespace dscale
