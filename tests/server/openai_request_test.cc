// Request parsing and validation: every class of bad input maps to a status code and an
// OpenAI-style error naming the field.

#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <cctype>
#include <ostream>
#include <string>

#include "spec/json_grammar.h"

namespace dscale::server {
namespace {

constexpr Endpoint kCompletions = Endpoint::kCompletions;
constexpr Endpoint kChat = Endpoint::kChatCompletions;

ApiRequest ParseOk(Endpoint endpoint, const std::string& body) {
  ApiRequest request;
  const std::optional<ApiError> error = ParseApiRequest(endpoint, body, &request);
  EXPECT_FALSE(error.has_value()) << body << " → " << (error ? error->message : "");
  return request;
}

ApiError ParseFails(Endpoint endpoint, const std::string& body) {
  ApiRequest request;
  const std::optional<ApiError> error = ParseApiRequest(endpoint, body, &request);
  EXPECT_TRUE(error.has_value()) << body;
  return error.value_or(ApiError{});
}

TEST(OpenAiRequestTest, CompletionWithEveryField) {
  const ApiRequest r = ParseOk(
      kCompletions,
      R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
          "top_k": 40, "seed": 12, "stop": ["a", "b"], "n": 1, "stream": true,
          "stream_options": {"include_usage": true}, "user": "u", "presence_penalty": 0,
          "frequency_penalty": 0.0, "logit_bias": {}, "logprobs": null, "echo": false,
          "best_of": 1, "suffix": null, "metadata": null, "ignore_eos": true})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_FALSE(r.prompt_is_ids);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.5f);
  EXPECT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.seed, 12u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.ignore_eos);
}

TEST(OpenAiRequestTest, Defaults) {
  const ApiRequest r = ParseOk(kCompletions, R"({"model": "m", "prompt": "x"})");
  EXPECT_FALSE(r.max_tokens.has_value());
  // Sampling fields left out stay unset: the model's defaults or OpenAI's fill them
  // (PrepareRequest).
  EXPECT_FALSE(r.temperature.has_value());
  EXPECT_FALSE(r.top_p.has_value());
  EXPECT_FALSE(r.top_k.has_value());
  EXPECT_FALSE(r.min_p.has_value());
  EXPECT_FALSE(r.repetition_penalty.has_value());
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.stream);
  // Nulls mean "the default".
  const ApiRequest n = ParseOk(
      kCompletions, R"({"model": "m", "prompt": "x", "max_tokens": null, "temperature": null,
                        "top_p": null, "seed": null, "stop": null, "stream": null, "n": null})");
  EXPECT_FALSE(n.max_tokens.has_value());
  EXPECT_TRUE(n.stop.empty());
}

TEST(OpenAiRequestTest, ChoicesUpToTheBound) {
  EXPECT_EQ(ParseOk(kCompletions, R"({"model": "m", "prompt": "x"})").n, 1);
  EXPECT_EQ(ParseOk(kCompletions, R"({"model": "m", "prompt": "x", "n": 3})").n, 3);
  EXPECT_EQ(ParseOk(kCompletions, R"({"model": "m", "prompt": "x", "n": 16})").n, kMaxChoices);
}

// Clients that serialise every number as a float send 2.0 for 2: an integral float is that
// integer, under the same range checks; a fractional one is still refused (BadRequestTest).
TEST(OpenAiRequestTest, IntegralFloatsAreIntegers) {
  const ApiRequest r = ParseOk(kCompletions, R"({"model": "m", "prompt": [1.0, 2e0], "n": 2.0,
      "max_tokens": 5.0, "seed": 7.0, "top_k": 4.0, "logprobs": 3.0, "best_of": 1.0})");
  EXPECT_EQ(r.prompt_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.top_k, 4);
  EXPECT_EQ(r.top_logprobs, 3);
  const ApiRequest chat = ParseOk(kChat, R"({"model": "m", "logprobs": true,
      "top_logprobs": 2.0, "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(chat.top_logprobs, 2);
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": "x", "n": 17.0})").param, "n");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": "x", "max_tokens": 3e9})").param,
            "max_tokens");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": "x", "seed": 1e300})").param,
            "seed");
}

TEST(OpenAiRequestTest, PenaltiesBiasAndMinP) {
  const ApiRequest off = ParseOk(kCompletions, R"({"model": "m", "prompt": "x",
      "presence_penalty": null, "frequency_penalty": 0, "repetition_penalty": 1.0,
      "logit_bias": {}, "min_p": 0})");
  EXPECT_TRUE(off.rules.empty());
  EXPECT_EQ(off.min_p, 0.0f);
  EXPECT_EQ(off.repetition_penalty, 1.0f);
  const ApiRequest on = ParseOk(kChat, R"({"model": "m",
      "messages": [{"role": "user", "content": "x"}], "presence_penalty": -2,
      "frequency_penalty": 1.5, "repetition_penalty": 1.3, "min_p": 0.05,
      "logit_bias": {"50256": -100, "7": 2.5, "0012": 100}})");
  EXPECT_FLOAT_EQ(on.rules.presence_penalty, -2.0f);
  EXPECT_FLOAT_EQ(on.rules.frequency_penalty, 1.5f);
  EXPECT_EQ(on.repetition_penalty, 1.3f);
  EXPECT_EQ(on.min_p, 0.05f);
  // Ascending by token, as the engine's rules hold them.
  const std::vector<std::pair<int32_t, float>> bias = {{7, 2.5f}, {12, 100.0f}, {50256, -100.0f}};
  EXPECT_EQ(on.rules.logit_bias, bias);
}

TEST(OpenAiRequestTest, MinTokensAndStopTokenIds) {
  const ApiRequest r = ParseOk(kCompletions, R"({"model": "m", "prompt": "x", "min_tokens": 5,
      "stop_token_ids": [7, 2.0]})");
  EXPECT_EQ(r.rules.min_tokens, 5);
  EXPECT_EQ(r.stop_token_ids, (std::vector<int64_t>{7, 2}));
  const ApiRequest none = ParseOk(kChat, R"({"model": "m", "min_tokens": null,
      "stop_token_ids": null, "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(none.rules.min_tokens, 0);
  EXPECT_TRUE(none.stop_token_ids.empty());
}

TEST(OpenAiRequestTest, LogprobsInEachEndpointsForm) {
  const ApiRequest none = ParseOk(kCompletions, R"({"model": "m", "prompt": "x"})");
  EXPECT_FALSE(none.logprobs);
  const ApiRequest zero = ParseOk(kCompletions, R"({"model": "m", "prompt": "x", "logprobs": 0})");
  EXPECT_TRUE(zero.logprobs);
  EXPECT_EQ(zero.top_logprobs, 0);
  const ApiRequest five = ParseOk(kCompletions, R"({"model": "m", "prompt": "x", "logprobs": 5})");
  EXPECT_TRUE(five.logprobs);
  EXPECT_EQ(five.top_logprobs, 5);
  EXPECT_FALSE(
      ParseOk(kCompletions, R"({"model": "m", "prompt": "x", "logprobs": false})").logprobs);
  const std::string chat = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  const ApiRequest on = ParseOk(kChat, chat + R"("logprobs": true, "top_logprobs": 20})");
  EXPECT_TRUE(on.logprobs);
  EXPECT_EQ(on.top_logprobs, 20);
  const ApiRequest off = ParseOk(kChat, chat + R"("logprobs": false, "top_logprobs": 0})");
  EXPECT_FALSE(off.logprobs);
}

TEST(OpenAiRequestTest, PromptForms) {
  EXPECT_EQ(ParseOk(kCompletions, R"({"model": "m", "prompt": ["one"]})").prompt_text, "one");
  const ApiRequest ids = ParseOk(kCompletions, R"({"model": "m", "prompt": [1, 2, 3]})");
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ParseOk(kCompletions, R"({"model": "m", "prompt": [[4, 5]]})").prompt_ids,
            (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": []})").param, "prompt");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": [1, "x"]})").param, "prompt[1]");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": [1.5]})").param, "prompt[0]");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": 5})").param, "prompt");
  EXPECT_EQ(ParseFails(kCompletions, R"({"model": "m", "prompt": {"a": 1}})").param, "prompt");
}

TEST(OpenAiRequestTest, ChatMessages) {
  const ApiRequest r = ParseOk(kChat, R"({"model": "m", "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                     {"type": "text", "text": "there"}], "name": "ann"},
        {"role": "assistant", "content": null},
        {"role": "user", "content": "Again"}], "max_completion_tokens": 9})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_FALSE(r.enable_thinking);
  // chat_template_kwargs, as vLLM and SGLang take it: enable_thinking only.
  const std::string chat = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  EXPECT_TRUE(ParseOk(kChat, chat + R"("chat_template_kwargs": {"enable_thinking": true}})")
                  .enable_thinking);
  EXPECT_FALSE(ParseOk(kChat, chat + R"("chat_template_kwargs": null})").enable_thinking);
}

// "[0, 0, ...]" with n zeros.
std::string ZerosArray(int n) {
  std::string text = "[";
  for (int i = 0; i < n; ++i) text += i == 0 ? "0" : ", 0";
  return text + "]";
}

struct BadCase {
  Endpoint endpoint;
  std::string body;
  int status;
  std::string param;  // "" for null
};

// Short, readable test names: "<index>_<param>".
void PrintTo(const BadCase& c, std::ostream* os) { *os << (c.param.empty() ? "body" : c.param); }

std::string CaseName(const ::testing::TestParamInfo<BadCase>& info) {
  std::string name = std::to_string(info.index) + "_" +
                     (info.param.param.empty() ? std::string("body") : info.param.param);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

class BadRequestTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadRequestTest, NamesTheField) {
  const BadCase& c = GetParam();
  const ApiError e = ParseFails(c.endpoint, c.body);
  EXPECT_EQ(e.status, c.status) << c.body << " → " << e.message;
  EXPECT_EQ(e.param, c.param) << c.body << " → " << e.message;
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_FALSE(e.message.empty());
  if (!c.param.empty()) {
    EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
  }
  // The JSON shape clients parse.
  const nlohmann::json j = e.ToJson();
  ASSERT_TRUE(j.contains("error"));
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(c.param.empty() ? j["error"]["param"].is_null() : j["error"]["param"] == c.param);
  EXPECT_TRUE(j["error"].contains("code"));
}

const std::string kOk = R"("model": "m", "prompt": "x")";
const std::string kChatOk = R"("model": "m", "messages": [{"role": "user", "content": "x"}])";

INSTANTIATE_TEST_SUITE_P(
    Inputs, BadRequestTest,
    ::testing::Values(
        // Not a JSON object.
        BadCase{kCompletions, "", 400, ""}, BadCase{kCompletions, "{", 400, ""},
        BadCase{kCompletions, R"({"model": "m", "prompt": "x")", 400, ""},
        BadCase{kCompletions, "[1, 2]", 400, ""}, BadCase{kCompletions, "null", 400, ""},
        BadCase{kCompletions, "\"text\"", 400, ""},
        BadCase{kCompletions, "{\"model\": \"m\", \"prompt\": \"\xff\xfe\"}", 400, ""},
        BadCase{kCompletions, "{\"model\": \"m\", \"prompt\": \"\\ud800\"}", 400, ""},
        BadCase{kCompletions, std::string(100, '[') + std::string(100, ']'), 400, ""},
        // Required fields.
        BadCase{kCompletions, R"({"prompt": "x"})", 400, "model"},
        BadCase{kCompletions, R"({"model": "m"})", 400, "prompt"},
        BadCase{kChat, R"({"model": "m"})", 400, "messages"},
        BadCase{kCompletions, R"({"model": "", "prompt": "x"})", 400, "model"},
        BadCase{kCompletions, R"({"model": 7, "prompt": "x"})", 400, "model"},
        // Wrong types and ranges.
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": "5"})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": 5.5})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": 0})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": -3})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": 1e300})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": 99999999999999999999999})", 400,
                "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": 18446744073709551615})", 400,
                "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": 4294967296})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "max_tokens": true})", 400, "max_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "temperature": -0.1})", 400, "temperature"},
        BadCase{kCompletions, "{" + kOk + R"(, "temperature": 2.5})", 400, "temperature"},
        BadCase{kCompletions, "{" + kOk + R"(, "temperature": "hot"})", 400, "temperature"},
        BadCase{kCompletions, "{" + kOk + R"(, "top_p": 0})", 400, "top_p"},
        BadCase{kCompletions, "{" + kOk + R"(, "top_p": 1.01})", 400, "top_p"},
        BadCase{kCompletions, "{" + kOk + R"(, "top_k": -2})", 400, "top_k"},
        BadCase{kCompletions, "{" + kOk + R"(, "top_k": 2.5})", 400, "top_k"},
        BadCase{kCompletions, "{" + kOk + R"(, "seed": 1.5})", 400, "seed"},
        BadCase{kCompletions, "{" + kOk + R"(, "seed": "1"})", 400, "seed"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop": 3})", 400, "stop"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop": ""})", 400, "stop"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop": ["a", 1]})", 400, "stop[1]"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop": ["a", "b", "c", "d", "e"]})", 400, "stop"},
        BadCase{kCompletions, "{" + kOk + R"(, "stream": "yes"})", 400, "stream"},
        BadCase{kCompletions, "{" + kOk + R"(, "ignore_eos": 1})", 400, "ignore_eos"},
        BadCase{kCompletions, "{" + kOk + R"(, "stream_options": {"include_usage": true}})", 400,
                "stream_options"},
        BadCase{kCompletions, "{" + kOk + R"(, "stream": true, "stream_options": 1})", 400,
                "stream_options"},
        BadCase{kCompletions,
                "{" + kOk + R"(, "stream": true, "stream_options": {"include_usage": 1}})", 400,
                "stream_options.include_usage"},
        // Unsupported features.
        BadCase{kCompletions, "{" + kOk + R"(, "n": 17})", 400, "n"},
        BadCase{kCompletions, "{" + kOk + R"(, "n": 0})", 400, "n"},
        BadCase{kChat, "{" + kChatOk + R"(, "n": 1.5})", 400, "n"},
        BadCase{kCompletions, "{" + kOk + R"(, "n": "1"})", 400, "n"},
        BadCase{kCompletions, "{" + kOk + R"(, "best_of": 3})", 400, "best_of"},
        BadCase{kCompletions, "{" + kOk + R"(, "echo": true})", 400, "echo"},
        BadCase{kCompletions, "{" + kOk + R"(, "logprobs": 21})", 400, "logprobs"},
        BadCase{kCompletions, "{" + kOk + R"(, "logprobs": -1})", 400, "logprobs"},
        BadCase{kCompletions, "{" + kOk + R"(, "logprobs": true})", 400, "logprobs"},
        BadCase{kCompletions, "{" + kOk + R"(, "top_logprobs": 2})", 400, "top_logprobs"},
        BadCase{kCompletions, "{" + kOk + R"(, "suffix": "end"})", 400, "suffix"},
        BadCase{kCompletions, "{" + kOk + R"(, "presence_penalty": 2.5})", 400, "presence_penalty"},
        BadCase{kChat, "{" + kChatOk + R"(, "frequency_penalty": "1"})", 400, "frequency_penalty"},
        BadCase{kCompletions, "{" + kOk + R"(, "repetition_penalty": 0})", 400,
                "repetition_penalty"},
        BadCase{kCompletions, "{" + kOk + R"(, "repetition_penalty": -1})", 400,
                "repetition_penalty"},
        BadCase{kCompletions, "{" + kOk + R"(, "repetition_penalty": 1e-30})", 400,
                "repetition_penalty"},
        BadCase{kCompletions, "{" + kOk + R"(, "repetition_penalty": 1000})", 400,
                "repetition_penalty"},
        BadCase{kCompletions, "{" + kOk + R"(, "min_p": 1.5})", 400, "min_p"},
        BadCase{kCompletions, "{" + kOk + R"(, "min_tokens": -1})", 400, "min_tokens"},
        BadCase{kChat, "{" + kChatOk + R"(, "min_tokens": 1.5})", 400, "min_tokens"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop_token_ids": 5})", 400, "stop_token_ids"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop_token_ids": [1, -1]})", 400,
                "stop_token_ids[1]"},
        BadCase{kCompletions, "{" + kOk + R"(, "stop_token_ids": )" + ZerosArray(65) + "}", 400,
                "stop_token_ids"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": [1]})", 400, "logit_bias"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": {"5": 101}})", 400, "logit_bias.5"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": {"5": null}})", 400, "logit_bias.5"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": {"-5": 1}})", 400, "logit_bias.-5"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": {"five": 1}})", 400,
                "logit_bias.five"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": {"9999999999": 1}})", 400,
                "logit_bias.9999999999"},
        BadCase{kCompletions, "{" + kOk + R"(, "logit_bias": {"5": 1, "05": 2}})", 400,
                "logit_bias"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "function"}]})", 400,
                "tools[0].function"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": {"type": "function"}})", 400, "tools"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "retrieval", "function": {}}]})",
                400, "tools[0].type"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "function", "function": {}}]})", 400,
                "tools[0].function.name"},
        BadCase{
            kChat,
            "{" + kChatOk + R"(, "tools": [{"type": "function", "function": {"name": "a b"}}]})",
            400, "tools[0].function.name"},
        BadCase{kChat,
                "{" + kChatOk + R"(, "tools": [{"type": "function", "function": {"name": )" + "\"" +
                    std::string(65, 'f') + "\"}}]}",
                400, "tools[0].function.name"},
        BadCase{
            kChat,
            "{" + kChatOk +
                R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": 1}}]})",
            400, "tools[0].function.parameters"},
        BadCase{
            kChat,
            "{" + kChatOk +
                R"(, "tools": [{"type": "function", "function": {"name": "f", "descr": "x"}}]})",
            400, "tools[0].function.descr"},
        BadCase{kChat,
                "{" + kChatOk + R"(, "tools": [{"type": "function", "function": {"name": "f"},
                    "extra": 1}]})",
                400, "tools[0].extra"},
        BadCase{kChat, "{" + kChatOk + R"(, "tool_choice": "required"})", 400, "tool_choice"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "function", "function":
                    {"name": "f"}}], "tool_choice": {"type": "function", "function":
                    {"name": "g"}}})",
                400, "tool_choice.function.name"},
        BadCase{kChat, "{" + kChatOk + R"(, "tool_choice": {"type": "function"}})", 400,
                "tool_choice.function"},
        BadCase{kChat, "{" + kChatOk + R"(, "tool_choice": "any"})", 400, "tool_choice"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "function", "function":
                    {"name": "f", "parameters": {"type": "object", "properties": {"a":
                    {"type": "string", "pattern": "\\bx"}}}}}], "tool_choice": "required"})",
                400, "tools[0].function.parameters.properties.a.pattern"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "function", "function":
                    {"name": "f"}}, {"type": "function", "function": {"name": "f"}}],
                    "tool_choice": "required"})",
                400, "tools[1].function.name"},
        BadCase{kChat, "{" + kChatOk + R"(, "tools": [{"type": "function", "function":
                    {"name": "f"}}], "tool_choice": "required", "response_format":
                    {"type": "json_object"}})",
                400, "response_format"},
        BadCase{kChat, "{" + kChatOk + R"(, "separate_reasoning": 1})", 400, "separate_reasoning"},
        BadCase{kChat, "{" + kChatOk + R"(, "thinking_token_budget": -1})", 400,
                "thinking_token_budget"},
        BadCase{kChat, "{" + kChatOk + R"(, "reasoning_effort": "max"})", 400, "reasoning_effort"},
        BadCase{kChat, "{" + kChatOk + R"(, "prompt_cache_key": 5})", 400, "prompt_cache_key"},
        BadCase{
            kChat,
            "{" + kChatOk +
                R"(, "reasoning_effort": "none", "chat_template_kwargs": {"enable_thinking": true}})",
            400, "reasoning_effort"},
        BadCase{kChat, "{" + kChatOk + R"(, "thinking_token_budget": 1.5})", 400,
                "thinking_token_budget"},
        BadCase{kCompletions, "{" + kOk + R"(, "thinking_token_budget": 5})", 400,
                "thinking_token_budget"},
        BadCase{kCompletions, "{" + kOk + R"(, "separate_reasoning": true})", 400,
                "separate_reasoning"},
        BadCase{
            kChat,
            "{" + kChatOk + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})",
            400, "tool_choice"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_schema"}})", 400,
                "response_format.json_schema"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_schema",
                    "json_schema": {"name": "x", "schema": [1]}}})",
                400, "response_format.json_schema.schema"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_schema",
                    "json_schema": {"name": "x", "strict": "yes", "schema": {}}}})",
                400, "response_format.json_schema.strict"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_schema",
                    "json_schema": {"name": "x", "format": {}}}})",
                400, "response_format.json_schema.format"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "object", "properties":
                    {"a": {"type": "string", "maxLength": 3.5}}}}}})",
                400, "response_format.json_schema.schema.properties.a.maxLength"},
        BadCase{kChat, "{" + kChatOk + R"(, "structured_outputs": {"grammar": "root ::= x"}})", 400,
                "structured_outputs.grammar"},
        BadCase{kChat,
                "{" + kChatOk + R"(, "structured_outputs": {"regex": "a", "choice": ["a"]}})", 400,
                "structured_outputs"},
        BadCase{kChat, "{" + kChatOk + R"(, "structured_outputs": {"choice": ["a", 1]}})", 400,
                "structured_outputs.choice"},
        BadCase{kCompletions, R"({"model": "m", "prompt": "x", "structured_outputs":
                    {"regex": "\\1"}})",
                400, "structured_outputs.regex"},
        BadCase{kChat, "{" + kChatOk + R"(, "structured_outputs": {"json": {"type": "object",
                    "properties": {"a": {"not": {}}}}}})",
                400, "structured_outputs.json.properties.a.not"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_object"},
                    "structured_outputs": {"regex": "a"}})",
                400, "structured_outputs"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "string"}}}})",
                400, "response_format.json_schema.schema"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "yaml"}})", 400,
                "response_format.type"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": "json_object"})", 400,
                "response_format"},
        BadCase{kChat, "{" + kChatOk + R"(, "response_format": {"type": "json_object", "x": 1}})",
                400, "response_format.x"},
        BadCase{kChat, "{" + kChatOk + R"(, "chat_template_kwargs": [true]})", 400,
                "chat_template_kwargs"},
        BadCase{kChat, "{" + kChatOk + R"(, "chat_template_kwargs": {"enable_thinking": 1}})", 400,
                "chat_template_kwargs.enable_thinking"},
        BadCase{kChat, "{" + kChatOk + R"(, "chat_template_kwargs": {"tools": []}})", 400,
                "chat_template_kwargs.tools"},
        BadCase{kCompletions, "{" + kOk + R"(, "chat_template_kwargs": {}})", 400,
                "chat_template_kwargs"},
        BadCase{kChat, "{" + kChatOk + R"(, "logprobs": 1})", 400, "logprobs"},
        BadCase{kChat, "{" + kChatOk + R"(, "top_logprobs": 2})", 400, "top_logprobs"},
        BadCase{kChat, "{" + kChatOk + R"(, "logprobs": true, "top_logprobs": 21})", 400,
                "top_logprobs"},
        // Unknown fields, and fields of the other endpoint.
        BadCase{kCompletions, "{" + kOk + R"(, "foo": {"bar": [1, 2]}})", 400, "foo"},
        BadCase{kCompletions, "{" + kOk + R"(, "messages": []})", 400, "messages"},
        BadCase{kChat, "{" + kChatOk + R"(, "prompt": "x"})", 400, "prompt"},
        // Messages.
        BadCase{kChat, R"({"model": "m", "messages": []})", 400, "messages"},
        BadCase{kChat, R"({"model": "m", "messages": "hi"})", 400, "messages"},
        BadCase{kChat, R"({"model": "m", "messages": [5]})", 400, "messages[0]"},
        BadCase{kChat, R"({"model": "m", "messages": [{"content": "x"}]})", 400,
                "messages[0].role"},
        BadCase{kChat, R"({"model": "m", "messages": [{"role": "king", "content": "x"}]})", 400,
                "messages[0].role"},
        BadCase{kChat, R"({"model": "m", "messages": [{"role": "user"}]})", 400,
                "messages[0].content"},
        BadCase{kChat, R"({"model": "m", "messages": [{"role": "user", "content": null}]})", 400,
                "messages[0].content"},
        BadCase{kChat, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", 400,
                "messages[0].content"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "x"}}]}]})",
                400, "messages[0].content[0].type"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "text"}]}]})",
                400, "messages[0].content[0].text"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "user", "content": "x", "mood": 1}]})", 400,
                "messages[0].mood"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "assistant", "content": "x",
                    "tool_calls": [{"id": "1"}]}]})",
                400, "messages[0].tool_calls[0].function"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "user", "content": "x",
                    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]})",
                400, "messages[0].tool_calls"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "assistant", "content": null,
                    "tool_calls": [{"function": {"name": "f", "arguments": 5}}]}]})",
                400, "messages[0].tool_calls[0].function.arguments"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "assistant", "content": null,
                    "tool_calls": [{"function": {"name": "f"}}]}]})",
                400, "messages[0].tool_calls[0].function.arguments"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "assistant", "content": null,
                    "tool_calls": [{"type": "code", "function": {"name": "f", "arguments": "{}"}}]}]})",
                400, "messages[0].tool_calls[0].type"},
        BadCase{kChat,
                R"({"model": "m", "messages": [{"role": "assistant", "content": null,
                    "tool_calls": {"function": {"name": "f", "arguments": "{}"}}}]})",
                400, "messages[0].tool_calls"}),
    CaseName);

// Tools keep the members in the order sent, written as the chat template's tojson writes them;
// a history's calls keep arguments sent as text as they are, and write an object's.
TEST(OpenAiRequestTest, ToolsAndAHistoryOfCalls) {
  const ApiRequest r = ParseOk(kChat, R"({"model": "m", "tools": [
      {"function": {"parameters": {"type": "object", "properties": {"b": {}, "a": {}}},
                    "name": "get_weather", "description": "Température"}, "type": "function"},
      {"type": "function", "function": {"name": "now", "strict": true}}],
    "messages": [{"role": "user", "content": "Q"},
                 {"role": "assistant", "content": null, "tool_calls": [
                     {"id": "call_1", "type": "function",
                      "function": {"name": "get_weather", "arguments": "{\"b\":1}"}},
                     {"function": {"name": "now", "arguments": {"z": 1.0, "a": [true]}}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "18C"}]})");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0],
            R"({"function": {"parameters": {"type": "object", "properties": {"b": {}, "a": {}}}, )"
            R"("name": "get_weather", "description": "Température"}, "type": "function"})");
  EXPECT_EQ(r.tools[1], R"({"type": "function", "function": {"name": "now", "strict": true}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "");
  ASSERT_EQ(r.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"b":1})");
  EXPECT_EQ(r.messages[1].tool_calls[1].arguments, R"({"z": 1.0, "a": [true]})");
  EXPECT_EQ(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                                  "tool_choice": "none"})")
                .tool_choice,
            ToolChoice::kNone);
  EXPECT_TRUE(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}]})")
                  .separate_reasoning);
  EXPECT_EQ(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                                 "response_format": {"type": "json_object"}})")
                .rules.json_schema,
            JsonSchema::AnyObject());
  // Completions take it too, as vLLM's do.
  EXPECT_EQ(ParseOk(kCompletions, R"({"model": "m", "prompt": "Q",
                                      "response_format": {"type": "json_object"}})")
                .rules.json_schema,
            JsonSchema::AnyObject());
  EXPECT_EQ(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                                  "response_format": {"type": "text"}})")
                .rules.json_schema,
            nullptr);
  {
    // The schema is compiled with its properties in the order sent (not the parser's sorted
    // order): "b" before "a".
    const ApiRequest r = ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user",
        "content": "Q"}], "response_format": {"type": "json_schema", "json_schema": {"name": "n",
        "strict": true, "schema": {"type": "object", "properties": {"b": {"type": "integer"},
        "a": {"type": "string"}}, "required": ["b", "a"]}}}})");
    ASSERT_NE(r.rules.json_schema, nullptr);
    JsonGrammar in_order(*r.rules.json_schema);
    EXPECT_TRUE(in_order.Feed(R"({"b": 1, "a": "x"})") && in_order.complete());
    JsonGrammar sorted(*r.rules.json_schema);
    EXPECT_FALSE(sorted.Feed(R"({"a": "x", "b": 1})"));
  }
  {
    // vLLM's structured_outputs: a schema (in the order sent), a regex, a choice.
    const ApiRequest json = ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user",
        "content": "Q"}], "structured_outputs": {"json": {"type": "object", "properties": {"b":
        {"type": "integer"}, "a": {"type": "string"}}, "required": ["b", "a"]}}})");
    ASSERT_NE(json.rules.json_schema, nullptr);
    JsonGrammar in_order(*json.rules.json_schema);
    EXPECT_TRUE(in_order.Feed(R"({"b": 1, "a": "x"})") && in_order.complete());
    const ApiRequest regex = ParseOk(kCompletions, R"({"model": "m", "prompt": "Q",
        "structured_outputs": {"regex": "\\w+@\\w+\\.com\n"}})");
    ASSERT_NE(regex.rules.json_schema, nullptr);
    JsonGrammar address(*regex.rules.json_schema);
    EXPECT_TRUE(address.Feed("alan@enigma.com\n") && address.complete());
    const ApiRequest choice = ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user",
        "content": "Q"}], "structured_outputs": {"choice": ["positive", "negative"]}})");
    ASSERT_NE(choice.rules.json_schema, nullptr);
    JsonGrammar negative(*choice.rules.json_schema);
    EXPECT_TRUE(negative.Feed("negative") && negative.complete());
  }
  EXPECT_FALSE(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                                  "separate_reasoning": false})")
                   .separate_reasoning);
  EXPECT_EQ(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                               "thinking_token_budget": 0})")
                .thinking_token_budget,
            0);
  // OpenAI's reasoning_effort turns thinking on, or off with "none"; as chat_template_kwargs.
  for (const auto& [effort, on] : {std::pair{"low", true}, {"high", true}, {"none", false}}) {
    const std::string body = std::string(R"j({"model": "m", "messages": [{"role": "user", )j") +
                             R"j("content": "Q"}], "reasoning_effort": ")j" + effort + "\"}";
    EXPECT_EQ(ParseOk(kChat, body).enable_thinking, on) << effort;
  }
  // OpenAI's caching, safety and tier hints are accepted (the prefix cache needs no key).
  ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                     "prompt_cache_key": "k", "safety_identifier": "s", "service_tier": "auto"})");
  EXPECT_TRUE(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                                 "chat_template_kwargs": {"enable_thinking": true},
                                 "reasoning_effort": "medium"})")
                  .enable_thinking);
  EXPECT_TRUE(ParseOk(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "Q"}],
                                 "tools": null, "tool_choice": "auto"})")
                  .tools.empty());
  // A key sent twice: the last counts, in both readings of the body.
  const ApiRequest twice = ParseOk(kChat, R"({"model": "m",
      "tools": [{"type": "function", "function": {"name": "a"}}],
      "messages": [{"role": "user", "content": "Q"}],
      "tools": [{"type": "function", "function": {"name": "b"}},
                {"type": "function", "function": {"name": "c"}}]})");
  ASSERT_EQ(twice.tools.size(), 2u);
  EXPECT_EQ(twice.tools[1], R"({"type": "function", "function": {"name": "c"}})");
}

// A forced tool_choice holds the answer to calls: the named function's parameters, or an array
// of {"name", "parameters"} objects told apart by the name, references inside the parameters
// moved with them.
TEST(OpenAiRequestTest, AForcedToolChoiceHoldsTheAnswerToCalls) {
  const std::string tools = R"("tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/$defs/Unit"}},
          "required": ["city"], "$defs": {"Unit": {"enum": ["C", "F"]}}}}},
      {"type": "function", "function": {"name": "now"}}])";
  const auto held = [&](const std::string& choice, std::string_view text) {
    const ApiRequest r =
        ParseOk(kChat, "{" + kChatOk + ", " + tools + R"(, "tool_choice": )" + choice + "}");
    if (r.rules.json_schema == nullptr) return false;
    JsonGrammar g(*r.rules.json_schema);
    return g.Feed(text) && g.complete();
  };
  const std::string required = R"("required")";
  EXPECT_TRUE(held(required, R"([{"name": "get_weather", "parameters": {"city": "Oslo",
                                  "unit": "C"}}, {"name": "now", "parameters": {"x": [1]}}])"));
  EXPECT_FALSE(held(required, R"([{"name": "get_weather", "parameters": {"unit": "C"}}])"));
  EXPECT_FALSE(held(required, R"([{"name": "get_weather", "parameters": {"city": "O",
                                   "unit": "K"}}])"));
  EXPECT_FALSE(held(required, "[]"));
  // A function without parameters takes any object, as a named one does.
  EXPECT_FALSE(held(required, R"([{"name": "now", "parameters": 5}])"));
  const std::string named = R"({"type": "function", "function": {"name": "get_weather"}})";
  EXPECT_TRUE(held(named, R"({"city": "Oslo", "unit": "F"})"));
  EXPECT_FALSE(held(named, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_EQ(ParseOk(kChat, "{" + kChatOk + ", " + tools + R"(, "tool_choice": )" + named + "}")
                .tool_choice_function,
            "get_weather");
  // A function without parameters: any object.
  EXPECT_TRUE(held(R"({"type": "function", "function": {"name": "now"}})", R"({"a": null})"));
  // parallel_tool_calls false: "required" holds one call.
  const std::string two =
      R"([{"name": "now", "parameters": {}}, {"name": "now", "parameters": {}}])";
  EXPECT_TRUE(held(required, two));
  EXPECT_FALSE(held(required + R"(, "parallel_tool_calls": false)", two));
  EXPECT_FALSE(
      ParseOk(kChat, "{" + kChatOk + R"(, "parallel_tool_calls": false})").parallel_tool_calls);
  ApiRequest r;
  EXPECT_EQ(ParseApiRequest(kChat, "{" + kChatOk + R"(, "parallel_tool_calls": 1})", &r)->param,
            "parallel_tool_calls");
}

TEST(OpenAiRequestTest, ContentType) {
  EXPECT_FALSE(CheckContentType("application/json"));
  EXPECT_FALSE(CheckContentType("Application/JSON; charset=utf-8"));
  for (const char* bad : {"", "text/plain", "application/x-www-form-urlencoded",
                          "multipart/form-data; boundary=x", "application/jsonl"}) {
    const std::optional<ApiError> e = CheckContentType(bad);
    ASSERT_TRUE(e.has_value()) << bad;
    EXPECT_EQ(e->status, 415);
  }
}

TEST(OpenAiRequestTest, JsonDepthSkipsStrings) {
  EXPECT_EQ(JsonDepth(R"({"a": [1, {"b": 2}]})", 64), 3);
  EXPECT_EQ(JsonDepth(R"({"a": "[[[[{{{{\"[["})", 64), 1);
  EXPECT_EQ(JsonDepth(std::string(1000, '['), 64), 65);  // stops early
  const std::string nested = std::string(64, '[') + std::string(64, ']');
  ApiRequest r;
  EXPECT_EQ(ParseApiRequest(kCompletions,
                            "{\"model\": \"m\", \"prompt\": \"x\", \"foo\": " + nested + "}", &r)
                ->param,
            "");  // too deep (65 levels with the outer object) before any field is read
}

TEST(OpenAiRequestTest, LongUnknownFieldNameIsCut) {
  const std::string key(500, 'k');
  const ApiError e = ParseFails(kCompletions, "{" + kOk + ", \"" + key + "\": 1}");
  EXPECT_EQ(e.param, std::string(64, 'k') + "...");
  EXPECT_LT(e.message.size(), 200u);
}

}  // namespace
}  // namespace dscale::server
