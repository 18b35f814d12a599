// Anthropic's Messages API bodies: each block read as the chat request it amounts to, and every
// refusal naming the field as the client sent it.

#include "server/messages_request.h"

#include <gtest/gtest.h>

#include <string>

namespace dscale::server {
namespace {

ApiRequest MessagesOk(const std::string& body) {
  ApiRequest request;
  FieldMap fields;
  const std::optional<ApiError> error =
      ParseMessagesRequest(body, MessagesBody::kCreate, &request, &fields);
  EXPECT_FALSE(error.has_value()) << body << " → " << (error ? error->message : "");
  return request;
}

ApiError MessagesFail(const std::string& body) {
  ApiRequest request;
  FieldMap fields;
  const std::optional<ApiError> error =
      ParseMessagesRequest(body, MessagesBody::kCreate, &request, &fields);
  EXPECT_TRUE(error.has_value()) << body;
  return error.value_or(ApiError{});
}

TEST(MessagesRequestTest, AConversationAsClaudeCodeSendsIt) {
  // System blocks, a user turn of text blocks, an assistant's thinking, text and two calls, the
  // results (one as text blocks) before the user's next text.
  const ApiRequest r = MessagesOk(R"({"model": "m", "max_tokens": 300, "stream": true,
      "system": [{"type": "text", "text": "You are a CLI."},
                 {"type": "text", "text": " Be brief.", "cache_control": {"type": "ephemeral"}}],
      "messages": [
        {"role": "user", "content": [{"type": "text", "text": "<reminder/>"},
                                     {"type": "text", "text": "List files."}]},
        {"role": "assistant", "content": [
          {"type": "thinking", "thinking": "Use ls.", "signature": "abc"},
          {"type": "redacted_thinking", "data": "x"},
          {"type": "text", "text": "Listing."},
          {"type": "tool_use", "id": "toolu_1", "name": "bash",
           "input": {"command": "ls", "timeout": 5}},
          {"type": "tool_use", "id": "toolu_2", "name": "pwd", "input": {}}]},
        {"role": "user", "content": [
          {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"},
          {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": false,
           "content": [{"type": "text", "text": "/home"}]},
          {"type": "text", "text": "Thanks."}]}],
      "tools": [{"name": "bash", "description": "Runs a command",
                 "input_schema": {"type": "object", "properties": {"command": {"type": "string"},
                   "timeout": {"type": "integer"}}, "required": ["command"]}},
                {"type": "custom", "name": "pwd", "input_schema": {"type": "object"},
                 "cache_control": {"type": "ephemeral"}}],
      "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
      "thinking": {"type": "enabled", "budget_tokens": 1024},
      "metadata": {"user_id": "u"}, "temperature": 1, "top_k": 20, "top_p": 0.9,
      "stop_sequences": ["END"]})");
  EXPECT_EQ(r.endpoint, Endpoint::kMessages);
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "You are a CLI. Be brief.");
  EXPECT_EQ(r.messages[1].content, "<reminder/>List files.");
  const ChatMessage& turn = r.messages[2];
  EXPECT_EQ(turn.role, "assistant");
  EXPECT_EQ(turn.content, "Listing.");
  EXPECT_EQ(turn.reasoning_content, "Use ls.");
  ASSERT_EQ(turn.tool_calls.size(), 2u);
  EXPECT_EQ(turn.tool_calls[0].name, "bash");
  EXPECT_EQ(turn.tool_calls[0].arguments, R"({"command": "ls", "timeout": 5})");  // as sent
  EXPECT_EQ(turn.tool_calls[1].arguments, "{}");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].content, "a.txt");
  EXPECT_EQ(r.messages[4].content, "/home");
  EXPECT_EQ(r.messages[5].role, "user");
  EXPECT_EQ(r.messages[5].content, "Thanks.");
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[1], R"({"type": "function", "function": {"name": "pwd", )"
                        R"("parameters": {"type": "object"}}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_TRUE(r.enable_thinking);
  EXPECT_EQ(r.thinking_token_budget, 1024);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.max_tokens, 300);
  EXPECT_EQ(r.top_k, 20);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"END"}));
}

TEST(MessagesRequestTest, ToolChoicesAndThinkingOff) {
  const std::string tools =
      R"("tools": [{"name": "f", "input_schema": {"type": "object", "properties": {}}}])";
  const auto with = [&](const std::string& more) {
    return R"({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}], )" +
           tools + ", " + more + "}";
  };
  EXPECT_EQ(MessagesOk(with(R"("tool_choice": {"type": "any"})")).tool_choice,
            ToolChoice::kRequired);
  EXPECT_EQ(MessagesOk(with(R"("tool_choice": {"type": "none"})")).tool_choice, ToolChoice::kNone);
  const ApiRequest named = MessagesOk(with(R"("tool_choice": {"type": "tool", "name": "f"})"));
  EXPECT_EQ(named.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(named.tool_choice_function, "f");
  EXPECT_NE(named.rules.json_schema, nullptr);
  EXPECT_TRUE(named.parallel_tool_calls);
  EXPECT_FALSE(MessagesOk(with(R"("thinking": {"type": "disabled"})")).enable_thinking);
}

// count_tokens takes what shapes the prompt and no max_tokens.
TEST(MessagesRequestTest, CountTokensTakesThePromptsFieldsOnly) {
  const auto parse = [](const std::string& body) {
    ApiRequest request;
    FieldMap fields;
    return ParseMessagesRequest(body, MessagesBody::kCountTokens, &request, &fields);
  };
  EXPECT_FALSE(
      parse(R"({"model": "m", "system": "s", "messages": [{"role": "user", "content": "x"}],
                         "thinking": {"type": "enabled", "budget_tokens": 2000}})"));
  const std::optional<ApiError> e =
      parse(R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "max_tokens");
}

TEST(MessagesRequestTest, RefusalsNameTheFieldsAsSent) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const struct {
    std::string body;
    const char* param;
  } cases[] = {
      {R"({"max_tokens": 9, )" + user + "}", "model"},
      {R"({"model": "m", )" + user + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 0, )" + user + "}", "max_tokens"},
      {R"({"model": "m", "max_tokens": 9})", "messages"},
      {R"({"model": "m", "max_tokens": 9, "messages": []})", "messages"},
      {R"({"model": "m", "max_tokens": 9, "messages": [{"role": "system", "content": "x"}]})",
       "messages[0].role"},
      {R"({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [
           {"type": "image", "source": {}}]}]})",
       "messages[0].content[0].type"},
      {R"({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "x"},
           {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "a b",
            "input": {}}]}]})",
       "messages[1].content[0].name"},
      {R"({"model": "m", "max_tokens": 9, "messages": [{"role": "assistant", "content": [
           {"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]})",
       "messages[0].content[0].input"},
      {R"({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [
           {"type": "tool_result", "content": "x"}]}]})",
       "messages[0].content[0].tool_use_id"},
      {R"({"model": "m", "max_tokens": 9, "stop_sequences": ["a", "b", "c", "d", "e"], )" + user +
           "}",
       "stop_sequences"},
      {R"({"model": "m", "max_tokens": 9, "system": [{"type": "image"}], )" + user + "}",
       "system[0].type"},
      {R"({"model": "m", "max_tokens": 9, "tools": [{"type": "web_search_20250305",
           "name": "web_search"}], )" +
           user + "}",
       "tools[0].type"},
      {R"j({"model": "m", "max_tokens": 9, "tools": [{"name": "f", "input_schema": {"type": "object",
           "properties": {"a": {"type": "string", "pattern": "(?=a)"}}}}],
           "tool_choice": {"type": "any"}, )j" +
           user + "}",
       "tools[0].input_schema.properties.a.pattern"},
      {R"({"model": "m", "max_tokens": 9, "tools": [{"name": "f", "input_schema": {}}],
           "tool_choice": {"type": "tool", "name": "g"}, )" +
           user + "}",
       "tool_choice.name"},
      {R"({"model": "m", "max_tokens": 9, "tools": [{"name": "f"}], )" + user + "}",
       "tools[0].input_schema"},
      {R"({"model": "m", "max_tokens": 9, "thinking": {"type": "on"}, )" + user + "}", "thinking"},
      {R"({"model": "m", "max_tokens": 9, "container": "c", )" + user + "}", "container"},
  };
  for (const auto& c : cases) {
    const ApiError e = MessagesFail(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " → " << e.message;
    EXPECT_TRUE(e.message.starts_with(std::string(c.param) + ": ")) << e.message;
  }
}

}  // namespace
}  // namespace dscale::server
