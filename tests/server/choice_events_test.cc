// A choice's channel updates as response events and choices: content and tool calls split out of
// the text, finish_reason "tool_calls" after calls, and the text as it was without tools.

#include "server/choice_events.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_test_util.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;

const ResponseMeta kChatMeta{.endpoint = Endpoint::kChatCompletions,
                             .id = "chatcmpl-1",
                             .created = 1700000000,
                             .model = "tiny"};

ChatOutput Reader(bool thinking = false) {
  std::optional<ReasoningStream> reasoning;
  if (thinking) reasoning.emplace(TraitsOf(ChatFormat::kQwen3));
  return ChatOutput(
      std::move(reasoning),
      ToolCallStream(ChatFormat::kQwen3, {.open = "<tool_call>", .close = "</tool_call>"}, {}, 5));
}

// The data of each "data: {...}" event.
std::vector<json> Events(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    out.push_back(json::parse(sse.substr(at + 6, end - at - 6)));
    at = end;
  }
  return out;
}

using testing::ChannelUpdates;

const std::vector<std::string> kCallInPieces = {
    "Checking.", "\n<tool", "_call>\n{\"name\": \"get_weather\", ",
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "\n"};

TEST(ChoiceEventsTest, AStreamSendsTheContentThenTheCallThenFinishesWithToolCalls) {
  ChatOutput reader = Reader();
  int64_t offset = 0;
  std::string content;
  std::vector<json> calls;
  json finish;
  for (const RequestChannel::Update& u : ChannelUpdates(kCallInPieces, Outcome::kStop)) {
    for (const json& event : Events(ChoiceEvents(kChatMeta, false, 0, u, &reader, &offset))) {
      const json& choice = event["choices"][0];
      const json& delta = choice["delta"];
      if (delta.contains("content")) content += delta["content"].get<std::string>();
      if (delta.contains("tool_calls")) calls.push_back(delta["tool_calls"]);
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(content, "Checking.\n");
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_EQ(calls[0].size(), 1u);
  EXPECT_EQ(calls[0][0]["index"], 0);
  EXPECT_EQ(calls[0][0]["type"], "function");
  EXPECT_EQ(calls[0][0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0][0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(finish, "tool_calls");

  // The whole response's choice says the same.
  RequestChannel::Update whole = {.text = "", .done = true, .outcome = Outcome::kStop};
  for (const std::string& text : kCallInPieces) whole.text += text;
  ChatOutput again = Reader();
  const Choice choice = WholeChoice(whole, &again);
  EXPECT_EQ(choice.text, "Checking.\n");
  ASSERT_EQ(choice.tool_calls.size(), 1u);
  EXPECT_EQ(choice.tool_calls[0].id, calls[0][0]["id"]);
  EXPECT_EQ(choice.finish_reason, "tool_calls");
}

// Cut off by max_tokens inside a call: the call's text is content, and the reason is "length".
// Without tools the text is content as it was.
TEST(ChoiceEventsTest, ACallCutOffIsTextAndWithoutToolsNothingChanges) {
  RequestChannel::Update cut = {
      .text = "A <tool_call>\n{\"name\": \"f\"", .done = true, .outcome = Outcome::kLength};
  ChatOutput reader = Reader();
  Choice choice = WholeChoice(cut, &reader);
  EXPECT_EQ(choice.text, cut.text);
  EXPECT_TRUE(choice.tool_calls.empty());
  EXPECT_EQ(choice.finish_reason, "length");

  RequestChannel::Update called = {
      .text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
      .done = true,
      .outcome = Outcome::kStop};
  choice = WholeChoice(called, nullptr);
  EXPECT_EQ(choice.text, called.text);
  EXPECT_EQ(choice.finish_reason, "stop");
  int64_t offset = 0;
  const std::vector<json> events =
      Events(ChoiceEvents(kChatMeta, false, 0, called, nullptr, &offset));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], called.text);
  EXPECT_EQ(events[1]["choices"][0]["finish_reason"], "stop");
}

// Thinking on: the reasoning streams as reasoning_content, a call written inside it is not one,
// and the answer's call is; the whole choice says the same.
TEST(ChoiceEventsTest, ReasoningThenACall) {
  const std::vector<std::string> pieces = {
      "<thi", "nk>\nMaybe <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>?\n", "</thi",
      "nk>\n\nSure.\n<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"};
  ChatOutput output = Reader(/*thinking=*/true);
  int64_t offset = 0;
  std::string reasoning, content, finish;
  std::vector<std::string> called;
  for (const RequestChannel::Update& u : ChannelUpdates(pieces, Outcome::kStop)) {
    for (const json& event : Events(ChoiceEvents(kChatMeta, false, 0, u, &output, &offset))) {
      const json& choice = event["choices"][0];
      const json& delta = choice["delta"];
      reasoning += delta.value("reasoning_content", "");
      content += delta.value("content", "");
      for (const json& call : delta.value("tool_calls", json::array())) {
        called.push_back(call["function"]["name"]);
      }
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
    }
  }
  const std::string inner = "Maybe <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>?";
  EXPECT_EQ(reasoning, inner);
  EXPECT_EQ(content, "Sure.\n");
  EXPECT_EQ(called, std::vector<std::string>{"g"});
  EXPECT_EQ(finish, "tool_calls");

  RequestChannel::Update whole = {.text = "", .done = true, .outcome = Outcome::kStop};
  for (const std::string& text : pieces) whole.text += text;
  ChatOutput again = Reader(/*thinking=*/true);
  const Choice choice = WholeChoice(whole, &again);
  EXPECT_EQ(choice.reasoning, inner);
  EXPECT_EQ(choice.text, "Sure.\n");
  ASSERT_EQ(choice.tool_calls.size(), 1u);
  const json message =
      CompletionJson(kChatMeta, std::span(&choice, 1), {})["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], inner);
  EXPECT_EQ(message["content"], "Sure.\n");
}

// A forced named call streams as OpenAI streams one: the call with its id, name and first
// arguments, then chunks of {"index", "function": {"arguments"}}; together they are the whole
// response's call.
TEST(ChoiceEventsTest, AForcedCallStreamsItsArguments) {
  const std::vector<std::string> pieces = {"\n", "{\"city\"", ": \"Par", "is\"}"};
  ChatOutput streamed(std::nullopt, std::nullopt, ForcedToolCalls("get_weather", 3));
  int64_t offset = 0;
  std::string name, arguments;
  std::vector<json> deltas;
  json finish;
  for (const RequestChannel::Update& u : ChannelUpdates(pieces, Outcome::kStop)) {
    for (const json& event : Events(ChoiceEvents(kChatMeta, false, 0, u, &streamed, &offset))) {
      const json& choice = event["choices"][0];
      if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
      if (!choice["delta"].contains("tool_calls")) continue;
      const json& call = choice["delta"]["tool_calls"][0];
      EXPECT_EQ(call["index"], 0);
      if (call.contains("id")) name += call["function"]["name"].get<std::string>();
      arguments += call["function"]["arguments"].get<std::string>();
      deltas.push_back(call);
    }
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"city": "Paris"})");
  ASSERT_EQ(deltas.size(), 3u);
  EXPECT_FALSE(deltas[1].contains("id"));
  EXPECT_EQ(finish, "tool_calls");
  RequestChannel::Update whole = {.text = "", .done = true, .outcome = Outcome::kStop};
  for (const std::string& text : pieces) whole.text += text;
  ChatOutput at_once(std::nullopt, std::nullopt, ForcedToolCalls("get_weather", 3));
  const Choice choice = WholeChoice(whole, &at_once);
  ASSERT_EQ(choice.tool_calls.size(), 1u);
  EXPECT_EQ(choice.tool_calls[0].call.arguments, arguments);
  EXPECT_EQ(choice.tool_calls[0].id, deltas[0]["id"]);
}

}  // namespace
}  // namespace dscale::server
