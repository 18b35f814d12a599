// Response bodies, stream chunks and SSE framing in the shapes the OpenAI clients parse.

#include "server/openai_response.h"

#include <gtest/gtest.h>

namespace dscale::server {
namespace {

using json = nlohmann::json;

const ResponseMeta kChatMeta{.endpoint = Endpoint::kChatCompletions,
                             .id = "chatcmpl-1",
                             .created = 1700000000,
                             .model = "tiny"};
const ResponseMeta kTextMeta{
    .endpoint = Endpoint::kCompletions, .id = "cmpl-1", .created = 1700000000, .model = "tiny"};

TEST(OpenAiResponseTest, ChatCompletion) {
  const json j =
      CompletionJson(kChatMeta, "Hi!", "stop", {.prompt_tokens = 5, .completion_tokens = 2});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["created"], 1700000000);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "Hi!"}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 5},
                              {"completion_tokens", 2},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}},
                              {"completion_tokens_details", {{"reasoning_tokens", 0}}}}));
  const json details = CompletionJson(kChatMeta, "Hi!", "stop",
                                      {.prompt_tokens = 40,
                                       .completion_tokens = 9,
                                       .cached_prompt_tokens = 32,
                                       .reasoning_tokens = 6})["usage"];
  EXPECT_EQ(details["prompt_tokens_details"]["cached_tokens"], 32);
  EXPECT_EQ(details["completion_tokens_details"]["reasoning_tokens"], 6);
}

// A choice that called tools: content null when there is no text, the calls in OpenAI's shape;
// a stream's delta numbers them.
TEST(OpenAiResponseTest, ToolCalls) {
  const ToolCall call{.id = "call_1", .call = {.name = "f", .arguments = R"({"a": 1})"}};
  const json function = {{"name", "f"}, {"arguments", R"({"a": 1})"}};
  const Choice choice{.text = "", .finish_reason = "tool_calls", .tool_calls = {call}};
  const json j = CompletionJson(kChatMeta, std::span(&choice, 1), {});
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(
      j["choices"][0]["message"],
      (json{
          {"role", "assistant"},
          {"content", nullptr},
          {"tool_calls",
           json::array({json{{"id", "call_1"}, {"type", "function"}, {"function", function}}})}}));
  const Choice with_text{
      .text = "Let me see.", .finish_reason = "tool_calls", .tool_calls = {call}};
  EXPECT_EQ(
      CompletionJson(kChatMeta, std::span(&with_text, 1), {})["choices"][0]["message"]["content"],
      "Let me see.");
  const json chunk =
      ChunkJson(kChatMeta, {.tool_calls = std::span(&call, 1), .first_tool_call = 2});
  EXPECT_EQ(
      chunk["choices"][0]["delta"],
      (json{
          {"tool_calls",
           json::array({json{
               {"index", 2}, {"id", "call_1"}, {"type", "function"}, {"function", function}}})}}));
}

TEST(OpenAiResponseTest, TextCompletion) {
  const json j =
      CompletionJson(kTextMeta, "abc", "length", {.prompt_tokens = 1, .completion_tokens = 3});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["total_tokens"], 4);
}

// Two tokens: "Hé" (3 bytes, 2 characters) and the first byte of a two-byte character.
std::vector<LogprobEntry> TwoTokens() {
  return {{.bytes = "H\xc3\xa9", .logprob = -0.25f, .top = {{"H\xc3\xa9", -0.25f}, {"x", -2.0f}}},
          {.bytes = "\xc3", .logprob = -1.5f, .top = {{"a", -0.5f}}}};
}

TEST(OpenAiResponseTest, ChatLogprobs) {
  ResponseMeta meta = kChatMeta;
  meta.logprobs = true;
  const std::vector<LogprobEntry> entries = TwoTokens();
  const json j = CompletionJson(meta, "H\xc3\xa9", "length", {}, entries);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "H\xc3\xa9");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(content[0]["bytes"], (json{72, 195, 169}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1],
            (json{{"token", "x"}, {"logprob", -2.0f}, {"bytes", json{120}}}));
  // Half a character: named by its bytes.
  EXPECT_EQ(content[1]["token"], "bytes:\\xc3");
  EXPECT_EQ(content[1]["bytes"], (json{195}));
  // A chunk carries its tokens' entries; one without tokens, null.
  const json chunk = ChunkJson(meta, {.text = "H", .logprobs = std::span(entries).first(1)});
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["content"].size(), 1u);
  EXPECT_TRUE(ChunkJson(meta, {.finish_reason = "stop"})["choices"][0]["logprobs"].is_null());
  // Not asked for: null even with entries.
  EXPECT_TRUE(
      CompletionJson(kChatMeta, "", "stop", {}, entries)["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiResponseTest, CompletionLogprobsCountCharactersForTextOffsets) {
  ResponseMeta meta = kTextMeta;
  meta.logprobs = true;
  const std::vector<LogprobEntry> entries = TwoTokens();
  EXPECT_EQ(TextLength(entries), 3);  // "H", "é", and the start of the next character
  const json lp = ChunkJson(
      meta, {.text = "", .logprobs = entries, .text_offset = 10})["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], (json{"H\xc3\xa9", "bytes:\\xc3"}));
  EXPECT_EQ(lp["text_offset"], (json{10, 12}));
  ASSERT_EQ(lp["token_logprobs"].size(), 2u);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -1.5f);
  EXPECT_EQ(lp["top_logprobs"][0], (json{{"H\xc3\xa9", -0.25f}, {"x", -2.0f}}));
}

// A completion's top_logprobs object names its tokens most likely first, as the engine lists
// them, not in the tokens' alphabetical order (JSON objects keep the order written).
TEST(OpenAiResponseTest, CompletionTopLogprobsKeepTheirOrder) {
  ResponseMeta meta = kTextMeta;
  meta.logprobs = true;
  const std::vector<LogprobEntry> entries = {
      {.bytes = "z", .logprob = -0.125f, .top = {{"z", -0.125f}, {"a", -2.5f}, {"m", -3.0f}}}};
  const std::string body = Dump(CompletionJson(meta, "z", "length", {}, entries));
  EXPECT_NE(body.find(R"("top_logprobs":[{"z":-0.125,"a":-2.5,"m":-3.0}])"), std::string::npos)
      << body;
  // The envelope in OpenAI's order.
  EXPECT_EQ(body.rfind(R"({"id":)", 0), 0u) << body;
}

TEST(OpenAiResponseTest, SeveralChoicesAreIndexedInOrder) {
  const std::vector<Choice> choices = {{.text = "a", .finish_reason = "stop"},
                                       {.text = "bc", .finish_reason = "length"}};
  const json j = CompletionJson(kTextMeta, choices, {.prompt_tokens = 2, .completion_tokens = 5});
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["text"], "bc");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  EXPECT_EQ(ChunkJson(kChatMeta, {.index = 3, .text = "x"})["choices"][0]["index"], 3);
}

TEST(OpenAiResponseTest, ChatChunks) {
  const json first = ChunkJson(kChatMeta, {.role = true});
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(first.contains("usage"));
  const json text = ChunkJson(kChatMeta, {.text = "lo", .with_usage_null = true});
  EXPECT_EQ(text["choices"][0]["delta"], (json{{"content", "lo"}}));
  EXPECT_TRUE(text.contains("usage"));
  EXPECT_TRUE(text["usage"].is_null());
  const json last = ChunkJson(kChatMeta, {.finish_reason = "length"});
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const json usage = UsageChunkJson(kChatMeta, {.prompt_tokens = 3, .completion_tokens = 4});
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 7);
}

TEST(OpenAiResponseTest, TextChunks) {
  const json chunk = ChunkJson(kTextMeta, {.text = "x"});
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "x");
}

TEST(OpenAiResponseTest, SseFraming) {
  EXPECT_EQ(SseEvent(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Newlines inside text are escaped by JSON, so one event is always one data line.
  const std::string event = SseEvent(ChunkJson(kTextMeta, {.text = "a\nb\r\n\nc"}));
  EXPECT_EQ(event.find('\n'), event.size() - 2);
  EXPECT_EQ(kSseKeepAlive.front(), ':');
}

TEST(OpenAiResponseTest, DumpNeverThrows) {
  EXPECT_EQ(Dump(json("\xff")), "\"\xef\xbf\xbd\"");  // replaced, not thrown
}

TEST(OpenAiResponseTest, ResponseIdsAreDistinct) {
  EXPECT_TRUE(ResponseId(Endpoint::kChatCompletions, 1, 9).starts_with("chatcmpl-"));
  EXPECT_TRUE(ResponseId(Endpoint::kCompletions, 1, 9).starts_with("cmpl-"));
  EXPECT_NE(ResponseId(Endpoint::kCompletions, 1, 9), ResponseId(Endpoint::kCompletions, 2, 9));
  EXPECT_NE(ResponseId(Endpoint::kCompletions, 1, 9), ResponseId(Endpoint::kCompletions, 1, 10));
}

TEST(ApiErrorTest, Shape) {
  const json j = BadField("max_tokens", "must be at least 1").ToJson();
  EXPECT_EQ(j, (json{{"error",
                      {{"message", "max_tokens: must be at least 1"},
                       {"type", "invalid_request_error"},
                       {"param", "max_tokens"},
                       {"code", nullptr}}}}));
  // The engine's check names the field first; the server reports it as `param`.
  const ApiError oov =
      BadFieldMessage("prompt: token id 200 at position 1 is outside the vocabulary [0, 97)");
  EXPECT_EQ(oov.status, 400);
  EXPECT_EQ(oov.param, "prompt");
  EXPECT_EQ(oov.message, "prompt: token id 200 at position 1 is outside the vocabulary [0, 97)");
  EXPECT_TRUE(BadFieldMessage("the prompt: and more").param.empty());
  EXPECT_TRUE(BadFieldMessage("no field here").param.empty());
  const ApiError busy = Unavailable("overloaded", "full");
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.ToJson()["error"]["code"], "overloaded");
  EXPECT_TRUE(busy.ToJson()["error"]["param"].is_null());
}

}  // namespace
}  // namespace dscale::server
