// The schemas tool_choice holds an answer to (server/tool_choice.h): under "auto", strict tools'
// calls held in each chat format's own syntax.

#include "server/tool_choice.h"

#include <gtest/gtest.h>

#include "spec/json_grammar.h"

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

bool Complete(const JsonSchema& schema, std::string_view text) {
  JsonGrammar g(schema);
  return g.Feed(text) && g.complete();
}

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
    EXPECT_TRUE(Complete(*schema, text)) << text;
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

TEST(ToolChoiceTest, Llama3sWholeAnswerCallAndNoneForQwen3_5) {
  std::shared_ptr<const JsonSchema> schema;
  ASSERT_FALSE(HeldCallsSchema(kTools, ChatFormat::kLlama3, &schema));
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(schema->call_syntax().whole_answer);
  EXPECT_TRUE(Complete(*schema, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_TRUE(Complete(*schema, "It is sunny."));
  JsonGrammar g(*schema);
  EXPECT_FALSE(g.Feed(R"({"name": "get_weather", "parameters": {}})"));
  // Qwen3.5's calls are XML, not JSON: not held.
  ASSERT_FALSE(HeldCallsSchema(kTools, ChatFormat::kQwen3_5, &schema));
  EXPECT_EQ(schema, nullptr);
}

TEST(ToolChoiceTest, NothingHeldWithoutAStrictTool) {
  Ordered tools = kTools;
  tools[0]["function"]["strict"] = false;
  std::shared_ptr<const JsonSchema> schema = JsonSchema::AnyObject();
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
