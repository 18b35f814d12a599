// Hundreds of malformed or hostile requests against a running server: fuzzed and truncated
// bodies, wrong types, huge numbers, wrong content types, invalid UTF-8, deep nesting, broken
// HTTP, on every generation route (OpenAI's and Anthropic's). Every answer must be a 4xx (with a
// JSON error in the route's API's shape where the request got as far as HTTP), the server must
// never crash, and it must still serve normal requests.

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace dscale::e2e {
namespace {

using json = nlohmann::json;

struct Hostile {
  std::string what;
  std::string method = "POST";
  std::string path = "/v1/completions";
  std::string content_type = "application/json";
  std::string body;
};

const std::string kValidChat =
    R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})";

void AddTruncations(std::vector<Hostile>* out) {
  for (size_t n = 0; n < kSmallCompletionBody.size(); n += 2) {
    out->push_back(
        {.what = "truncated completion body", .body = kSmallCompletionBody.substr(0, n)});
  }
  for (size_t n = 1; n < kValidChat.size(); n += 4) {
    out->push_back({.what = "truncated chat body",
                    .path = "/v1/chat/completions",
                    .body = kValidChat.substr(0, n)});
  }
}

// (field, value) pairs that are never valid.
void AddWrongFields(std::vector<Hostile>* out) {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"model", "null"},
      {"model", "5"},
      {"model", "\"gpt-4o\""},
      {"model", "[\"tiny\"]"},
      {"prompt", "null"},
      {"prompt", "true"},
      {"prompt", "{}"},
      {"prompt", "[]"},
      {"prompt", "[\"a\", \"b\"]"},
      {"prompt", "[600]"},
      {"prompt", "[-1]"},
      {"prompt", "[1.5]"},
      {"prompt", "\"\""},
      {"max_tokens", "0"},
      {"max_tokens", "-1"},
      {"max_tokens", "-1e308"},
      {"max_tokens", "1e308"},
      {"max_tokens", "1e999"},
      {"max_tokens", "2147483648"},
      {"max_tokens", "123456789012345678901234567890"},
      {"max_tokens", "18446744073709551616"},
      {"max_tokens", "4.5"},
      {"max_tokens", "\"4\""},
      {"max_tokens", "[4]"},
      {"max_tokens", "5000"},
      {"temperature", "-1"},
      {"temperature", "1e308"},
      {"temperature", "\"0\""},
      {"temperature", "NaN"},
      {"temperature", "Infinity"},
      {"top_p", "0"},
      {"top_p", "-0.5"},
      {"top_p", "2"},
      {"top_p", "{}"},
      {"top_k", "-7"},
      {"top_k", "99999999999"},
      {"top_k", "0.5"},
      {"seed", "1.5"},
      {"seed", "1e400"},
      {"seed", "99999999999999999999999"},
      {"seed", "\"7\""},
      {"stop", "7"},
      {"stop", "\"\""},
      {"stop", "[\"a\", 2]"},
      {"stop", "[\"1\", \"2\", \"3\", \"4\", \"5\"]"},
      {"stop", "{}"},
      {"n", "17"},
      {"n", "0"},
      {"n", "-1"},
      {"n", "1.5"},
      {"n", "\"1\""},
      {"stream", "1"},
      {"stream", "\"true\""},
      {"stream_options", "{\"include_usage\": true}"},
      {"best_of", "2"},
      {"echo", "true"},
      {"logprobs", "21"},
      {"logprobs", "true"},
      {"top_logprobs", "1"},
      {"suffix", "\"s\""},
      {"presence_penalty", "3"},
      {"frequency_penalty", "-2.5"},
      {"repetition_penalty", "0"},
      {"min_tokens", "-1"},
      {"min_tokens", "5"},  // more than the body's max_tokens of 4: the engine's refusal
      {"stop_token_ids", "[-1]"},
      {"min_p", "-0.1"},
      {"logit_bias", "{\"1\": 500}"},
      {"logit_bias", "{\"x\": 5}"},
      {"logit_bias", "{\"1000000000\": 5}"},
      {"messages", "[]"},
      {"tools", "[]"},
      {"foo", "1"},
      {"foo", "null"},
      {"foo", "{\"a\": []}"},
      {"Model", "\"tiny\""},
      {"", "1"},
      {"\\u0000", "1"},
      {std::string(300, 'x'), "1"},
  };
  for (const auto& [key, value] : fields) {
    // The same key twice: the JSON object keeps the last, so the bad value is what counts.
    out->push_back({.what = "field " + key.substr(0, 20) + " = " + value,
                    .body = kSmallCompletionBody.substr(0, kSmallCompletionBody.size() - 1) +
                            ", \"" + key + "\": " + value + "}"});
  }
}

void AddChatCases(std::vector<Hostile>* out) {
  const std::vector<std::string> messages = {
      "null",
      "{}",
      "[1]",
      "[[]]",
      "[{}]",
      "[{\"role\": \"user\"}]",
      "[{\"role\": \"robot\", \"content\": \"x\"}]",
      "[{\"role\": 1, \"content\": \"x\"}]",
      "[{\"role\": \"user\", \"content\": 1}]",
      "[{\"role\": \"user\", \"content\": null}]",
      "[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]",
      "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": 5}]}]",
      "[{\"role\": \"user\", \"content\": \"x\", \"extra\": true}]",
      "[{\"role\": \"assistant\", \"content\": \"x\", \"tool_calls\": [1]}]",
  };
  for (const std::string& m : messages) {
    out->push_back({.what = "messages = " + m,
                    .path = "/v1/chat/completions",
                    .body = "{\"model\": \"tiny\", \"messages\": " + m + "}"});
  }
  out->push_back({.what = "chat without model",
                  .path = "/v1/chat/completions",
                  .body = R"({"messages": [{"role": "user", "content": "x"}]})"});
  out->push_back({.what = "chat n = 17",
                  .path = "/v1/chat/completions",
                  .body = kValidChat.substr(0, kValidChat.size() - 1) + ", \"n\": 17}"});
  out->push_back(
      {.what = "chat long prompt",
       .path = "/v1/chat/completions",
       .body = "{\"model\": \"tiny\", \"messages\": [{\"role\": \"user\", \"content\": \"" +
               std::string(20000, 'q') + "\"}]}"});
}

// The Responses and Messages APIs: truncated bodies, and items and blocks that are never valid.
void AddItemApiCases(std::vector<Hostile>* out) {
  const std::string responses =
      R"({"model": "tiny", "input": [{"role": "user", "content": "Hi"}], "max_output_tokens": 4})";
  const std::string messages =
      R"({"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]})";
  for (size_t n = 1; n < responses.size(); n += 5) {
    out->push_back({.what = "truncated responses body",
                    .path = "/v1/responses",
                    .body = responses.substr(0, n)});
  }
  for (size_t n = 1; n < messages.size(); n += 5) {
    out->push_back(
        {.what = "truncated messages body", .path = "/v1/messages", .body = messages.substr(0, n)});
  }
  for (const std::string input :
       {"null", "[]", "5", "[5]", "[{}]", "[{\"type\": \"function_call\"}]",
        "[{\"type\": \"function_call_output\", \"call_id\": 1, \"output\": \"x\"}]",
        "[{\"type\": \"reasoning\", \"content\": [{\"type\": \"x\"}]}]",
        "[{\"type\": \"item_reference\", \"id\": \"msg_1\"}]",
        "[{\"role\": \"user\", \"content\": [{\"type\": \"input_file\"}]}]"}) {
    out->push_back({.what = "responses input = " + input,
                    .path = "/v1/responses",
                    .body = "{\"model\": \"tiny\", \"input\": " + input + "}"});
  }
  out->push_back({.what = "responses previous_response_id unknown",
                  .path = "/v1/responses",
                  .body = R"({"model": "tiny", "input": "x", "previous_response_id": "resp_x"})"});
  for (const std::string turn :
       {"null", "[]", "[5]", "[{\"role\": \"system\", \"content\": \"x\"}]",
        "[{\"role\": \"user\", \"content\": [{\"type\": \"image\"}]}]",
        "[{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\"}]}]",
        "[{\"role\": \"assistant\", \"content\": [{\"type\": \"tool_use\", \"id\": \"t\", "
        "\"name\": \"f\", \"input\": []}]}]"}) {
    out->push_back(
        {.what = "messages = " + turn,
         .path = "/v1/messages",
         .body = "{\"model\": \"tiny\", \"max_tokens\": 4, \"messages\": " + turn + "}"});
  }
  out->push_back({.what = "stored response that is not there",
                  .method = "GET",
                  .path = "/v1/responses/resp_nope",
                  .body = ""});
}

void AddEncodingAndShapeCases(std::vector<Hostile>* out) {
  for (const std::string bad :
       {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "\x80", "\xfe\xff"}) {
    out->push_back({.what = "invalid UTF-8 in prompt",
                    .body = "{\"model\": \"tiny\", \"prompt\": \"a" + bad + "b\"}"});
    out->push_back({.what = "invalid UTF-8 in key", .body = "{\"" + bad + "\": 1}"});
  }
  out->push_back(
      {.what = "lone surrogate escape", .body = R"({"model": "tiny", "prompt": "\ud83d"})"});
  out->push_back({.what = "NUL in body", .body = std::string("{\"model\"\0: 1}", 14)});
  for (int depth : {65, 1000, 20000}) {
    out->push_back({.what = "nested arrays " + std::to_string(depth),
                    .body = "{\"model\": \"tiny\", \"prompt\": " + std::string(depth, '[') +
                            std::string(depth, ']') + "}"});
    std::string objects;
    for (int i = 0; i < depth; ++i) objects += "{\"a\":";
    objects += "1" + std::string(depth, '}');
    out->push_back({.what = "nested objects " + std::to_string(depth), .body = objects});
  }
  for (const std::string body : {"[]", "null", "true", "42", "\"text\"", "{}", "{} {}",
                                 "{\"model\": \"tiny\", \"prompt\": \"x\"} trailing",
                                 "{'model': 'tiny'}", "{model: tiny}", "\xef\xbb\xbf{}"}) {
    out->push_back({.what = "shape " + body, .body = body});
  }
  out->push_back({.what = "prompt longer than the context",
                  .body = "{\"model\": \"tiny\", \"prompt\": \"" + [] {
                    std::string words;
                    for (int i = 0; i < 5000; ++i) words += " word";
                    return words;
                  }() + "\"}"});
  out->push_back(
      {.what = "body over the limit",
       .body = "{\"model\": \"tiny\", \"prompt\": \"" + std::string(70000, 'a') + "\"}"});
}

void AddTransportCases(std::vector<Hostile>* out) {
  for (const std::string type :
       {"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz",
        "application/xml", "application/json-seq", "json", "*/*"}) {
    out->push_back({.what = "content type '" + type + "'",
                    .content_type = type,
                    .body = kSmallCompletionBody});
  }
  for (const std::string method : {"GET", "PUT", "DELETE", "PATCH"}) {
    out->push_back(
        {.what = method + " on completions", .method = method, .body = kSmallCompletionBody});
  }
  for (const std::string& path : std::vector<std::string>{
           "/", "/v1", "/v1/complete", "/v2/completions", "/v1/models/x", "/v1/completions/",
           "/v1/chat/completions/x", "/%00", "/v1/" + std::string(9000, 'a')}) {
    out->push_back({.what = "path " + path.substr(0, 30),
                    .method = path.starts_with("/v1/models") ? "GET" : "POST",
                    .path = path,
                    .body = kSmallCompletionBody});
  }
}

// Random bytes drawn mostly from JSON's alphabet: never a valid request.
void AddFuzz(std::vector<Hostile>* out) {
  std::mt19937 rng(20240501);
  const std::string alphabet = "{}[]\":,. 0123456789eE+-tfnulrasmodelpromptx\\\n\t";
  for (int i = 0; i < 60; ++i) {
    std::string body;
    const int length = 1 + static_cast<int>(rng() % 120);
    for (int j = 0; j < length; ++j) {
      body += rng() % 10 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    }
    static const char* const kPaths[] = {"/v1/completions", "/v1/chat/completions",
                                         "/v1/responses",   "/v1/messages",
                                         "/tokenize",       "/detokenize"};
    out->push_back({.what = "fuzz " + std::to_string(i), .path = kPaths[i % 6], .body = body});
  }
}

httplib::Result Send(httplib::Client& client, const Hostile& h) {
  if (h.method == "GET") return client.Get(h.path.c_str());
  if (h.method == "DELETE") return client.Delete(h.path.c_str(), h.body, h.content_type.c_str());
  if (h.method == "PUT") return client.Put(h.path.c_str(), h.body, h.content_type.c_str());
  if (h.method == "PATCH") return client.Patch(h.path.c_str(), h.body, h.content_type.c_str());
  return client.Post(h.path.c_str(), h.body, h.content_type.c_str());
}

void ExpectServes(httplib::Client& client) {
  const httplib::Result ok =
      client.Post("/v1/completions", kSmallCompletionBody, "application/json");
  ASSERT_TRUE(ok) << "no answer to a normal request";
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_TRUE(json::parse(ok->body)["choices"][0]["text"].is_string());
}

// Raw HTTP that a client library will not produce: every reply must be a 4xx.
const std::vector<std::pair<std::string, std::string>> kRawCases = {
    {"body shorter than Content-Length",
     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     "Content-Length: 200\r\n\r\n{\"model\": \"tiny\", \"prompt\": \"x\""},
    {"non-numeric Content-Length",
     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     "Content-Length: abc\r\n\r\n{}"},
    {"negative Content-Length",
     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     "Content-Length: -5\r\n\r\n{}"},
    {"huge Content-Length",
     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     "Content-Length: 99999999999999\r\n\r\n{}"},
    {"truncated chunked body",
     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     "Transfer-Encoding: chunked\r\n\r\n40\r\n{\"model\": \"tiny\""},
    {"bad chunk size",
     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"},
    {"garbage request line", "HELLO THERE\r\n\r\n"},
    {"binary request line", std::string("\x16\x03\x01\x00\xa5\x01\x00\x00", 8) + "\r\n\r\n"},
    {"unknown HTTP version",
     "POST /v1/completions HTTP/9.9\r\nContent-Type: application/json\r\n"
     "Content-Length: 2\r\n\r\n{}"},
};

TEST(HostileRequestsTest, EveryAnswerIs4xxAndTheServerStaysUp) {
  auto server = ServerProcess::Start({"--max-body-bytes", "65536"});
  ASSERT_GT(server->port(), 0);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(30, 0);
  ExpectServes(client);

  std::vector<Hostile> cases;
  AddTruncations(&cases);
  AddWrongFields(&cases);
  AddChatCases(&cases);
  AddItemApiCases(&cases);
  AddEncodingAndShapeCases(&cases);
  AddTransportCases(&cases);
  AddFuzz(&cases);
  int answered = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Hostile& h = cases[i];
    const httplib::Result res = Send(client, h);
    ASSERT_TRUE(res) << h.what << ": no answer (" << httplib::to_string(res.error()) << ")\n"
                     << server->Log();
    EXPECT_GE(res->status, 400) << h.what << ": " << res->body;
    EXPECT_LT(res->status, 500) << h.what << ": " << res->body;
    const json error = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(error.is_object() && error.contains("error") &&
                error["error"]["message"].is_string() && error["error"]["type"].is_string())
        << h.what << ": " << res->body;
    ++answered;
    if (i % 40 == 39) ExpectServes(client);
  }
  // Side by side: a body shorter than its Content-Length is answered when the read times out.
  std::vector<int> statuses(kRawCases.size(), 0);
  std::vector<std::thread> raw;
  for (size_t i = 0; i < kRawCases.size(); ++i) {
    raw.emplace_back([&, i] {
      statuses[i] = StatusOf(RawExchange(server->port(), kRawCases[i].second, false,
                                         std::chrono::milliseconds(15000)));
    });
  }
  for (std::thread& t : raw) t.join();
  for (size_t i = 0; i < kRawCases.size(); ++i) {
    EXPECT_GE(statuses[i], 400) << kRawCases[i].first;
    EXPECT_LT(statuses[i], 500) << kRawCases[i].first;
    ++answered;
  }
  EXPECT_GE(answered, 200);
  std::printf("%d hostile requests, every one answered with a 4xx\n", answered);
  // An id outside the vocabulary is refused by the engine's check, which names the field.
  const httplib::Result oov =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": [1, 600], "max_tokens": 2})",
                  "application/json");
  ASSERT_TRUE(oov);
  EXPECT_EQ(oov->status, 400) << oov->body;
  const json oov_error = json::parse(oov->body, nullptr, /*allow_exceptions=*/false);
  EXPECT_EQ(oov_error["error"]["param"], "prompt") << oov->body;
  EXPECT_NE(oov->body.find("position 1"), std::string::npos) << oov->body;
  ASSERT_TRUE(server->Running()) << server->Log();
  ExpectServes(client);
  const httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

}  // namespace
}  // namespace dscale::e2e
