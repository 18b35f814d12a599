// Anthropic's Messages API replies: the stream's events in the order and shape the Anthropic
// SDKs accumulate, the message they build equal to a whole reply's, stop reasons and usage.

#include "server/messages_output.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_test_util.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;

const ResponseMeta kMeta{
    .endpoint = Endpoint::kMessages, .id = "msg_1", .created = 1700000000, .model = "tiny"};

struct Event {
  std::string type;
  json data;
};

std::vector<Event> Parse(const std::string& sse) {
  std::vector<Event> out;
  for (size_t at = 0; at < sse.size();) {
    const size_t end = sse.find("\n\n", at);
    const std::string block = sse.substr(at, end - at);
    const size_t newline = block.find('\n');
    EXPECT_TRUE(block.starts_with("event: ")) << block;
    out.push_back({block.substr(7, newline - 7), json::parse(block.substr(newline + 7))});
    at = end + 2;
  }
  return out;
}

// What the Anthropic SDKs' MessageStream does with the events: the message they end with.
json Accumulate(const std::vector<Event>& events) {
  json message;
  for (const Event& e : events) {
    const json& d = e.data;
    EXPECT_EQ(d["type"], e.type);
    if (e.type == "message_start") {
      message = d["message"];
    } else if (e.type == "content_block_start") {
      EXPECT_EQ(d["index"], message["content"].size());
      message["content"].push_back(d["content_block"]);
    } else if (e.type == "content_block_delta") {
      json& block = message["content"][d["index"].get<size_t>()];
      const json& delta = d["delta"];
      if (delta["type"] == "text_delta") {
        block["text"] = block["text"].get<std::string>() + delta["text"].get<std::string>();
      } else if (delta["type"] == "thinking_delta") {
        block["thinking"] =
            block["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
      } else {
        EXPECT_EQ(delta["type"], "input_json_delta");
        block["partial"] = block.value("partial", "") + delta["partial_json"].get<std::string>();
      }
    } else if (e.type == "content_block_stop") {
      json& block = message["content"][d["index"].get<size_t>()];
      if (block.contains("partial")) {
        block["input"] = json::parse(block["partial"].get<std::string>());
        block.erase("partial");
      }
    } else if (e.type == "message_delta") {
      message["stop_reason"] = d["delta"]["stop_reason"];
      message["stop_sequence"] = d["delta"]["stop_sequence"];
      message["usage"] = d["usage"];
    }
  }
  return message;
}

ChatOutput ThinkingToolsReader() {
  return ChatOutput(
      ReasoningStream(TraitsOf(ChatFormat::kQwen3)),
      ToolCallStream(ChatFormat::kQwen3, {.open = "<tool_call>", .close = "</tool_call>"}, {}, 5));
}

std::vector<RequestChannel::Update> Updates(const std::vector<std::string>& texts, Outcome outcome,
                                            const std::string& stop_string = "") {
  std::vector<RequestChannel::Update> updates = testing::ChannelUpdates(texts, outcome);
  updates.back().usage = {.prompt_tokens = 40, .completion_tokens = 30, .cached_prompt_tokens = 32};
  updates.back().stop_string = stop_string;
  return updates;
}

std::string Stream(MessagesOutput* out, const std::vector<RequestChannel::Update>& updates,
                   ChatOutput* reader) {
  std::string sse = out->Open();
  for (const RequestChannel::Update& u : updates) sse += out->Update(u, reader);
  return sse;
}

TEST(MessagesOutputTest, AStreamBuildsTheMessageBlockByBlock) {
  MessagesOutput streamed(kMeta, 40, 7);
  ChatOutput reader = ThinkingToolsReader();
  const std::vector<Event> events =
      Parse(Stream(&streamed,
                   Updates({"<think>\nPlan", " it.\n</think>\n\n", "Checking.",
                            "\n<tool_call>\n{\"name\": \"get_weather\", ",
                            "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
                           Outcome::kStop),
                   &reader));
  std::vector<std::string> types;
  for (const Event& e : events) types.push_back(e.type);
  EXPECT_EQ(types, (std::vector<std::string>{
                       "message_start", "content_block_start", "content_block_delta",
                       "content_block_delta", "content_block_stop", "content_block_start",
                       "content_block_delta", "content_block_delta", "content_block_stop",
                       "content_block_start", "content_block_delta", "content_block_stop",
                       "message_delta", "message_stop"}));
  EXPECT_EQ(events[0].data["message"]["usage"]["input_tokens"], 40);  // before the prefix cache
  EXPECT_EQ(events[0].data["message"]["content"], json::array());
  EXPECT_EQ(events[0].data["message"]["stop_reason"], nullptr);

  const json message = streamed.Reply();
  EXPECT_EQ(Accumulate(events), message);
  EXPECT_EQ(message["id"], "msg_1");
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  ASSERT_EQ(message["content"].size(), 3u);
  EXPECT_EQ(message["content"][0],
            (json{{"type", "thinking"}, {"thinking", "Plan it."}, {"signature", ""}}));
  EXPECT_EQ(message["content"][1], (json{{"type", "text"}, {"text", "Checking.\n"}}));
  const json& call = message["content"][2];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("toolu_"));
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], (json{{"city", "Paris"}}));
  EXPECT_EQ(message["stop_reason"], "tool_use");
  EXPECT_EQ(message["stop_sequence"], nullptr);
  EXPECT_EQ(message["usage"], (json{{"input_tokens", 8},
                                    {"cache_creation_input_tokens", 0},
                                    {"cache_read_input_tokens", 32},
                                    {"output_tokens", 30}}));

  MessagesOutput whole(kMeta, 40, 7);
  ChatOutput whole_reader = ThinkingToolsReader();
  whole.Update(Updates({"<think>\nPlan it.\n</think>\n\nChecking.\n<tool_call>\n{\"name\": "
                        "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
                       Outcome::kStop)[0],
               &whole_reader);
  EXPECT_EQ(json(whole.Reply()), message);
}

TEST(MessagesOutputTest, StopReasons) {
  const auto reason = [](Outcome outcome, const std::string& stop_string) {
    MessagesOutput out(kMeta, 40, 1);
    Stream(&out, Updates({"Hello"}, outcome, stop_string), nullptr);
    return std::pair(json(out.Reply())["stop_reason"], json(out.Reply())["stop_sequence"]);
  };
  EXPECT_EQ(reason(Outcome::kStop, ""), std::pair(json("end_turn"), json(nullptr)));
  EXPECT_EQ(reason(Outcome::kStop, "END"), std::pair(json("stop_sequence"), json("END")));
  EXPECT_EQ(reason(Outcome::kLength, ""), std::pair(json("max_tokens"), json(nullptr)));

  MessagesOutput failed(kMeta, 40, 1);
  const std::vector<Event> events = Parse(Stream(
      &failed,
      {{.done = true, .outcome = Outcome::kError, .error = InternalError("could not complete")}},
      nullptr));
  EXPECT_EQ(events.back().type, "error");
  EXPECT_EQ(events.back().data["error"],
            (json{{"type", "api_error"}, {"message", "could not complete"}}));
  EXPECT_EQ(json(MessagesErrorJson(BadField("max_tokens", "is required"))),
            (json{{"type", "error"},
                  {"error",
                   {{"type", "invalid_request_error"}, {"message", "max_tokens: is required"}}}}));
  EXPECT_EQ(MessagesErrorJson(Unavailable("overloaded", "busy"))["error"]["type"],
            "overloaded_error");
}

TEST(MessagesOutputTest, AForcedCallStreamsItsInputAndACutOffOneIsEmpty) {
  MessagesOutput forced(kMeta, 40, 3);
  ChatOutput reader(std::nullopt, std::nullopt, ForcedToolCalls("get_weather", 9));
  const std::vector<Event> events =
      Parse(Stream(&forced, Updates({"{\"ci", "ty\": \"Pa", "ris\"}"}, Outcome::kStop), &reader));
  EXPECT_EQ(Accumulate(events), json(forced.Reply()));
  EXPECT_EQ(json(forced.Reply())["content"][0]["input"], (json{{"city", "Paris"}}));

  MessagesOutput cut(kMeta, 40, 3);
  ChatOutput cut_reader(std::nullopt, std::nullopt, ForcedToolCalls("get_weather", 9));
  Stream(&cut, Updates({"{\"ci"}, Outcome::kLength), &cut_reader);
  EXPECT_EQ(json(cut.Reply())["content"][0]["input"], json::object());
  EXPECT_EQ(json(cut.Reply())["stop_reason"], "max_tokens");
}

}  // namespace
}  // namespace dscale::server
