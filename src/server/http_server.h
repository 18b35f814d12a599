#pragma once
// The OpenAI-compatible HTTP front end (cpp-httplib). Routes:
//   POST /v1/completions, /v1/chat/completions   generation, streamed (SSE) or not
//   POST /v1/responses                           the same as OpenAI's Responses API
//                                                (responses_request.h, responses_output.h)
//   GET, DELETE /v1/responses/{id}               a stored response (response_store.h)
//   POST /v1/messages                            the same as Anthropic's Messages API
//                                                (messages_request.h, messages_output.h)
//   POST /v1/messages/count_tokens               the prompt's tokens of such a body
//   POST /tokenize, /detokenize                  vLLM's: a prompt's tokens, ids' text
//   GET  /v1/models, /v1/models/{id}             the served model
//   GET  /health                                 200 while serving, 503 while draining
//   GET  /metrics                                Prometheus text format
// HTTP threads parse, validate and tokenize, then post the request to the EngineLoop and relay
// its channel to the client; they never touch the engine. Every error is an OpenAI-style JSON
// body (api_error.h), including cpp-httplib's own (unknown route, oversized or truncated body).
//
// Connections: cpp-httplib accepts them; the head reader (head_reader.h) holds every open
// connection between requests and reads request heads on one thread, within the limits of
// ConnectionLimits, so that worker threads serve only requests whose head has arrived and
// passed the checks (request_head.h); the body is read through a GuardedStream, bounded in
// bytes and time. Connections beyond max_connections get 503 at once.
//
// Shutdown: BeginDrain() makes new generation requests answer 503 (with Retry-After and
// Connection: close) and /health 503; once nothing is in flight, Stop() closes the listener.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"
#include "server/chat_output.h"
#include "server/connection_limits.h"
#include "server/engine_loop.h"
#include "server/output_items.h"
#include "server/prompt_builder.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace httplib {
class Server;
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace dscale::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;       // 0: any free port (see port())
  int32_t threads = 64;  // HTTP worker threads (requests whose head has arrived)
  // Body, head, deadlines and open connections (connection_limits.h).
  ConnectionLimits limits;
  // Share the port with other sockets that ask for it too (SO_REUSEPORT: the kernel spreads the
  // connections between them). Off, binding a port another server holds fails.
  bool reuse_port = false;
  // How often a request that is waiting for output checks whether its client has gone.
  std::chrono::milliseconds poll_interval{100};
  // The Responses API's stored responses, in bytes of JSON at most (response_store.h); 0 keeps
  // none (previous_response_id is refused).
  size_t responses_store_bytes = size_t{64} << 20;
};

// The request's one validation after PrepareRequest (Engine::CheckRequest), callable from any
// thread; a request that passes goes to the engine unchecked.
using RequestCheck = std::function<Status(std::span<const int32_t>, const GenerationParams&)>;

class HttpServer {
 public:
  HttpServer(EngineLoop& loop, const Tokenizer& tokenizer, ModelInfo model, RequestCheck check,
             HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; IoError naming host and port when that fails.
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop(); returns once every connection has closed, or at once when Stop() came
  // first.
  void Serve();
  // New generation requests get 503 from now on.
  void BeginDrain() { draining_ = true; }
  bool draining() const { return draining_; }
  // Generation responses accepted and not yet fully written.
  int32_t open_responses() const { return open_responses_.load(); }
  // Any thread, any time, once: before Serve() it keeps Serve() from listening; during it, ends
  // it (httplib's own stop() acts only once its listening loop runs, so this waits for that).
  void Stop();

 private:
  struct Generation;
  struct Stream;
  class Listener;
  // A reply made of output items (the Responses and Messages APIs): its items and events, and
  // what the response store keeps of its request (a Responses request's).
  struct ItemsReply {
    std::unique_ptr<OutputItems> output;
    ApiRequest::Responses request;
  };

  void Route();
  void HandleGenerate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  // True when a streaming response took over the open-response count.
  bool Generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  // Everything that can refuse a request before it reaches the engine thread.
  std::optional<ApiError> Validate(Endpoint endpoint, const httplib::Request& req, uint64_t serial,
                                   ApiRequest* api, PreparedRequest* prepared);
  // previous_response_id's lookup in the response store (empty where none is kept).
  StoredConversation StoredLookup() const;
  // What refuses a parsed request: too many choices, PrepareRequest, the engine's check.
  std::optional<ApiError> Admit(const ApiRequest& api, uint64_t serial, PreparedRequest* prepared);
  // The error in the shape of `endpoint`'s API (the Messages API's own; OpenAI's elsewhere).
  void Reply(httplib::Response& res, const ApiError& error,
             Endpoint endpoint = Endpoint::kChatCompletions);
  // How each choice's chat output is split (reasoning with thinking on, calls to tools with
  // tool_choice "auto", or the answer as calls with a forced one), or none where the text is
  // all content.
  std::vector<ChatOutput> ChatOutputs(const ApiRequest& api, uint64_t id_seed) const;
  void ReplyBlocking(const httplib::Request& req, httplib::Response& res,
                     const Generation& generation, const ResponseMeta& meta,
                     std::vector<ChatOutput> outputs, std::optional<ItemsReply> items);
  void ReplyStreaming(const httplib::Request& req, httplib::Response& res, Generation generation,
                      const ResponseMeta& meta, bool include_usage, std::vector<ChatOutput> outputs,
                      std::optional<ItemsReply> items);
  // The reply of a Responses or Messages request (a Responses echo completed with the settings
  // as used).
  ItemsReply ItemsReplyOf(ApiRequest::Responses request, const PreparedRequest& prepared,
                          const ResponseMeta& meta, uint64_t serial) const;
  // Stores a finished Responses reply where its request asked to and the server keeps them.
  void KeepResponse(const ItemsReply& reply);
  // POST /tokenize and /detokenize (tokenize_api.h).
  using TokenizeHandler = std::optional<ApiError> (*)(std::string_view, const Tokenizer&,
                                                      const ModelInfo&, std::string*);
  void HandleTokenize(const httplib::Request& req, httplib::Response& res, TokenizeHandler handler);
  // POST /v1/messages/count_tokens: {"input_tokens"} of the prompt the body makes.
  void CountTokens(const httplib::Request& req, httplib::Response& res);
  // GET and DELETE /v1/responses/{id}.
  void HandleStoredResponse(const httplib::Request& req, httplib::Response& res, bool erase);
  bool StreamStep(Stream& stream, httplib::DataSink& sink);
  void HandleHealth(httplib::Response& res);
  void HandleModels(const httplib::Request& req, httplib::Response& res);
  void HandleMetrics(httplib::Response& res);
  void CountResponse(const httplib::Request& req, const httplib::Response& res);
  uint64_t NextSerial() { return serial_.fetch_add(1); }

  EngineLoop& loop_;
  const Tokenizer& tokenizer_;
  const ModelInfo model_;
  const RequestCheck check_;
  const HttpOptions options_;
  const int64_t started_;  // Unix seconds
  const uint64_t salt_;    // makes response ids and default seeds differ between runs
  std::unique_ptr<Listener> http_;
  std::unique_ptr<ResponseStore> stored_;  // null: responses_store_bytes 0
  int port_ = -1;
  std::atomic<bool> draining_{false};
  std::mutex serve_mu_;  // orders Serve's start and Stop
  bool stop_requested_ = false;
  bool serving_ = false;             // Serve() went on to listen
  std::atomic<bool> served_{false};  // and the listening ended
  std::atomic<int32_t> open_responses_{0};
  std::atomic<uint64_t> serial_{1};

  std::mutex counts_mu_;
  std::map<std::pair<std::string, int>, int64_t> counts_;  // (route, status) → responses
};

}  // namespace dscale::server
