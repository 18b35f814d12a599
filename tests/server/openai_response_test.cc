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
  EXPECT_EQ(j["usage"],
            (json{{"prompt_tokens", 5}, {"completion_tokens", 2}, {"total_tokens", 7}}));
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
