#include "server/http_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>
#include <tuple>

#include "dvl/deterministic_random.h"
#include "server/choice_events.h"
#include "server/connection_watch.h"
#include "server/guarded_stream.h"
#include "server/head_reader.h"
#include "server/messages_output.h"
#include "server/messages_request.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/tokenize_api.h"

namespace dscale::server {
namespace {

using json = nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr const char* kRetryAfterSeconds = "1";
constexpr int kListenBacklog = 1024;
// Clients and proxies reuse their connections; each is closed after this many requests.
constexpr int32_t kMaxRequestsPerConnection = 10000;
// A stream silent this long (a long queue wait or prefill) gets an SSE comment, so that proxies
// do not time it out.
constexpr auto kKeepAliveInterval = std::chrono::seconds(15);

// Watches the socket of the request this worker serves.
ConnectionWatch WatchOf(const httplib::Request& req) {
  ConnectionAddress address{.local_addr = req.local_addr,
                            .local_port = req.local_port,
                            .remote_addr = req.remote_addr,
                            .remote_port = req.remote_port};
  const GuardedStream* stream = GuardedStream::Current();
  if (stream == nullptr) return ConnectionWatch(std::move(address));
  return ConnectionWatch(std::move(address), stream->socket());
}

// The route label for metrics: the known paths, everything else "other".
std::string RouteLabel(const std::string& path) {
  static const char* const kRoutes[] = {"/v1/completions",
                                        "/v1/chat/completions",
                                        "/v1/responses",
                                        "/v1/messages",
                                        "/v1/messages/count_tokens",
                                        "/v1/models",
                                        "/tokenize",
                                        "/detokenize",
                                        "/health",
                                        "/metrics"};
  for (const char* route : kRoutes) {
    if (path == route) return route;
  }
  if (path.starts_with("/v1/models/")) return "/v1/models/{id}";
  if (path.starts_with("/v1/responses/")) return "/v1/responses/{id}";
  return "other";
}

// The body of the request being served could not be read: why, when the stream knows.
std::optional<ApiError> BodyError(const ConnectionLimits& limits) {
  const GuardedStream* stream = GuardedStream::Current();
  const auto fault = stream ? stream->fault() : GuardedStream::BodyFault::kNone;
  if (fault == GuardedStream::BodyFault::kTooLarge) {
    return ApiError{.status = 413,
                    .message = "the request body is larger than the limit of " +
                               std::to_string(limits.max_body_bytes) +
                               " bytes (--max-body-bytes; chunk framing included)"};
  }
  if (fault == GuardedStream::BodyFault::kTimedOut) {
    return ApiError{.status = 408,
                    .message = "the request body did not arrive within " +
                               std::to_string(limits.body_timeout.count() / 1000) +
                               " s (--body-timeout), or stalled for " +
                               std::to_string(limits.body_stall_timeout.count() / 1000) + " s"};
  }
  return std::nullopt;
}

// A JSON error body for statuses cpp-httplib sets itself (no route, bad HTTP, body too big).
ApiError TransportError(int status, const ConnectionLimits& limits) {
  if (auto body = BodyError(limits)) return *body;
  switch (status) {
    case 404:
      return {.status = 404, .message = "no such route", .code = "not_found"};
    case 405:
      return {.status = 405, .message = "method not allowed for this route"};
    case 413:
      return {.status = 413, .message = "the request body is too large"};
    case 414:
      return {.status = 414, .message = "the request URI is too long"};
    case 416:
      return {.status = 416, .message = "range not satisfiable"};
    default:
      break;
  }
  if (status >= 500) return InternalError("the server could not handle the request");
  return {.status = status, .message = "the request could not be read as HTTP"};
}

// The seed of choice `index` of a request seeded `seed`: the seed itself for the first, so n = 1
// is unchanged, and independent streams for the others.
uint64_t ChoiceSeed(uint64_t seed, int32_t index) {
  return index == 0 ? seed : dvl::SplitMix64Mix(seed + static_cast<uint64_t>(index));
}

}  // namespace

// cpp-httplib accepts connections and parses requests; this subclass owns what happens in
// between. Its task queue runs on the accepting thread and hands each new connection to the
// head reader (or refuses it with 503 when max_connections are open); the head reader gives
// connections whose head has arrived to the worker pool, which runs cpp-httplib's request
// processing over a GuardedStream and returns the connection to the head reader afterwards.
class HttpServer::Listener : public httplib::Server {
 public:
  Listener(const ConnectionLimits& limits, int32_t threads)
      : limits_(limits),
        threads_(threads),
        reader_(limits, [this](Connection c, std::string head, std::string rest) {
          Dispatch(std::move(c), std::move(head), std::move(rest));
        }) {
    new_task_queue = [this] { return new AcceptQueue(*this); };
  }

  // cpp-httplib 0.11 listens with a backlog of 5, so a burst of new connections (64 clients
  // starting together) overflows the accept queue and some connections fail. listen() again on
  // the bound socket raises the backlog.
  void RaiseBacklog(int backlog) {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
  }
  int32_t open_connections() const { return reader_.open_connections(); }

 private:
  // cpp-httplib's queue for accepted sockets: runs each task (process_and_close_socket below)
  // at once on the accepting thread; it only registers the socket.
  class AcceptQueue : public httplib::TaskQueue {
   public:
    explicit AcceptQueue(Listener& listener) : listener_(listener) { listener_.StartWorkers(); }
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override { listener_.StopWorkers(); }

   private:
    Listener& listener_;
  };

  void StartWorkers() {
    workers_ = std::make_unique<httplib::ThreadPool>(threads_);
    const Status started = reader_.Start();
    DSCALE_CHECK_MSG(started.ok(), started.message().c_str());
  }

  void StopWorkers() {
    reader_.Stop();
    workers_->shutdown();
  }

  bool process_and_close_socket(socket_t sock) override {
    if (!reader_.TryAdmit()) {
      const ApiError busy = Unavailable(
          "too_many_connections", "the server has " + std::to_string(limits_.max_connections) +
                                      " connections open (--max-connections); retry later");
      const std::string bytes = ErrorResponseBytes(busy);
      [[maybe_unused]] const ssize_t n =
          send(sock, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      close(sock);
      return false;
    }
    fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
    reader_.Add({.fd = sock, .address = AddressOfSocket(sock)}, HeadReader::Mode::kNew);
    return true;
  }

  void Dispatch(Connection c, std::string head, std::string rest) {
    auto task = std::make_shared<std::tuple<Connection, std::string, std::string>>(
        std::move(c), std::move(head), std::move(rest));
    workers_->enqueue([this, task] {
      auto& [connection, head, rest] = *task;
      ServeRequest(std::move(connection), std::move(head), std::move(rest));
    });
  }

  // One request on a worker thread; then the connection goes back to the head reader.
  void ServeRequest(Connection c, std::string head, std::string rest) {
    const bool last = ++c.served >= kMaxRequestsPerConnection;
    bool client_closes = false;
    bool reusable = false;
    {
      GuardedStream stream(c.fd, c.address, limits_, std::move(head), std::move(rest));
      const bool written = process_request(stream, last, client_closes, nullptr);
      reusable =
          written && !last && !client_closes && stream.reusable() && svr_sock_ != INVALID_SOCKET;
      if (reusable) c.received = stream.TakeUnread();
    }
    reader_.Add(std::move(c), reusable ? HeadReader::Mode::kIdle : HeadReader::Mode::kClosing);
  }

  const ConnectionLimits& limits_;
  const int32_t threads_;
  HeadReader reader_;
  std::unique_ptr<httplib::ThreadPool> workers_;
};

// The engine requests of one HTTP request: one per choice (`n`).
struct HttpServer::Generation {
  std::vector<std::shared_ptr<RequestChannel>> channels;
  std::vector<uint64_t> tickets;

  void CancelAll(EngineLoop& loop) const {
    for (const uint64_t ticket : tickets) loop.Cancel(ticket);
  }
};

// One streaming response, owned by its content provider.
struct HttpServer::Stream {
  Generation generation;
  ResponseMeta meta;
  bool include_usage = false;
  ConnectionWatch watch;
  bool opened = false;                          // the chat role chunks went out
  bool finished = false;                        // [DONE] went out
  std::vector<uint8_t> choice_done;             // [n] the choice's last update was read
  std::vector<int64_t> text_offset;             // [n] characters of the tokens sent (logprobs)
  std::vector<ChatOutput> outputs;              // [n] where the chat output is split, else []
  std::optional<ItemsReply> items;              // output items' events (Responses, Messages; n = 1)
  Usage usage;                                  // the prompt once, the choices' tokens summed
  Clock::time_point last_check = Clock::now();  // of the client's connection
  Clock::time_point last_write = Clock::now();
};

HttpServer::HttpServer(EngineLoop& loop, const Tokenizer& tokenizer, ModelInfo model,
                       RequestCheck check, HttpOptions options)
    : loop_(loop),
      tokenizer_(tokenizer),
      model_(std::move(model)),
      check_(std::move(check)),
      options_(std::move(options)),
      started_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      salt_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)),
      http_(std::make_unique<Listener>(options_.limits, options_.threads)) {
  if (options_.responses_store_bytes > 0) {
    stored_ = std::make_unique<ResponseStore>(options_.responses_store_bytes);
  }
  Route();
}

HttpServer::~HttpServer() = default;

Status HttpServer::Bind() {
  http_->set_payload_max_length(options_.limits.max_body_bytes);
  http_->set_tcp_nodelay(true);
  // What the Keep-Alive response header announces; the head reader enforces it.
  http_->set_keep_alive_max_count(kMaxRequestsPerConnection);
  http_->set_keep_alive_timeout(std::max<time_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.limits.idle_timeout).count()));
  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second server start silently on
  // a port in use and take half of its connections. SO_REUSEADDR alone only allows a restart
  // while old connections linger in TIME_WAIT.
  const bool reuse_port = options_.reuse_port;
  http_->set_socket_options([reuse_port](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (reuse_port) setsockopt(sock, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof(yes));
  });
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ < 0) {
    return IoError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                   " (in use by another server? --reuse-port shares a port on purpose; or the "
                   "address is not this machine's)");
  }
  http_->RaiseBacklog(kListenBacklog);
  return Status::Ok();
}

void HttpServer::Serve() {
  {
    std::lock_guard lock(serve_mu_);
    if (stop_requested_) return;  // e.g. a signal during start-up
    serving_ = true;
  }
  http_->listen_after_bind();
  served_ = true;
}

void HttpServer::Stop() {
  {
    std::lock_guard lock(serve_mu_);
    if (stop_requested_) return;
    stop_requested_ = true;
    if (!serving_) return;
  }
  while (!http_->is_running() && !served_) std::this_thread::yield();
  http_->stop();
}

void HttpServer::Route() {
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kCompletions, req, res);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kChatCompletions, req, res);
  });
  http_->Post("/v1/messages", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kMessages, req, res);
  });
  http_->Post(
      "/v1/messages/count_tokens",
      [this](const httplib::Request& req, httplib::Response& res) { CountTokens(req, res); });
  http_->Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kResponses, req, res);
  });
  http_->Get("/v1/responses/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    HandleStoredResponse(req, res, /*erase=*/false);
  });
  http_->Delete("/v1/responses/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    HandleStoredResponse(req, res, /*erase=*/true);
  });
  http_->Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    HandleTokenize(req, res, TokenizeReply);
  });
  http_->Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    HandleTokenize(req, res, DetokenizeReply);
  });
  http_->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    HandleModels(req, res);
  });
  http_->Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    HandleModels(req, res);
  });
  http_->Get("/health",
             [this](const httplib::Request&, httplib::Response& res) { HandleHealth(res); });
  http_->Get("/metrics",
             [this](const httplib::Request&, httplib::Response& res) { HandleMetrics(res); });
  http_->set_error_handler(httplib::Server::HandlerWithResponse(
      [&options = options_](const httplib::Request&, httplib::Response& res) {
        // Responses our handlers wrote already carry a body; only cpp-httplib's own need one.
        if (!res.body.empty() || res.is_chunked_content_provider_) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        const ApiError error = TransportError(res.status, options.limits);
        res.status = error.status;
        res.set_content(error.Body(), kJson);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(InternalError("the server could not handle the request").Body(), kJson);
      });
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    CountResponse(req, res);
  });
}

void HttpServer::Reply(httplib::Response& res, const ApiError& error, Endpoint endpoint) {
  res.status = error.status;
  if (error.status == 503) {
    res.set_header("Retry-After", kRetryAfterSeconds);
    if (draining_) {
      res.set_header("Connection", "close");
      if (GuardedStream* stream = GuardedStream::Current()) stream->RequestClose();
    }
  }
  res.set_content(endpoint == Endpoint::kMessages ? Dump(MessagesErrorJson(error)) : error.Body(),
                  kJson);
}

void HttpServer::HandleGenerate(Endpoint endpoint, const httplib::Request& req,
                                httplib::Response& res) {
  // Counted before the draining check: the signal thread sets draining and then waits for this
  // count to reach zero, so a request either sees draining or is waited for.
  ++open_responses_;
  if (!Generate(endpoint, req, res)) --open_responses_;
}

std::optional<ApiError> HttpServer::Validate(Endpoint endpoint, const httplib::Request& req,
                                             uint64_t serial, ApiRequest* api,
                                             PreparedRequest* prepared) {
  if (draining_) return Unavailable("shutting_down", "the server is shutting down");
  if (auto e = CheckContentType(req.get_header_value("Content-Type"))) return e;
  if (endpoint == Endpoint::kCompletions || endpoint == Endpoint::kChatCompletions) {
    if (auto e = ParseApiRequest(endpoint, req.body, api)) return e;
    return Admit(*api, serial, prepared);
  }
  // A body in another API's shape is checked as the chat request it amounts to; the errors
  // name its own fields.
  FieldMap fields;
  std::optional<ApiError> error =
      endpoint == Endpoint::kMessages
          ? ParseMessagesRequest(req.body, MessagesBody::kCreate, api, &fields)
          : ParseResponsesRequest(req.body, StoredLookup(), api, &fields);
  if (!error) error = Admit(*api, serial, prepared);
  if (error) return fields.Translate(std::move(*error));
  return std::nullopt;
}

StoredConversation HttpServer::StoredLookup() const {
  if (!stored_) return {};
  return [this](const std::string& id, ResponseJson* items) -> std::optional<ApiError> {
    std::string missing;
    std::optional<ResponseJson> conversation = stored_->Conversation(id, &missing);
    if (conversation) {
      *items = std::move(*conversation);
      return std::nullopt;
    }
    return ApiError{.status = 404,
                    .message = "previous_response_id: no stored response \"" + missing + "\"" +
                               (missing == id ? "" : " (which \"" + id + "\" continues)") +
                               "; responses are kept in memory, the least recently used "
                               "dropped past --responses-store-mib",
                    .param = "previous_response_id",
                    .code = "not_found"};
  };
}

std::optional<ApiError> HttpServer::Admit(const ApiRequest& api, uint64_t serial,
                                          PreparedRequest* prepared) {
  if (api.n > loop_.request_slots()) {
    // Never admitted at these limits, however idle the server: not a 503 to retry.
    return BadField("n", "must be at most " + std::to_string(loop_.request_slots()) +
                             ": each choice is a request, and this server holds " +
                             std::to_string(loop_.request_slots()) +
                             " at once (--max-running + --max-queue)");
  }
  if (auto e = PrepareRequest(api, tokenizer_, model_, serial ^ salt_, prepared)) return e;
  if (Status s = check_(prepared->prompt, prepared->params); !s.ok()) {
    ApiError error = BadFieldMessage(s.message());
    if (s.code() == StatusCode::kOutOfRange) {
      // Does not fit the context or the KV cache. The engine names "prompt" or "max_tokens"
      // (a missing max_tokens was capped by the room left, so then the prompt is at fault);
      // the client's field for the prompt is messages on chat.
      error.code = "context_length_exceeded";
      if (error.param == "prompt" && api.endpoint == Endpoint::kChatCompletions) {
        error.param = "messages";
      }
    }
    return error;
  }
  return std::nullopt;
}

bool HttpServer::Generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  ApiRequest api;
  PreparedRequest prepared;
  const uint64_t serial = NextSerial();
  if (auto error = Validate(endpoint, req, serial, &api, &prepared)) {
    Reply(res, *error, endpoint);
    return false;
  }
  // Each choice is an engine request of its own, with its own seed, admitted together: all or
  // none (a refusal queues nothing, so it takes no slot from the requests behind it).
  Generation generation;
  std::vector<PreparedRequest> choices;
  const uint64_t seed = prepared.params.sampling.seed;
  for (int32_t i = 0; i < api.n; ++i) {
    choices.push_back(prepared);
    choices.back().params.sampling.seed = ChoiceSeed(seed, i);
    choices.back().params.group = serial + 1;  // a group of its own (never 0: no group)
    generation.channels.push_back(std::make_shared<RequestChannel>());
  }
  Result<std::vector<uint64_t>> tickets = loop_.SubmitAll(std::move(choices), generation.channels);
  if (!tickets.ok()) {
    Reply(res,
          Unavailable("overloaded", "the server is at capacity (" + tickets.status().message() +
                                        "); retry later"),
          endpoint);
    return false;
  }
  generation.tickets = std::move(tickets).value();
  const ResponseMeta meta{.endpoint = endpoint,
                          .id = ResponseId(endpoint, serial, salt_),
                          .created = std::chrono::duration_cast<std::chrono::seconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count(),
                          .model = model_.name,
                          .logprobs = api.logprobs};
  std::vector<ChatOutput> outputs = ChatOutputs(api, serial ^ salt_);
  std::optional<ItemsReply> items;
  if (endpoint == Endpoint::kResponses || endpoint == Endpoint::kMessages) {
    items.emplace(ItemsReplyOf(std::move(api.responses), prepared, meta, serial));
  }
  if (!api.stream) {
    ReplyBlocking(req, res, generation, meta, std::move(outputs), std::move(items));
    return false;
  }
  ReplyStreaming(req, res, std::move(generation), meta, api.include_usage, std::move(outputs),
                 std::move(items));
  return true;  // the stream's releaser ends the count
}

HttpServer::ItemsReply HttpServer::ItemsReplyOf(ApiRequest::Responses request,
                                                const PreparedRequest& prepared,
                                                const ResponseMeta& meta, uint64_t serial) const {
  const uint64_t id_seed = dvl::SplitMix64Mix(serial ^ salt_);
  if (meta.endpoint == Endpoint::kMessages) {
    return {.output = std::make_unique<MessagesOutput>(
                meta, static_cast<int64_t>(prepared.prompt.size()), id_seed),
            .request = {.store = false}};
  }
  request.store = request.store && stored_ != nullptr;
  ResponseJson echo = request.echo;
  echo["temperature"] = prepared.params.sampling.temperature;  // as used: defaults filled in
  echo["top_p"] = prepared.params.sampling.top_p;
  echo["store"] = request.store;
  return {.output = std::make_unique<ResponsesOutput>(meta, std::move(echo), id_seed),
          .request = std::move(request)};
}

std::vector<ChatOutput> HttpServer::ChatOutputs(const ApiRequest& api, uint64_t id_seed) const {
  std::vector<ChatOutput> outputs;
  if (api.endpoint == Endpoint::kCompletions) return outputs;
  const ChatFormat format = ChatFormatOf(tokenizer_);
  // Thinking on: the format's reasoning block.
  const ChatFormatTraits& traits = TraitsOf(format);
  const bool reasoning = api.enable_thinking && api.separate_reasoning && traits.has_reasoning();
  const bool tools = !api.tools.empty() && api.tool_choice == ToolChoice::kAuto;
  const bool forced =
      api.tool_choice == ToolChoice::kRequired || api.tool_choice == ToolChoice::kFunction;
  if (!reasoning && !tools && !forced) return outputs;
  const ToolParameterTypes types(api.tools);
  for (int32_t i = 0; i < api.n; ++i) {
    std::optional<ReasoningStream> reasoning_stream;
    if (reasoning) reasoning_stream.emplace(traits);
    std::optional<ToolCallStream> tool_stream;
    if (tools) {
      tool_stream.emplace(format, ToolCallMarkersOf(format), types,
                          dvl::SplitMix64Mix(id_seed + i));
    }
    std::optional<ForcedToolCalls> forced_calls;
    if (forced) forced_calls.emplace(api.tool_choice_function, dvl::SplitMix64Mix(id_seed + i));
    outputs.emplace_back(std::move(reasoning_stream), std::move(tool_stream),
                         std::move(forced_calls));
  }
  return outputs;
}

void HttpServer::ReplyBlocking(const httplib::Request& req, httplib::Response& res,
                               const Generation& generation, const ResponseMeta& meta,
                               std::vector<ChatOutput> outputs, std::optional<ItemsReply> items) {
  ConnectionWatch watch = WatchOf(req);
  std::vector<Choice> choices;
  Usage usage;
  for (const std::shared_ptr<RequestChannel>& channel : generation.channels) {
    RequestChannel::Update update;
    while (!channel->Wait(options_.poll_interval, &update, /*until_done=*/true)) {
      if (watch.PeerClosed()) {
        generation.CancelAll(loop_);
        // Nobody reads this; 499 (nginx's "client closed request") keeps the metrics honest.
        return Reply(res, {.status = 499, .message = "the client closed the connection"},
                     meta.endpoint);
      }
    }
    if (update.outcome == Outcome::kError || update.outcome == Outcome::kCancelled) {
      generation.CancelAll(loop_);
      if (update.outcome == Outcome::kError) return Reply(res, *update.error, meta.endpoint);
      return Reply(res, Unavailable("cancelled", "the request was cancelled"), meta.endpoint);
    }
    AddChoiceUsage(update.usage, static_cast<int32_t>(choices.size()), &usage);
    ChatOutput* output = outputs.empty() ? nullptr : &outputs[choices.size()];
    if (items) {
      items->output->Update(update, output);  // the whole output: one choice, events unsent
      continue;
    }
    choices.push_back(WholeChoice(std::move(update), output));
  }
  if (items) KeepResponse(*items);
  res.set_content(Dump(items ? items->output->Reply() : CompletionJson(meta, choices, usage)),
                  kJson);
}

void HttpServer::ReplyStreaming(const httplib::Request& req, httplib::Response& res,
                                Generation generation, const ResponseMeta& meta, bool include_usage,
                                std::vector<ChatOutput> outputs, std::optional<ItemsReply> items) {
  const size_t n = generation.channels.size();
  auto stream = std::make_shared<Stream>(Stream{.generation = std::move(generation),
                                                .meta = meta,
                                                .include_usage = include_usage,
                                                .watch = WatchOf(req),
                                                .choice_done = std::vector<uint8_t>(n, 0),
                                                .text_offset = std::vector<int64_t>(n, 0),
                                                .outputs = std::move(outputs),
                                                .items = std::move(items)});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies must pass events on as they come
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, stream](size_t, httplib::DataSink& sink) { return StreamStep(*stream, sink); },
      [this, stream](bool) {
        // Runs once the response is over, written or not: a stream that did not reach [DONE]
        // lost its client.
        if (!stream->finished) stream->generation.CancelAll(loop_);
        --open_responses_;
      });
}

bool HttpServer::StreamStep(Stream& s, httplib::DataSink& sink) {
  std::string out;
  const auto n = static_cast<int32_t>(s.generation.channels.size());
  if (!s.opened) {
    s.opened = true;
    if (s.items) out += s.items->output->Open();
    if (s.meta.endpoint == Endpoint::kChatCompletions) {
      for (int32_t i = 0; i < n; ++i) {
        out += SseEvent(
            ChunkJson(s.meta, {.index = i, .role = true, .with_usage_null = s.include_usage}));
      }
    }
  }
  // One choice waits as long as the poll interval; several take turns with short waits, so no
  // choice's tokens wait long behind another's.
  const auto wait = n == 1 ? options_.poll_interval
                           : std::min<std::chrono::milliseconds>(options_.poll_interval,
                                                                 std::chrono::milliseconds(5));
  bool all_done = true;
  std::optional<ApiError> error;
  for (int32_t i = 0; i < n; ++i) {
    if (s.choice_done[i]) continue;
    RequestChannel::Update u;
    if (s.generation.channels[i]->Wait(out.empty() ? wait : std::chrono::milliseconds(0), &u)) {
      ChatOutput* output = s.outputs.empty() ? nullptr : &s.outputs[i];
      out += s.items ? s.items->output->Update(u, output)
                     : ChoiceEvents(s.meta, s.include_usage, i, u, output, &s.text_offset[i]);
      // Kept before the client reads that it finished: its next request may continue it.
      if (s.items && u.done) KeepResponse(*s.items);
      if (u.done) {
        s.choice_done[i] = 1;
        AddChoiceUsage(u.usage, i, &s.usage);
        if (u.outcome == Outcome::kError) error = u.error;
      }
    }
    all_done = all_done && s.choice_done[i];
  }
  if (error) {
    // A failed choice ends the stream: the error event, then [DONE]; the others are cancelled.
    s.generation.CancelAll(loop_);
    if (!s.items) out += SseEvent(error->ToJson());  // else in the items' last event
  } else if (all_done && s.include_usage) {
    out += SseEvent(UsageChunkJson(s.meta, s.usage));
  }
  const bool done = all_done || error.has_value();
  if (done && !s.items) out += kSseDone;
  // Writes fail only some time after the client has gone; look at the connection as well.
  if (!done && Clock::now() - s.last_check >= options_.poll_interval) {
    s.last_check = Clock::now();
    if (s.watch.PeerClosed()) return false;  // cpp-httplib ends the response; the releaser cancels
  }
  if (out.empty() && Clock::now() - s.last_write >= kKeepAliveInterval) out = kSseKeepAlive;
  if (!out.empty()) {
    if (!sink.write(out.data(), out.size())) return false;
    s.last_write = Clock::now();
  }
  if (done) {
    s.finished = true;
    sink.done();
  }
  return true;
}

void HttpServer::HandleTokenize(const httplib::Request& req, httplib::Response& res,
                                TokenizeHandler handler) {
  std::string reply;
  std::optional<ApiError> error = CheckContentType(req.get_header_value("Content-Type"));
  if (!error) error = handler(req.body, tokenizer_, model_, &reply);
  if (error) return Reply(res, *error);
  res.set_content(reply, kJson);
}

void HttpServer::CountTokens(const httplib::Request& req, httplib::Response& res) {
  ApiRequest api;
  FieldMap fields;
  PreparedRequest prepared;
  std::optional<ApiError> error = CheckContentType(req.get_header_value("Content-Type"));
  if (!error) error = ParseMessagesRequest(req.body, MessagesBody::kCountTokens, &api, &fields);
  if (!error) error = PrepareRequest(api, tokenizer_, model_, salt_, &prepared);
  if (error) return Reply(res, fields.Translate(std::move(*error)), Endpoint::kMessages);
  res.set_content(Dump(ResponseJson{{"input_tokens", prepared.prompt.size()}}), kJson);
}

void HttpServer::KeepResponse(const ItemsReply& reply) {
  if (!reply.request.store) return;
  ResponseJson response = reply.output->Reply();
  if (response["status"] != "completed" && response["status"] != "incomplete") return;
  const std::string id = response["id"];
  stored_->Put(id, reply.request.previous_response_id, reply.request.input, std::move(response));
}

void HttpServer::HandleStoredResponse(const httplib::Request& req, httplib::Response& res,
                                      bool erase) {
  const std::string id = req.matches[1];
  std::optional<ResponseJson> body;
  if (stored_ && erase && stored_->Delete(id)) {
    body = ResponseJson{{"id", id}, {"object", "response.deleted"}, {"deleted", true}};
  } else if (stored_ && !erase) {
    body = stored_->Response(id);
  }
  if (!body) {
    return Reply(res,
                 {.status = 404,
                  .message = "no stored response \"" + id + "\"" +
                             (stored_ ? "" : " (this server keeps none: --responses-store-mib 0)"),
                  .code = "not_found"});
  }
  res.set_content(Dump(*body), kJson);
}

void HttpServer::HandleHealth(httplib::Response& res) {
  const EngineMetrics m = loop_.Metrics();
  const json body = {{"status", draining_ ? "draining" : "ok"},
                     {"model", model_.name},
                     {"running", m.running},
                     {"waiting", m.waiting},
                     {"kv_pages_free", m.free_kv_pages},
                     {"kv_pages_total", m.total_kv_pages}};
  res.status = draining_ ? 503 : 200;
  res.set_content(Dump(body), kJson);
}

void HttpServer::HandleModels(const httplib::Request& req, httplib::Response& res) {
  const json card = {{"id", model_.name},
                     {"object", "model"},
                     {"created", started_},
                     {"owned_by", "dscale"},
                     {"max_model_len", model_.context_length}};
  if (req.matches.size() < 2) {
    res.set_content(Dump(json{{"object", "list"}, {"data", json::array({card})}}), kJson);
    return;
  }
  if (req.matches[1] != model_.name) {
    return Reply(res,
                 {.status = 404,
                  .message = "The model \"" + std::string(req.matches[1]) + "\" does not exist",
                  .param = "model",
                  .code = "model_not_found"});
  }
  res.set_content(Dump(card), kJson);
}

void HttpServer::HandleMetrics(httplib::Response& res) {
  MetricsSnapshot snapshot{.engine = loop_.Metrics(),
                           .draining = draining_,
                           .open_connections = http_->open_connections(),
                           .max_connections = options_.limits.max_connections};
  {
    std::lock_guard lock(counts_mu_);
    snapshot.http_responses = counts_;
  }
  res.set_content(RenderPrometheus(snapshot), "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::CountResponse(const httplib::Request& req, const httplib::Response& res) {
  std::lock_guard lock(counts_mu_);
  ++counts_[{RouteLabel(req.path), res.status}];
}

}  // namespace dscale::server
