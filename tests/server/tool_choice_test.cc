// The schemas tool_choice holds an answer to (server/tool_choice.h): under "auto", strict tools'
// calls held in each chat format's own syntax.

#include "server/tool_choice.h"

#include <gtest/gtest.h>

#include "spec/json_grammar.h"
#include "support/json_grammar_feed.h"

namespace dscale::server {
namespace {

using Ordered = nlohmann::ordered_json;

// get_weather strict (a city required), now not strict.
const Ordered kTools = Ordered::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
    "properties": {"zone": {"type": "string"}}}}}])");

TEST(ToolChoiceTest, StrictToolsCallsHeldInQwen3sSyntax) {
  std::shared_ptr<const JsonSchema> schema;
  ASSERT_FALSE(HeldCallsSchema(kTools, ChatFormat::kQwen3, &schema));
  ASSERT_NE(schema, nullptr);
  EXPECT_EQ(schema->call_syntax().open, "<tool_call>");
  EXPECT_EQ(schema->call_syntax().close, "</tool_call>");
  for (const char* text : {
           "It is sunny.",
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
           "</tool_call>",
           // A tool that is not strict takes any object.
           "Let me see.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\": [1]}}\n"
           "</tool_call>",
       }) {
    EXPECT_TRUE(dscale::testing::GrammarCompletes(*schema, text)) << text;
  }
  for (const char* text : {
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}",
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Oslo\"}}",
           "<tool_call>\n{\"name\": \"weather\"",
       }) {
    JsonGrammar g(*schema);
    EXPECT_FALSE(g.Feed(text)) << text;
  }
}

TEST(ToolChoiceTest, Llama3sWholeAnswerCall) {
  std::shared_ptr<const JsonSchema> schema;
  ASSERT_FALSE(HeldCallsSchema(kTools, ChatFormat::kLlama3, &schema));
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(schema->call_syntax().whole_answer);
  EXPECT_TRUE(dscale::testing::GrammarCompletes(
      *schema, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_TRUE(dscale::testing::GrammarCompletes(*schema, "It is sunny."));
  JsonGrammar g(*schema);
  EXPECT_FALSE(g.Feed(R"({"name": "get_weather", "parameters": {}})"));
}

// Qwen3.5's XML parameters: a strict tool's arguments held, a tool that is not strict any text;
// a strict parameter the format's parser could not read back as its schema says is refused.
TEST(ToolChoiceTest, Qwen3_5sXmlParameters) {
  std::shared_ptr<const JsonSchema> schema;
  {
    auto e = HeldCallsSchema(kTools, ChatFormat::kQwen3_5, &schema);
    ASSERT_FALSE(e) << e->param << ": " << e->message;
  }
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(schema->call_syntax().xml_parameters);
  for (const char* text : {
           "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo <b>\n"
           "</parameter>\n</function>\n</tool_call>",
           "<tool_call>\n<function=now>\n<parameter=zone>\nutc\n</parameter>\n</function>\n"
           "</tool_call> and <tool_call><function=now>anything</tool_call>",
       }) {
    EXPECT_TRUE(dscale::testing::GrammarCompletes(*schema, text)) << text;
  }
  for (const char* text : {
           "<tool_call>\n<function=get_weather>\n</function>",  // city is required
           "<tool_call>\n<function=get_weather>\n<parameter=town>",
           "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo</function>",
           "<tool_call>\n<function=weather>",
       }) {
    JsonGrammar g(*schema);
    EXPECT_FALSE(g.Feed(text)) << text;
  }
  for (const auto& [property, param] : std::vector<std::pair<Ordered, std::string>>{
           {Ordered::parse(R"({"type": ["string", "integer"]})"),
            "tools[0].function.parameters.properties.city"},
           {Ordered::parse(R"({"type": ["string", "null"], "pattern": "^a"})"),
            "tools[0].function.parameters.properties.city"},
           {Ordered::parse(R"({"enum": ["a", "b"]})"),
            "tools[0].function.parameters.properties.city"},
           {Ordered::parse(R"({"type": "string", "maxLength": 3})"),
            "tools[0].function.parameters.properties.city"}}) {
    Ordered tools = kTools;
    tools[0]["function"]["parameters"]["properties"]["city"] = property;
    const std::optional<ApiError> e = HeldCallsSchema(tools, ChatFormat::kQwen3_5, &schema);
    ASSERT_TRUE(e) << property.dump();
    EXPECT_EQ(e->param, param) << e->message;
  }
  // OpenAI's strict form of an optional parameter, [T, "null"]: "null" is null.
  Ordered optional = kTools;
  optional[0]["function"]["parameters"]["properties"]["city"] = {{"type", {"string", "null"}}};
  ASSERT_FALSE(HeldCallsSchema(optional, ChatFormat::kQwen3_5, &schema));
  EXPECT_TRUE(dscale::testing::GrammarCompletes(
      *schema,
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nnull\n</parameter>\n"
      "</function>\n</tool_call>"));
}

// parallel_tool_calls false: one call at most, held ("auto" with a strict tool) or forced.
TEST(ToolChoiceTest, OneCallWithoutParallelToolCalls) {
  std::shared_ptr<const JsonSchema> schema;
  ASSERT_FALSE(HeldCallsSchema(kTools, ChatFormat::kQwen3, &schema, {.parallel = false}));
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(schema->call_syntax().one_call);
  const std::string call = R"({"name": "now", "parameters": {}})";
  for (const bool parallel : {true, false}) {
    ASSERT_FALSE(ForcedCallSchema(kTools, ToolChoice::kRequired, "", parallel, &schema));
    EXPECT_TRUE(dscale::testing::GrammarCompletes(*schema, "[" + call + "]"));
    EXPECT_EQ(dscale::testing::GrammarCompletes(*schema, "[" + call + ", " + call + "]"), parallel);
  }
}

// --hold-tool-calls all: every tool's calls held, a tool that is not strict to its parameters
// where they can be held (else any object); none: nothing, strict tools or not.
TEST(ToolChoiceTest, HoldingEveryToolsCallsOrNone) {
  Ordered tools = kTools;
  tools[0]["function"]["strict"] = false;
  std::shared_ptr<const JsonSchema> schema;
  ASSERT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3, &schema, {.tools = HeldTools::kAll}));
  ASSERT_NE(schema, nullptr);
  EXPECT_FALSE(dscale::testing::GrammarTakes(
      *schema, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}"));
  EXPECT_FALSE(dscale::testing::GrammarTakes(
      *schema, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"zone\": 1"));
  // Parameters the grammar cannot hold: any object, not a refusal.
  tools[1]["function"]["parameters"]["properties"]["zone"]["multipleOf"] = 2;
  ASSERT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3, &schema, {.tools = HeldTools::kAll}));
  EXPECT_TRUE(dscale::testing::GrammarCompletes(
      *schema, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"zone\": 1}}\n</tool_call>"));
  // Qwen3.5: a parameter its parser cannot read back as held: any text.
  ASSERT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3_5, &schema, {.tools = HeldTools::kAll}));
  EXPECT_TRUE(
      dscale::testing::GrammarCompletes(*schema, "<tool_call><function=now>anything</tool_call>"));
  ASSERT_FALSE(HeldCallsSchema(kTools, ChatFormat::kQwen3, &schema, {.tools = HeldTools::kNone}));
  EXPECT_EQ(schema, nullptr);
}

TEST(ToolChoiceTest, NothingHeldWithoutAStrictToolOrPastSixtyFourTools) {
  Ordered tools = kTools;
  tools[0]["function"]["strict"] = false;
  std::shared_ptr<const JsonSchema> schema = JsonSchema::AnyObject();
  ASSERT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3, &schema));
  EXPECT_EQ(schema, nullptr);
  tools = kTools;
  while (tools.size() < 64) {
    tools.push_back(kTools[1]);
    tools.back()["function"]["name"] = "tool_" + std::to_string(tools.size());
  }
  ASSERT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3, &schema));
  EXPECT_NE(schema, nullptr);
  tools.push_back(kTools[1]);
  tools.back()["function"]["name"] = "one_more";
  ASSERT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3, &schema));
  EXPECT_EQ(schema, nullptr);
}

TEST(ToolChoiceTest, AStrictToolsParametersRefusedNamingThem) {
  Ordered tools = kTools;
  tools[0]["function"]["parameters"]["properties"]["city"]["multipleOf"] = 2;
  std::shared_ptr<const JsonSchema> schema;
  std::optional<ApiError> e = HeldCallsSchema(tools, ChatFormat::kQwen3, &schema);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[0].function.parameters.properties.city.multipleOf") << e->message;
  // Not strict: never compiled, so never refused.
  tools[0]["function"]["strict"] = false;
  tools[1]["function"]["strict"] = true;
  EXPECT_FALSE(HeldCallsSchema(tools, ChatFormat::kQwen3, &schema));
  tools[1]["function"]["name"] = "get_weather";
  e = HeldCallsSchema(tools, ChatFormat::kQwen3, &schema);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools[1].function.name");
}

}  // namespace
}  // namespace dscale::server
