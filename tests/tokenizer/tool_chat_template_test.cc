// Tools in the chat formats: the tools' definitions and an assistant's calls as the
// checkpoints' templates write them (expected text rendered by the templates themselves,
// tests/data/tokenizer/tool_templates/render.py), the JSON those templates write, and a model's
// calls read back from its output (tool_call_format.h).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/tokenizer/chat_json.h"
#include "io/tokenizer/chat_template.h"
#include "io/tokenizer/tool_call_format.h"

namespace dscale {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string Golden(const std::string& name) {
  const auto path = std::filesystem::path(DSCALE_TEST_DATA_DIR) / "tokenizer" / "tool_templates" /
                    (name + ".txt");
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// render.py's TOOLS, as a request sends them (members in that order).
std::vector<std::string> Tools() {
  return {TemplateJson(OrderedJson::parse(
              R"({"type": "function", "function": {"name": "get_weather",
                  "description": "Température à venir", "parameters": {"type": "object",
                  "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                  "required": ["city"]}}})")),
          TemplateJson(OrderedJson::parse(R"({"type": "function", "function": {"name": "now"}})"))};
}

ChatMessage Assistant(std::string content, std::vector<ChatToolCall> calls) {
  return {.role = "assistant", .content = std::move(content), .tool_calls = std::move(calls)};
}

// render.py's CONVERSATIONS.
std::vector<std::pair<std::string, std::vector<ChatMessage>>> Conversations() {
  return {
      {"system_and_query", {{"system", "You are helpful."}, {"user", "Weather in Paris?"}}},
      {"two_calls_and_their_results",
       {{"user", "Q"},
        Assistant("", {{"get_weather", R"({"city": "Paris", "days": 2})"}, {"now", "{}"}}),
        {"tool", "18C"},
        {"tool", "noon"}}},
      {"one_call_and_its_result",
       {{"system", "Use the tools."},
        {"user", "Weather in Paris?"},
        Assistant("", {{"get_weather", R"({"city": "Paris"})"}}),
        {"tool", "{\"temp\": \"18 \u00b0C\"}"}}},
      {"a_call_after_text_then_a_new_query",
       {{"user", "Q"},
        Assistant(
            "Let me check.",
            {{"get_weather", R"({"city": "Paris", "flag": true, "x": null, "l": [1, 2.5]})"}}),
        {"tool", "sunny"},
        {"assistant", "It is sunny."},
        {"user", "Thanks"}}},
  };
}

TEST(TemplateJsonTest, IndentedAsPythonIndents) {
  // json.dumps(value, ensure_ascii=False, indent=4) in Python 3.
  EXPECT_EQ(TemplateJson(OrderedJson::parse(R"({"a": [1, {}], "b": {"c": []}, "d": "é"})"), 4),
            "{\n    \"a\": [\n        1,\n        {}\n    ],\n    \"b\": {\n        \"c\": "
            "[]\n    },\n    \"d\": \"é\"\n}");
  EXPECT_EQ(TemplateJson(OrderedJson::parse("{}"), 4), "{}");
  EXPECT_EQ(TemplateJson(OrderedJson::parse("[]"), 4), "[]");
}

TEST(TemplateJsonTest, WritesWhatPythonsJsonDumpsWrites) {
  // Each right-hand side is json.dumps(value, ensure_ascii=False) in Python 3.
  const std::pair<const char*, const char*> cases[] = {
      {"1.0", "1.0"},
      {"0.00001", "1e-05"},
      {"1e16", "1e+16"},
      {"1e15", "1000000000000000.0"},
      {"0.0001", "0.0001"},
      {"123456789.125", "123456789.125"},
      {"1.7976931348623157e308", "1.7976931348623157e+308"},
      {"-7", "-7"},
      {"-0.0", "-0.0"},
      {"5e-324", "5e-324"},
      {"1.5e-7", "1.5e-07"},
      {"1e100", "1e+100"},
      {"12345.678", "12345.678"},
      {"100.0", "100.0"},
      {"2.5e-5", "2.5e-05"},
      {"9999999999999998.0", "9999999999999998.0"},
      {"1.2345e-4", "0.00012345"},
      {R"("a\"b\\c\n\u0001\u001f\u00e9\u2028/")", "\"a\\\"b\\\\c\\n\\u0001\\u001f\u00e9\u2028/\""},
      {"[]", "[]"},
      {"{}", "{}"},
      {R"({"b": 1, "a": [1, 2, {"x": null, "y": true}]})",
       R"({"b": 1, "a": [1, 2, {"x": null, "y": true}]})"},
  };
  for (const auto& [json, python] : cases) {
    EXPECT_EQ(TemplateJson(OrderedJson::parse(json)), python) << json;
  }
  EXPECT_EQ(TemplateString(OrderedJson::parse(R"("a \"b\"")")), "a \"b\"");
  EXPECT_EQ(TemplateString(true), "True");
  EXPECT_EQ(TemplateString(nullptr), "None");
  EXPECT_EQ(TemplateString(2.5), "2.5");
}

TEST(ToolChatTemplateTest, Qwen3WritesWhatItsTemplateWrites) {
  const std::vector<std::string> tools = Tools();
  for (const auto& [name, messages] : Conversations()) {
    Result<std::string> text = ApplyQwen3ChatTemplate(messages, {.tools = tools});
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, Golden("qwen3_" + name)) << name;
  }
}

TEST(ToolChatTemplateTest, Qwen3_5WritesWhatItsTemplateWrites) {
  const std::vector<std::string> tools = Tools();
  for (const auto& [name, messages] : Conversations()) {
    Result<std::string> text = ApplyQwen3_5ChatTemplate(messages, {.tools = tools});
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, Golden("qwen3_5_" + name)) << name;
  }
}

// Llama 3.1's takes one call a message: the conversation with two is refused, as its template
// raises on it.
TEST(ToolChatTemplateTest, Llama3_1WritesWhatItsTemplateWrites) {
  const std::vector<std::string> tools = Tools();
  for (const auto& [name, messages] : Conversations()) {
    Result<std::string> text = ApplyLlama3ChatTemplate(messages, {.tools = tools});
    if (name == "two_calls_and_their_results") {
      ASSERT_FALSE(text.ok());
      EXPECT_NE(text.status().message().find("messages[1].tool_calls"), std::string::npos);
      continue;
    }
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_EQ(*text, Golden("llama3_1_" + name)) << name;
  }
  // The tools go before the first user message: there must be one after the system message.
  EXPECT_FALSE(
      ApplyLlama3ChatTemplate(std::vector<ChatMessage>{{"system", "S"}}, {.tools = tools}).ok());
}

// Qwen3.5's template writes each argument as a parameter: arguments that are no JSON object
// cannot be written (its Jinja fails on them too).
TEST(ToolChatTemplateTest, Qwen3_5RefusesArgumentsThatAreNotAnObject) {
  const std::vector<ChatMessage> messages = {
      {"user", "Q"}, Assistant("", {{"now", "[1, 2]"}}), {"tool", "noon"}};
  Result<std::string> text = ApplyQwen3_5ChatTemplate(messages);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("messages[1].tool_calls"), std::string::npos)
      << text.status().message();
  // Qwen3's writes the text as given.
  EXPECT_TRUE(ApplyQwen3ChatTemplate(messages).ok());
}

TEST(ToolCallFormatTest, Qwen3ReadsHermesCalls) {
  const ToolParameterTypes none;
  auto call = ParseToolCall(ChatFormat::kQwen3,
                            "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                            "\"days\": 2}}\n",
                            none);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->name, "get_weather");
  EXPECT_EQ(call->arguments, R"({"city": "Paris", "days": 2})");
  // Compact JSON comes back as the template would write it; arguments as a JSON string too.
  call = ParseToolCall(ChatFormat::kQwen3, R"({"name":"f","arguments":"{\"b\":[1,2],\"a\":1}"})",
                       none);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, R"({"b": [1, 2], "a": 1})");
  for (const char* bad :
       {"", "{", "[]", R"({"arguments": {}})", R"({"name": "", "arguments": {}})",
        R"({"name": "f"})", R"({"name": "f", "arguments": [1]})",
        R"({"name": "f", "arguments": "not json"})", R"({"name": 3, "arguments": {}})"}) {
    EXPECT_FALSE(ParseToolCall(ChatFormat::kQwen3, bad, none)) << bad;
  }
}

TEST(ToolCallFormatTest, Qwen3_5ReadsValuesByTheirDeclaredTypes) {
  const ToolParameterTypes types(std::vector<std::string>{TemplateJson(OrderedJson::parse(R"(
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
       "properties": {"s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
                      "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
                      "z": {"type": "null"}, "bad_i": {"type": "integer"}}}}})"))});
  const auto call = ParseToolCall(ChatFormat::kQwen3_5,
                                  "\n<function=f>\n"
                                  "<parameter=s>\n42\n</parameter>\n"
                                  "<parameter=i>\n42\n</parameter>\n"
                                  "<parameter=n>\n2.5\n</parameter>\n"
                                  "<parameter=b>\nTrue\n</parameter>\n"
                                  "<parameter=o>\n{\"k\": [1]}\n</parameter>\n"
                                  "<parameter=a>\n[1, \"x\"]\n</parameter>\n"
                                  "<parameter=z>\nnull\n</parameter>\n"
                                  "<parameter=bad_i>\n4.5\n</parameter>\n"
                                  "<parameter=undeclared>\n7\n</parameter>\n"
                                  "<parameter=text>\nline one\nline two\n\n</parameter>\n"
                                  "</function>\n",
                                  types);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->name, "f");
  EXPECT_EQ(call->arguments,
            R"({"s": "42", "i": 42, "n": 2.5, "b": true, "o": {"k": [1]}, "a": [1, "x"], )"
            R"("z": null, "bad_i": "4.5", "undeclared": "7", "text": "line one\nline two\n"})");
}

// OpenAI's strict form of an optional parameter, [T, "null"] in either order: "null" is null,
// anything else is read as T. Other type lists declare nothing (strings).
TEST(ToolCallFormatTest, Qwen3_5ReadsNullableValues) {
  const ToolParameterTypes types(std::vector<std::string>{TemplateJson(OrderedJson::parse(R"(
      {"type": "function", "function": {"name": "f", "parameters": {"type": "object",
       "properties": {"s": {"type": ["string", "null"]}, "t": {"type": ["string", "null"]},
                      "i": {"type": ["null", "integer"]}, "j": {"type": ["integer", "null"]},
                      "u": {"type": ["integer", "string"]}}}}})"))});
  const auto call = ParseToolCall(ChatFormat::kQwen3_5,
                                  "<function=f>\n"
                                  "<parameter=s>\nnull\n</parameter>\n"
                                  "<parameter=t>\nNull\n</parameter>\n"
                                  "<parameter=i>\n7\n</parameter>\n"
                                  "<parameter=j>\nnull\n</parameter>\n"
                                  "<parameter=u>\n7\n</parameter>\n"
                                  "</function>",
                                  types);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, R"({"s": null, "t": "Null", "i": 7, "j": null, "u": "7"})");
}

// A parameter's end may be missing before the next one or the function's end, and the
// function's end may be missing; anything else is not a call.
TEST(ToolCallFormatTest, Qwen3_5ToleratesMissingClosingTags) {
  const ToolParameterTypes none;
  auto call = ParseToolCall(ChatFormat::kQwen3_5,
                            "<function=f>\n<parameter=a>\nx\n<parameter=b>\ny\n</function>", none);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, R"({"a": "x", "b": "y"})");
  call = ParseToolCall(ChatFormat::kQwen3_5, "<function=g>\n<parameter=a>\nx\n</parameter>", none);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->name, "g");
  call = ParseToolCall(ChatFormat::kQwen3_5, "<function=h>\n</function>", none);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments, "{}");
  for (const char* bad : {"", "{\"name\": \"f\", \"arguments\": {}}", "<function=>\n</function>",
                          "<function=f>\ntext\n</function>", "<function=f>\n</function>\ntrailing",
                          "<function=f\n"}) {
    EXPECT_FALSE(ParseToolCall(ChatFormat::kQwen3_5, bad, none)) << bad;
  }
}

// What the model writes for a call, read back and written into the history again, is the same
// text: the history the next turn sends reads as the model's own output.
TEST(ToolCallFormatTest, ACallReadBackIsWrittenAsTheModelWroteIt) {
  const std::vector<std::string> tools = Tools();
  const ToolParameterTypes types(tools);
  const ChatToolCall call = {"get_weather", R"({"city": "Paris", "days": 2})"};
  for (const ChatFormat format : {ChatFormat::kQwen3, ChatFormat::kQwen3_5, ChatFormat::kLlama3}) {
    const std::vector<ChatMessage> messages = {{"user", "Q"}, Assistant("", {call})};
    Result<std::string> text =
        ApplyChatTemplate(format, messages, {.add_generation_prompt = false, .tools = tools});
    ASSERT_TRUE(text.ok());
    // Between the markers, or (Llama 3.1: none) the whole assistant turn.
    const ToolCallMarkers markers = ToolCallMarkersOf(format);
    const std::string_view open_at =
        markers.open.empty() ? "assistant<|end_header_id|>\n\n" : markers.open;
    const std::string_view close_at = markers.open.empty() ? "<|eot_id|>" : markers.close;
    const size_t open = text->rfind(open_at) + open_at.size();
    const size_t close = text->rfind(close_at);
    const auto read = ParseToolCall(format, text->substr(open, close - open), types);
    ASSERT_TRUE(read) << text->substr(open, close - open);
    EXPECT_EQ(read->name, call.name);
    EXPECT_EQ(read->arguments, call.arguments);
  }
}

}  // namespace
}  // namespace dscale
