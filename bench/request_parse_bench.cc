// What the HTTP thread spends on an agent's request before the engine sees it: one coding-agent
// turn (a long system prompt, two tools, 24 calls with their results) sent as a chat
// completions body, as a Responses API body and as a Messages API body, each parsed and checked
// (ParseApiRequest; ParseResponsesRequest and ParseMessagesRequest, which rewrite their body as
// chat's and parse that), then the whole preparation with the Qwen3 tokenizer (PrepareRequest:
// the chat format and its tokens). The three bodies make the same prompt.
//
//   build/request_parse_bench

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/check.h"
#include "io/tokenizer/tokenizer.h"
#include "server/messages_request.h"
#include "server/openai_request.h"
#include "server/prompt_builder.h"
#include "server/responses_request.h"

namespace dscale::server {
namespace {

using json = nlohmann::ordered_json;

constexpr int kCalls = 24;

std::string Words(int n, int seed) {
  std::string out;
  for (int i = 0; i < n; ++i) out += "token" + std::to_string((i * 7 + seed) % 97) + " ";
  return out;
}

const json& Parameters() {
  static const json parameters = {
      {"type", "object"},
      {"properties",
       {{"command", {{"type", "array"}, {"items", {{"type", "string"}}}}},
        {"workdir", {{"type", "string"}}}}},
      {"required", {"command"}}};
  return parameters;
}

std::string ChatBody() {
  json messages = json::array({{{"role", "system"}, {"content", Words(2000, 1)}},
                               {{"role", "user"}, {"content", Words(60, 2)}}});
  for (int i = 0; i < kCalls; ++i) {
    const std::string id = "call_" + std::to_string(i);
    messages.push_back(
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", id},
            {"type", "function"},
            {"function", {{"name", "shell"}, {"arguments", R"({"command": ["ls"]})"}}}}}}});
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", Words(120, i)}});
  }
  json tools = json::array();
  for (const char* name : {"shell", "apply_patch"}) {
    tools.push_back(
        {{"type", "function"},
         {"function",
          {{"name", name}, {"description", Words(40, 3)}, {"parameters", Parameters()}}}});
  }
  return json{{"model", "m"}, {"messages", messages}, {"tools", tools}, {"max_tokens", 256}}.dump();
}

std::string ResponsesBody() {
  json input = json::array({{{"role", "user"}, {"content", Words(60, 2)}}});
  for (int i = 0; i < kCalls; ++i) {
    const std::string id = "call_" + std::to_string(i);
    input.push_back({{"type", "function_call"},
                     {"call_id", id},
                     {"name", "shell"},
                     {"arguments", R"({"command": ["ls"]})"}});
    input.push_back({{"type", "function_call_output"}, {"call_id", id}, {"output", Words(120, i)}});
  }
  json tools = json::array();
  for (const char* name : {"shell", "apply_patch"}) {
    tools.push_back({{"type", "function"},
                     {"name", name},
                     {"description", Words(40, 3)},
                     {"parameters", Parameters()}});
  }
  return json{{"model", "m"},   {"instructions", Words(2000, 1)}, {"input", input},
              {"tools", tools}, {"max_output_tokens", 256},       {"store", false}}
      .dump();
}

std::string MessagesBody() {
  json messages = json::array({{{"role", "user"}, {"content", Words(60, 2)}}});
  for (int i = 0; i < kCalls; ++i) {
    const std::string id = "call_" + std::to_string(i);
    messages.push_back({{"role", "assistant"},
                        {"content",
                         {{{"type", "tool_use"},
                           {"id", id},
                           {"name", "shell"},
                           {"input", {{"command", {"ls"}}}}}}}});
    messages.push_back(
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", id}, {"content", Words(120, i)}}}}});
  }
  json tools = json::array();
  for (const char* name : {"shell", "apply_patch"}) {
    tools.push_back(
        {{"name", name}, {"description", Words(40, 3)}, {"input_schema", Parameters()}});
  }
  return json{{"model", "m"},
              {"max_tokens", 256},
              {"system", Words(2000, 1)},
              {"messages", messages},
              {"tools", tools}}
      .dump();
}

enum class Api { kChat, kResponses, kMessages };

ApiRequest Parse(Api api, const std::string& body) {
  ApiRequest request;
  FieldMap fields;
  std::optional<ApiError> error =
      api == Api::kChat ? ParseApiRequest(Endpoint::kChatCompletions, body, &request)
      : api == Api::kResponses
          ? ParseResponsesRequest(body, {}, &request, &fields)
          : ParseMessagesRequest(body, MessagesBody::kCreate, &request, &fields);
  DSCALE_CHECK_MSG(!error, error ? error->message.c_str() : "");
  return request;
}

const std::string& Body(Api api) {
  static const std::string chat = ChatBody(), responses = ResponsesBody(),
                           messages = MessagesBody();
  return api == Api::kChat ? chat : api == Api::kResponses ? responses : messages;
}

void BM_Parse(benchmark::State& state) {
  const auto api = static_cast<Api>(state.range(0));
  const std::string& body = Body(api);
  for (auto _ : state) benchmark::DoNotOptimize(Parse(api, body));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.SetLabel(api == Api::kChat ? "chat" : api == Api::kResponses ? "responses" : "messages");
}
BENCHMARK(BM_Parse)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

const Tokenizer& Qwen3Tokenizer() {
  static const Tokenizer tokenizer = [] {
    Result<Tokenizer> t = Tokenizer::Load(DSCALE_TEST_DATA_DIR "/tokenizer/qwen3");
    DSCALE_CHECK_MSG(t.ok(), t.status().ToString().c_str());
    return std::move(t).value();
  }();
  return tokenizer;
}

// Parsing and the whole preparation: the prompt's tokens (the tokenizer's word cache warm, as in
// a running server). Every API makes the same prompt.
void BM_ParseAndPrepare(benchmark::State& state) {
  const auto api = static_cast<Api>(state.range(0));
  const ModelInfo model{.name = "m", .context_length = 1 << 20, .max_request_tokens = 1 << 20};
  size_t tokens = 0;
  PreparedRequest warm;  // the tokenizer's word cache filled first, as in a running server
  DSCALE_CHECK(!PrepareRequest(Parse(api, Body(api)), Qwen3Tokenizer(), model, 1, &warm));
  for (auto _ : state) {
    PreparedRequest prepared;
    const std::optional<ApiError> error =
        PrepareRequest(Parse(api, Body(api)), Qwen3Tokenizer(), model, 1, &prepared);
    DSCALE_CHECK_MSG(!error, error ? error->message.c_str() : "");
    tokens = prepared.prompt.size();
  }
  state.counters["prompt_tokens"] = static_cast<double>(tokens);
  state.SetLabel(api == Api::kChat ? "chat" : api == Api::kResponses ? "responses" : "messages");
}
BENCHMARK(BM_ParseAndPrepare)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dscale::server

BENCHMARK_MAIN();
