#include "bench/http_client.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "core/check.h"
#include "io/json_util.h"

namespace dscale::bench {
namespace {

// Reads the whole reply of one streamed request, sent now; its latency counts from `arrived`
// (an open loop's arrival time, when it may have waited for a worker; else now).
Result<RequestSample> StreamOne(httplib::Client& client, const ServerTarget& target,
                                const ChatRequest& request,
                                std::optional<Clock::time_point> arrived) {
  SseParser parser;
  StreamTally tally;
  std::vector<std::string> events;
  const Clock::time_point submitted = arrived.value_or(Clock::now());
  Clock::time_point first = submitted;
  bool seen_content = false;
  httplib::Request req;
  req.method = "POST";
  req.path = RequestPath(target, request);
  req.body = ChatRequestBody(target, request);
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    events.clear();
    parser.Feed(std::string_view(data, size), &events);
    for (const std::string& event : events) {
      if (TallyChunk(event, &tally) && !seen_content) {
        seen_content = true;
        first = Clock::now();
      }
    }
    return true;
  };
  const httplib::Result res = client.send(req);
  const Clock::time_point finished = Clock::now();
  if (!res) return IoError(target.url + ": " + httplib::to_string(res.error()));
  if (res->status != 200) {
    return IoError(target.url + req.path + ": HTTP " + std::to_string(res->status));
  }
  if (!tally.error.empty()) return IoError(target.url + ": server error: " + tally.error);
  if (!tally.done) return DataLoss(target.url + ": stream ended without [DONE]");
  if (!seen_content) first = finished;
  return RequestSample{.latency_s = SecondsBetween(submitted, finished),
                       .ttft_s = SecondsBetween(submitted, first),
                       .output_tokens = tally.OutputTokens()};
}

}  // namespace

void SseParser::Feed(std::string_view bytes, std::vector<std::string>* events) {
  pending_.append(bytes);
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(pending_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Line(line, events);
  }
  pending_.erase(0, start);
}

void SseParser::Line(std::string_view line, std::vector<std::string>* events) {
  if (line.empty()) {  // end of event
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (!line.starts_with("data:")) return;  // comments and other fields
  line.remove_prefix(5);
  if (line.starts_with(' ')) line.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(line);
  has_data_ = true;
}

bool TallyChunk(std::string_view payload, StreamTally* tally) {
  if (payload == "[DONE]") {
    tally->done = true;
    return false;
  }
  // What a server sends is read like any untrusted JSON: every access checks the type first.
  const std::optional<nlohmann::json> parsed = ParseJson(payload);
  if (!parsed || !parsed->is_object()) return false;
  const nlohmann::json& chunk = *parsed;
  if (auto error = chunk.find("error"); error != chunk.end()) {
    const nlohmann::json* message = JsonMember(*error, "message");
    tally->error = message != nullptr && message->is_string() ? message->get<std::string>()
                   : error->is_object()                       ? std::string("error")
                                                              : error->dump();
    return false;
  }
  if (const nlohmann::json* usage = JsonMember(chunk, "usage")) {
    if (const nlohmann::json* tokens = JsonMember(*usage, "completion_tokens")) {
      const Result<int64_t> n =
          ReadJsonInt(*tokens, "usage.completion_tokens", 0, std::numeric_limits<int64_t>::max());
      if (n.ok()) tally->usage_tokens = *n;
    }
  }
  auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return false;
  const nlohmann::json* delta = JsonMember((*choices)[0], "delta");
  const nlohmann::json* content =
      delta != nullptr ? JsonMember(*delta, "content") : JsonMember((*choices)[0], "text");
  if (content == nullptr || !content->is_string() ||
      content->get_ref<const std::string&>().empty()) {
    return false;
  }
  ++tally->content_chunks;
  return true;
}

std::string ChatRequestBody(const ServerTarget& target, const ChatRequest& request) {
  nlohmann::json body = {{"model", target.model},
                         {"max_tokens", request.max_tokens},
                         {"temperature", request.temperature},
                         {"seed", request.seed},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!request.prompt_ids.empty()) {
    body["prompt"] = request.prompt_ids;
    return body.dump();
  }
  nlohmann::json messages = nlohmann::json::array();
  if (!request.system.empty())
    messages.push_back({{"role", "system"}, {"content", request.system}});
  messages.push_back({{"role", "user"}, {"content", request.prompt}});
  body["messages"] = std::move(messages);
  return body.dump();
}

std::string RequestPath(const ServerTarget& target, const ChatRequest& request) {
  return request.prompt_ids.empty() ? target.path : "/v1/completions";
}

Result<std::string> ServedModelId(const std::string& url) {
  const std::string where = "GET " + url + "/v1/models";
  httplib::Client client(url);
  const httplib::Result res = client.Get("/v1/models");
  if (!res) return IoError(where + ": " + httplib::to_string(res.error()));
  if (res->status != 200) {
    return InvalidArgument(where + ": HTTP " + std::to_string(res->status) + " " +
                           res->body.substr(0, 200));
  }
  const nlohmann::json body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> ids;
  if (body.is_object() && body.contains("data") && body["data"].is_array()) {
    for (const nlohmann::json& model : body["data"]) {
      if (model.is_object() && model.contains("id") && model["id"].is_string()) {
        ids.push_back(model["id"].get<std::string>());
      }
    }
  }
  if (ids.empty()) return InvalidArgument(where + ": no model id in " + res->body.substr(0, 200));
  if (ids.size() > 1) {
    std::string listed;
    for (const std::string& id : ids) listed += (listed.empty() ? "" : ", ") + id;
    return InvalidArgument(where + ": the server serves " + std::to_string(ids.size()) +
                           " models (" + listed + "); choose one with --server-model");
  }
  return ids[0];
}

Result<LoopOutcome> RunServerLoop(const ServerTarget& target, std::span<const ChatRequest> requests,
                                  const LoopShape& shape, const std::function<void()>& on_done) {
  DSCALE_CHECK(shape.concurrency >= 1);
  DSCALE_CHECK(shape.arrivals.empty() || shape.arrivals.size() == requests.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;  // guards outcome, error and on_done
  LoopOutcome outcome;
  Status error;
  const Clock::time_point start = Clock::now();
  auto worker = [&] {
    httplib::Client client(target.url);
    client.set_read_timeout(3600, 0);
    for (size_t i; !failed && (i = next.fetch_add(1)) < requests.size();) {
      std::optional<Clock::time_point> arrived;
      if (!shape.arrivals.empty()) {
        arrived = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(shape.arrivals[i]));
        std::this_thread::sleep_until(*arrived);
      }
      Result<RequestSample> sample = StreamOne(client, target, requests[i], arrived);
      std::lock_guard<std::mutex> lock(mu);
      if (!sample.ok()) {
        if (!failed.exchange(true)) error = sample.status();
        return;
      }
      outcome.samples.push_back(*sample);
      if (on_done) on_done();
    }
  };
  std::vector<std::thread> threads;
  for (int32_t w = 0; w < shape.concurrency; ++w) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  outcome.window_s = SecondsBetween(start, Clock::now());
  if (failed) return error;
  return outcome;
}

}  // namespace dscale::bench
