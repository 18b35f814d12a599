#pragma once
// The Responses API's stored responses (`store`, the default): what previous_response_id
// continues and GET / DELETE /v1/responses/{id} read. Each entry keeps the items its request
// added to the conversation (its input, a string input as a user message) and its response
// object (whose output items are the reply), and the id of the response it continued, so a
// conversation of n turns holds each item once. Memory only, bounded in bytes (each entry
// counts its JSON text); the least recently used entries go first. Thread-safe.

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/logprobs_json.h"

namespace dscale::server {

class ResponseStore {
 public:
  explicit ResponseStore(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps a finished response (one larger than the whole store is not kept).
  void Put(const std::string& id, const std::string& previous_id, ResponseJson input,
           ResponseJson response);

  // The conversation a request continuing `id` starts from: every input and output item of the
  // responses from the first of the chain to `id`, oldest first. Null, with the id that is
  // missing in *missing (`id`, or a response before it that was dropped), when the chain is
  // not all here.
  std::optional<ResponseJson> Conversation(const std::string& id, std::string* missing);

  std::optional<ResponseJson> Response(const std::string& id);
  bool Delete(const std::string& id);

  size_t bytes() const;

 private:
  struct Entry {
    std::string previous_id;
    ResponseJson input;
    ResponseJson response;
    size_t bytes = 0;
    std::list<std::string>::iterator recency;  // in recent_
  };

  void Touch(Entry& entry);    // mu_ held
  void Erase(std::string id);  // mu_ held (a copy: the id may be recent_'s own)

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> recent_;  // most recently used first
  size_t bytes_ = 0;
};

}  // namespace dscale::server
