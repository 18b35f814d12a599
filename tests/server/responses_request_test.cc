// The Responses API's bodies: each item and field read as the chat request it amounts to, and
// every refusal naming the field as the client sent it.

#include "server/responses_request.h"

#include <gtest/gtest.h>

#include <string>

#include "spec/json_schema.h"

namespace dscale::server {
namespace {

// `stored`: the server's store, if it keeps responses.
ApiRequest ResponsesOk(const std::string& body, const StoredConversation& stored = {}) {
  ApiRequest request;
  FieldMap fields;
  const std::optional<ApiError> error = ParseResponsesRequest(body, stored, &request, &fields);
  EXPECT_FALSE(error.has_value()) << body << " → " << (error ? error->message : "");
  return request;
}

ApiError ResponsesFails(const std::string& body, const StoredConversation& stored = {}) {
  ApiRequest request;
  FieldMap fields;
  const std::optional<ApiError> error = ParseResponsesRequest(body, stored, &request, &fields);
  EXPECT_TRUE(error.has_value()) << body;
  return error.value_or(ApiError{});
}

TEST(ResponsesRequestTest, AStringInputIsTheUsersMessage) {
  const ApiRequest r = ResponsesOk(
      R"({"model": "m", "input": "Hello", "instructions": "Be brief.", "max_output_tokens": 9,
          "temperature": 0.5, "top_p": 0.9, "stream": true, "store": true, "metadata": {"k": "v"},
          "user": "u", "truncation": "disabled", "background": false, "service_tier": "auto",
          "previous_response_id": null, "top_k": 4, "seed": 3})");
  EXPECT_EQ(r.endpoint, Endpoint::kResponses);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hello");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.temperature, 0.5f);
  EXPECT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 4);
  EXPECT_EQ(r.seed, 3u);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_FALSE(r.enable_thinking);
  // The response repeats the settings (whether it is stored: the server's to say).
  EXPECT_EQ(r.responses.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.responses.echo["max_output_tokens"], 9);
  EXPECT_TRUE(r.responses.store);
  EXPECT_EQ(r.responses.input,
            (nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}})));
  EXPECT_EQ(r.responses.previous_response_id, "");
  EXPECT_EQ(r.responses.echo["metadata"]["k"], "v");
  EXPECT_EQ(r.responses.echo["tool_choice"], "auto");
}

TEST(ResponsesRequestTest, ItemsBecomeTheChatTurns) {
  // A conversation as the Agents SDK sends it back: the developer message and instructions
  // joined first, an assistant's reasoning, message and calls as one turn, the calls' outputs.
  const ApiRequest r = ResponsesOk(R"({"model": "m", "instructions": "Rules.", "input": [
      {"role": "developer", "content": "More rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                      {"type": "input_text", "text": "in Paris?"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Call the tool."}],
       "encrypted_content": null},
      {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
       "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather",
       "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
      {"type": "function_call", "call_id": "call_b", "name": "now", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "18 degrees"},
      {"type": "function_call_output", "call_id": "call_b",
       "output": [{"type": "input_text", "text": "noon"}]},
      {"type": "function_call", "call_id": "call_c", "name": "now", "arguments": "{}"}]})");
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Rules.\n\nMore rules.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Weather in Paris?");
  const ChatMessage& turn = r.messages[2];
  EXPECT_EQ(turn.role, "assistant");
  EXPECT_EQ(turn.content, "Checking.");
  EXPECT_EQ(turn.reasoning_content, "Call the tool.");
  ASSERT_EQ(turn.tool_calls.size(), 2u);
  EXPECT_EQ(turn.tool_calls[0].name, "get_weather");
  EXPECT_EQ(turn.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(turn.tool_calls[1].name, "now");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].content, "18 degrees");
  EXPECT_EQ(r.messages[4].content, "noon");
  // A call after the tools' outputs opens a turn of its own, with no text.
  EXPECT_EQ(r.messages[5].role, "assistant");
  EXPECT_EQ(r.messages[5].content, "");
  ASSERT_EQ(r.messages[5].tool_calls.size(), 1u);
  EXPECT_FALSE(r.messages[5].reasoning_content.has_value());
}

// A request as Codex sends one: instructions and a developer message, the environment as a user
// message, a reasoning item whose content parts are "text", a shell call and its output,
// function tools that are not strict, no stored state.
TEST(ResponsesRequestTest, ACodexTurn) {
  const ApiRequest r = ResponsesOk(R"({"model": "m", "instructions": "You are a coding agent.",
      "input": [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "Sandbox: workspace-write."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "text", "text": "Run ls."}], "encrypted_content": null},
        {"type": "function_call", "id": "fc_1", "name": "shell",
         "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"}],
      "tools": [{"type": "function", "name": "shell", "description": "Runs a command",
                 "strict": false, "parameters": {"type": "object", "properties": {
                   "command": {"type": "array", "items": {"type": "string"}},
                   "workdir": {"type": "string"}, "timeout_ms": {"type": "number"}},
                   "required": ["command"], "additionalProperties": false}}],
      "tool_choice": "auto", "parallel_tool_calls": false,
      "reasoning": {"effort": "medium", "summary": "auto"}, "store": false, "stream": true,
      "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199a1b2-c3d4",
      "text": {"verbosity": "medium"}})");
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "You are a coding agent.\n\nSandbox: workspace-write.");
  EXPECT_EQ(r.messages[1].content, "<environment_context>cwd</environment_context>");
  EXPECT_EQ(r.messages[2].content, "list files");
  EXPECT_EQ(r.messages[3].role, "assistant");
  EXPECT_EQ(r.messages[3].reasoning_content, "Run ls.");
  ASSERT_EQ(r.messages[3].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[3].tool_calls[0].arguments, R"({"command":["ls"]})");
  EXPECT_EQ(r.messages[4].role, "tool");
  EXPECT_EQ(r.messages[4].content, "a.txt\nb.txt");
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_TRUE(r.enable_thinking);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.rules.json_schema, nullptr);  // calls under "auto" of a tool that is not strict
}

TEST(ResponsesRequestTest, ReasoningGoesWithTheNextAssistantTurnOnly) {
  // A summary stands in for absent content; a user turn after a reasoning item drops it.
  const ApiRequest r = ResponsesOk(R"({"model": "m", "input": [
      {"role": "user", "content": "a"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "one"},
                                        {"type": "summary_text", "text": "two"}]},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "lost"}]},
      {"role": "user", "content": "b"},
      {"role": "assistant", "content": "c"}]})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].reasoning_content, "one\n\ntwo");
  EXPECT_FALSE(r.messages[3].reasoning_content.has_value());
  EXPECT_EQ(r.messages[3].content, "c");
}

TEST(ResponsesRequestTest, ToolsTextFormatReasoningAndLogprobs) {
  const ApiRequest r = ResponsesOk(R"({"model": "m", "input": "x",
      "tools": [{"type": "function", "name": "get_weather", "description": "d", "strict": true,
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"], "additionalProperties": false}}],
      "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
      "reasoning": {"effort": "medium", "summary": "auto"},
      "include": ["message.output_text.logprobs", "reasoning.encrypted_content"],
      "top_logprobs": 3})");
  ASSERT_EQ(r.tools.size(), 1u);
  // The template writes the definition chat's way, members in the order sent.
  EXPECT_EQ(r.tools[0],
            R"({"type": "function", "function": {"name": "get_weather", "description": "d", )"
            R"("strict": true, "parameters": {"type": "object", "properties": {"city": )"
            R"({"type": "string"}}, "required": ["city"], "additionalProperties": false}}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(r.tool_choice_function, "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_NE(r.rules.json_schema, nullptr);  // the forced call's arguments
  EXPECT_TRUE(r.enable_thinking);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.responses.echo["reasoning"]["effort"], "medium");

  const ApiRequest held = ResponsesOk(R"({"model": "m", "input": "x", "text": {"format":
      {"type": "json_schema", "name": "s", "strict": true, "schema": {"type": "object",
       "properties": {"a": {"type": "integer"}}, "required": ["a"]}}, "verbosity": "low"},
      "reasoning": {"effort": "none"}})");
  ASSERT_NE(held.rules.json_schema, nullptr);
  EXPECT_FALSE(held.enable_thinking);
  EXPECT_EQ(held.responses.echo["text"]["format"]["name"], "s");
  EXPECT_EQ(held.responses.echo["text"]["verbosity"], "low");
  EXPECT_NE(
      ResponsesOk(R"({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}})")
          .rules.json_schema,
      nullptr);
}

TEST(ResponsesRequestTest, RefusalsNameTheFieldsAsSent) {
  const struct {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"input": "x"})", "model"},
      {R"({"model": "m"})", "input"},
      {R"({"model": "m", "input": []})", "input"},
      {R"({"model": "m", "input": 3})", "input"},
      {R"({"model": "m", "input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"model": "m", "input": "x", "temperature": 3})", "temperature"},
      {R"({"model": "m", "input": "x", "messages": []})", "messages"},
      {R"({"model": "m", "input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"model": "m", "input": "x", "truncation": "auto"})", "truncation"},
      {R"({"model": "m", "input": "x", "background": true})", "background"},
      {R"({"model": "m", "input": "x", "include": ["everything"]})", "include[0]"},
      {R"({"model": "m", "input": "x", "stream_options": {"include_obfuscation": false}})",
       "stream_options"},
      {R"({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image",
           "image_url": "u"}]}]})",
       "input[0].content[0].type"},
      {R"({"model": "m", "input": [{"role": "user", "content": "a", "name": "n"}]})",
       "input[0].name"},
      {R"({"model": "m", "input": [{"role": "tool", "content": "a"}]})", "input[0].role"},
      {R"({"model": "m", "input": [{"role": "user", "content": "a"},
           {"type": "function_call", "call_id": "c", "name": "a b", "arguments": "{}"}]})",
       "input[1].name"},
      {R"({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]})",
       "input[0].arguments"},
      {R"({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0]"},
      {R"({"model": "m", "input": [{"type": "web_search_call", "id": "w"}]})", "input[0].type"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
      {R"j({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f",
           "parameters": {"type": "object", "properties": {"a": {"type": "string",
           "pattern": "(?=a)"}}}}], "tool_choice": "required"})j",
       "tools[0].parameters.properties.a.pattern"},
      {R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f"}],
           "tool_choice": {"type": "function", "name": "g"}})",
       "tool_choice.name"},
      {R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "s",
           "schema": {"type": "object", "properties": {"a": {"type": "number",
           "multipleOf": 2}}}}}})",
       "text.format.schema.properties.a.multipleOf"},
      {R"({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}})", "text.format.type"},
      {R"({"model": "m", "input": "x", "reasoning": {"effort": "max"}})", "reasoning.effort"},
  };
  for (const auto& c : cases) {
    const ApiError e = ResponsesFails(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " → " << e.message;
    EXPECT_TRUE(e.message.starts_with(std::string(c.param) + ": ")) << e.message;
  }
  // Not JSON, or not an object: no field at fault.
  EXPECT_EQ(ResponsesFails("[1]").param, "");
  EXPECT_EQ(ResponsesFails("{").param, "");
}

// previous_response_id: the stored conversation comes after the instructions and before the
// input; an id the store lacks is its error, and without a store the field is refused.
TEST(ResponsesRequestTest, APreviousResponseContinuesItsConversation) {
  const StoredConversation stored = [](const std::string& id,
                                       nlohmann::ordered_json* items) -> std::optional<ApiError> {
    if (id != "resp_a") {
      return ApiError{
          .status = 404, .message = "previous_response_id: gone", .param = "previous_response_id"};
    }
    *items = nlohmann::ordered_json::parse(R"([
        {"role": "user", "content": "Weather?"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
         "arguments": "{}", "status": "completed"}])");
    return std::nullopt;
  };
  const std::string body = R"({"model": "m", "previous_response_id": "resp_a",
      "instructions": "Be brief.", "store": false,
      "input": [{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]})";
  const ApiRequest r = ResponsesOk(body, stored);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "Weather?");
  EXPECT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.responses.previous_response_id, "resp_a");
  EXPECT_EQ(r.responses.echo["previous_response_id"], "resp_a");
  EXPECT_FALSE(r.responses.store);
  EXPECT_EQ(r.responses.input.size(), 1u);  // its own items only

  std::string other = body;
  other.replace(other.find("resp_a"), 6, "resp_b");
  EXPECT_EQ(ResponsesFails(other, stored).status, 404);
  EXPECT_EQ(ResponsesFails(body).param, "previous_response_id");  // no store
}

TEST(ResponsesRequestTest, FieldMapRewritesWholePathSteps) {
  FieldMap fields;
  fields.Add("messages[1]", "input[3]");
  fields.Add("messages[1].tool_calls[0].function", "input[4]");
  fields.Add("prompt", "input");
  const auto rewritten = [&](const std::string& param) {
    return fields.Translate(BadField(param, "bad"));
  };
  EXPECT_EQ(rewritten("messages[1].content").param, "input[3].content");
  EXPECT_EQ(rewritten("messages[1].content").message, "input[3].content: bad");
  EXPECT_EQ(rewritten("messages[1].tool_calls[0].function.name").param, "input[4].name");
  EXPECT_EQ(rewritten("messages[12]").param, "messages[12]");  // not a whole step
  EXPECT_EQ(rewritten("prompt").param, "input");
  const ApiError unnamed = fields.Translate(BadRequest("no field"));
  EXPECT_EQ(unnamed.param, "");
  EXPECT_EQ(unnamed.message, "no field");
}

}  // namespace
}  // namespace dscale::server
