// The Responses API's replies: the events of a stream in the order and shape the OpenAI SDKs
// accumulate, and the response object they build, equal to the one a whole reply returns.

#include "server/responses_output.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_test_util.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;

const ResponseMeta kMeta{
    .endpoint = Endpoint::kResponses, .id = "resp_1", .created = 1700000000, .model = "tiny"};
const ResponseJson kEcho = {{"store", false}, {"tools", ResponseJson::array()}};

struct Event {
  std::string type;
  json data;
};

// "event: <type>\ndata: <json>\n\n" events, in order.
std::vector<Event> Parse(const std::string& sse) {
  std::vector<Event> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << sse.substr(at);
    const std::string block = sse.substr(at, end - at);
    const size_t newline = block.find('\n');
    EXPECT_TRUE(block.starts_with("event: ")) << block;
    EXPECT_EQ(block.substr(newline + 1, 6), "data: ") << block;
    out.push_back({block.substr(7, newline - 7), json::parse(block.substr(newline + 7))});
    at = end + 2;
  }
  return out;
}

// What the OpenAI SDKs' ResponseStream does with the events: the snapshot they end with.
json Accumulate(const std::vector<Event>& events) {
  json snapshot;
  for (const Event& e : events) {
    const json& d = e.data;
    if (e.type == "response.created") {
      snapshot = d["response"];
    } else if (e.type == "response.output_item.added") {
      snapshot["output"].push_back(d["item"]);
    } else if (e.type == "response.output_item.done") {
      snapshot["output"][d["output_index"].get<size_t>()] = d["item"];
    } else if (e.type == "response.content_part.added") {
      snapshot["output"][d["output_index"].get<size_t>()]["content"].push_back(d["part"]);
    } else if (e.type == "response.output_text.delta" ||
               e.type == "response.reasoning_text.delta") {
      json& part = snapshot["output"][d["output_index"].get<size_t>()]["content"]
                           [d["content_index"].get<size_t>()];
      part["text"] = part["text"].get<std::string>() + d["delta"].get<std::string>();
    } else if (e.type == "response.function_call_arguments.delta") {
      json& item = snapshot["output"][d["output_index"].get<size_t>()];
      item["arguments"] = item["arguments"].get<std::string>() + d["delta"].get<std::string>();
    }
  }
  return snapshot;
}

std::vector<std::string> Types(const std::vector<Event>& events) {
  std::vector<std::string> types;
  for (const Event& e : events) types.push_back(e.type);
  return types;
}

ChatOutput ThinkingToolsReader() {
  return ChatOutput(
      ReasoningStream(TraitsOf(ChatFormat::kQwen3)),
      ToolCallStream(ChatFormat::kQwen3, {.open = "<tool_call>", .close = "</tool_call>"}, {}, 5));
}

// With the usage the engine loop reports at the end.
std::vector<RequestChannel::Update> Updates(const std::vector<std::string>& texts,
                                            Outcome outcome) {
  std::vector<RequestChannel::Update> updates = testing::ChannelUpdates(texts, outcome);
  updates.back().usage = {.prompt_tokens = 20,
                          .completion_tokens = 30,
                          .cached_prompt_tokens = 16,
                          .reasoning_tokens = 6};
  return updates;
}

const std::vector<std::string> kThinkTalkCall = {
    "<think>\nPlan", " it.\n</think>\n\n", "Checking.",
    "\n<tool_call>\n{\"name\": \"get_weather\", ",
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"};

TEST(ResponsesOutputTest, AStreamBuildsTheResponseItemByItem) {
  ResponsesOutput streamed(kMeta, kEcho, 7);
  ChatOutput reader = ThinkingToolsReader();
  std::string sse = streamed.Open();
  for (const RequestChannel::Update& u : Updates(kThinkTalkCall, Outcome::kStop)) {
    sse += streamed.Update(u, &reader);
  }
  const std::vector<Event> events = Parse(sse);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["type"], events[i].type);
    EXPECT_EQ(events[i].data["sequence_number"], i);
  }
  EXPECT_EQ(
      Types(events),
      (std::vector<std::string>{
          "response.created", "response.in_progress",
          // the reasoning
          "response.output_item.added", "response.content_part.added",
          "response.reasoning_text.delta", "response.reasoning_text.delta",
          "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
          // the answer's text
          "response.output_item.added", "response.content_part.added", "response.output_text.delta",
          "response.output_text.delta", "response.output_text.done", "response.content_part.done",
          "response.output_item.done",
          // the call
          "response.output_item.added", "response.function_call_arguments.delta",
          "response.function_call_arguments.done", "response.output_item.done",
          "response.completed"}));
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[0].data["response"]["output"], json::array());
  EXPECT_EQ(events[0].data["response"]["usage"], nullptr);

  const json response = events.back().data["response"];
  EXPECT_EQ(response, json(streamed.Reply()));
  EXPECT_EQ(response["id"], "resp_1");
  EXPECT_EQ(response["object"], "response");
  EXPECT_EQ(response["status"], "completed");
  EXPECT_EQ(response["incomplete_details"], nullptr);
  EXPECT_EQ(response["store"], false);  // the echo
  ASSERT_EQ(response["output"].size(), 3u);
  const json& reasoning = response["output"][0];
  EXPECT_EQ(reasoning["type"], "reasoning");
  EXPECT_TRUE(reasoning["id"].get<std::string>().starts_with("rs_"));
  EXPECT_EQ(reasoning["content"],
            (json::array({{{"type", "reasoning_text"}, {"text", "Plan it."}}})));
  const json& message = response["output"][1];
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["status"], "completed");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["content"][0]["type"], "output_text");
  EXPECT_EQ(message["content"][0]["text"], "Checking.\n");  // as chat's content
  const json& call = response["output"][2];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_TRUE(call["call_id"].get<std::string>().starts_with("call_"));
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("fc_"));
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), (json{{"city", "Paris"}}));
  EXPECT_EQ(response["usage"], (json{{"input_tokens", 20},
                                     {"input_tokens_details", {{"cached_tokens", 16}}},
                                     {"output_tokens", 30},
                                     {"output_tokens_details", {{"reasoning_tokens", 6}}},
                                     {"total_tokens", 50}}));
  // The SDKs' accumulated snapshot is the response; items' ids are distinct.
  json snapshot = Accumulate(events);
  EXPECT_EQ(snapshot["output"], response["output"]);
  EXPECT_NE(response["output"][0]["id"], response["output"][1]["id"]);

  // The whole reply of the same output is the same response.
  ResponsesOutput whole(kMeta, kEcho, 7);
  ChatOutput whole_reader = ThinkingToolsReader();
  std::string all_text;
  for (const std::string& t : kThinkTalkCall) all_text += t;
  whole.Update(Updates({all_text}, Outcome::kStop)[0], &whole_reader);
  EXPECT_EQ(json(whole.Reply()), response);
}

TEST(ResponsesOutputTest, CutOffIsIncompleteAndAFailureIsFailed) {
  ResponsesOutput cut(kMeta, kEcho, 1);
  std::string sse = cut.Open();
  for (const RequestChannel::Update& u : Updates({"Half an ans", "wer"}, Outcome::kLength)) {
    sse += cut.Update(u, nullptr);
  }
  const std::vector<Event> events = Parse(sse);
  EXPECT_EQ(events.back().type, "response.incomplete");
  const json response = events.back().data["response"];
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"], (json{{"reason", "max_output_tokens"}}));
  ASSERT_EQ(response["output"].size(), 1u);
  EXPECT_EQ(response["output"][0]["status"], "incomplete");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "Half an answer");

  ResponsesOutput failed(kMeta, kEcho, 1);
  RequestChannel::Update error{.done = true,
                               .outcome = Outcome::kError,
                               .error = InternalError("the request could not be completed")};
  std::string failure_sse = failed.Open();
  failure_sse += failed.Update(error, nullptr);
  const std::vector<Event> failure = Parse(failure_sse);
  EXPECT_EQ(failure.back().type, "response.failed");
  EXPECT_EQ(failure.back().data["response"]["status"], "failed");
  EXPECT_EQ(failure.back().data["response"]["error"]["message"],
            "the request could not be completed");
  EXPECT_EQ(failure.back().data["response"]["output"], json::array());
}

TEST(ResponsesOutputTest, AForcedCallStreamsItsArgumentsAndLogprobsGoWithTheText) {
  ResponsesOutput forced(kMeta, kEcho, 3);
  ChatOutput reader(std::nullopt, std::nullopt, ForcedToolCalls("get_weather", 9));
  std::string sse = forced.Open();
  for (const RequestChannel::Update& u :
       Updates({"{\"ci", "ty\": \"Pa", "ris\"}"}, Outcome::kStop)) {
    sse += forced.Update(u, &reader);
  }
  const std::vector<Event> events = Parse(sse);
  std::string streamed;
  for (const Event& e : events) {
    if (e.type == "response.function_call_arguments.delta") streamed += e.data["delta"];
  }
  const json call = json(forced.Reply())["output"][0];
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(streamed, call["arguments"]);
  EXPECT_EQ(Accumulate(events)["output"][0], call);

  ResponseMeta with_logprobs = kMeta;
  with_logprobs.logprobs = true;
  ResponsesOutput text(with_logprobs, kEcho, 3);
  RequestChannel::Update update{.text = "Hi",
                                .logprobs = {{.bytes = "Hi", .logprob = -0.5f, .top = {}}},
                                .done = true,
                                .outcome = Outcome::kStop};
  const std::vector<Event> text_events = Parse(text.Update(update, nullptr));
  EXPECT_EQ(text_events[2].type, "response.output_text.delta");
  EXPECT_EQ(text_events[2].data["logprobs"][0]["token"], "Hi");
  const json part = json(text.Reply())["output"][0]["content"][0];
  ASSERT_EQ(part["logprobs"].size(), 1u);
  EXPECT_EQ(part["logprobs"][0]["logprob"], -0.5);
  EXPECT_EQ(part["logprobs"][0]["bytes"], (json::array({72, 105})));
}

}  // namespace
}  // namespace dscale::server
