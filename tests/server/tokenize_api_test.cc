// vLLM's /tokenize and /detokenize: the prompt a completions or chat body becomes, token for token
// as the generation routes make it, the text of ids, and refusals naming the field.

#include "server/tokenize_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_test_util.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;
using testing::ServerTokenizer;
using testing::TinyModelInfo;

json Tokenize(const std::string& body) {
  std::string reply;
  const std::optional<ApiError> error =
      TokenizeReply(body, ServerTokenizer(), TinyModelInfo(), &reply);
  EXPECT_FALSE(error) << body << " → " << (error ? error->message : "");
  return json::parse(reply);
}

ApiError Refusal(bool tokenize, const std::string& body) {
  std::string reply;
  const std::optional<ApiError> error =
      tokenize ? TokenizeReply(body, ServerTokenizer(), TinyModelInfo(), &reply)
               : DetokenizeReply(body, ServerTokenizer(), TinyModelInfo(), &reply);
  EXPECT_TRUE(error) << body;
  return error.value_or(ApiError{});
}

TEST(TokenizeApiTest, APromptsTokensAsTheGenerationRoutesMakeThem) {
  const json text =
      Tokenize(R"({"model": "tiny", "prompt": "Hello there", "return_token_strs": true})");
  const std::vector<int32_t> want = ServerTokenizer().Encode("Hello there").value();
  EXPECT_EQ(text["tokens"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(text["count"], want.size());
  EXPECT_EQ(text["max_model_len"], TinyModelInfo().context_length);
  ASSERT_EQ(text["token_strs"].size(), want.size());
  std::string joined;
  for (const json& s : text["token_strs"]) joined += s.get<std::string>();
  EXPECT_EQ(joined, "Hello there");
  EXPECT_TRUE(Tokenize(R"({"model": "tiny", "prompt": [5, 6]})")["token_strs"].is_null());
  EXPECT_EQ(Tokenize(R"({"model": "tiny", "prompt": [5, 6]})")["tokens"], json::array({5, 6}));

  // A chat body: the chat format's prompt, as the chat route encodes it.
  const json chat =
      Tokenize(R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]})");
  std::vector<int32_t> ids;
  ASSERT_FALSE(EncodeChat({{.role = "user", .content = "Hi"}}, ServerTokenizer(), &ids));
  EXPECT_EQ(chat["tokens"].get<std::vector<int32_t>>(), ids);
}

TEST(TokenizeApiTest, DetokenizeGivesTheText) {
  const std::vector<int32_t> ids = ServerTokenizer().Encode("Hello there").value();
  std::string reply;
  ASSERT_FALSE(DetokenizeReply(json{{"model", "tiny"}, {"tokens", ids}}.dump(), ServerTokenizer(),
                               TinyModelInfo(), &reply));
  EXPECT_EQ(json::parse(reply)["prompt"], "Hello there");
}

TEST(TokenizeApiTest, RefusalsNameTheField) {
  EXPECT_EQ(Refusal(true, R"({"model": "other", "prompt": "x"})").status, 404);
  EXPECT_EQ(Refusal(true, R"({"model": "tiny", "prompt": "x", "return_token_strs": 1})").param,
            "return_token_strs");
  EXPECT_EQ(Refusal(true, R"({"model": "tiny", "prompt": "x", "nope": 1})").param, "nope");
  EXPECT_EQ(Refusal(true, R"({"model": "tiny"})").param, "prompt");
  EXPECT_EQ(Refusal(false, R"({"model": "other", "tokens": [1]})").status, 404);
  EXPECT_EQ(Refusal(false, R"({"model": "tiny", "tokens": [1, 99999]})").param, "tokens[1]");
  EXPECT_EQ(Refusal(false, R"({"model": "tiny", "tokens": [1, -1]})").param, "tokens[1]");
  EXPECT_EQ(Refusal(false, R"({"model": "tiny", "tokens": "1"})").param, "tokens");
  EXPECT_EQ(Refusal(false, R"({"model": "tiny", "tokens": [1], "extra": 1})").param, "extra");
}

}  // namespace
}  // namespace dscale::server
