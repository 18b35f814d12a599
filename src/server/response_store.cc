#include "server/response_store.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "server/openai_response.h"

namespace dscale::server {

void ResponseStore::Put(const std::string& id, const std::string& previous_id, ResponseJson input,
                        ResponseJson response) {
  const size_t bytes = id.size() + previous_id.size() + Dump(input).size() + Dump(response).size();
  std::lock_guard lock(mu_);
  if (entries_.contains(id)) Erase(id);
  if (bytes > max_bytes_) return;
  while (bytes_ + bytes > max_bytes_ && !recent_.empty()) Erase(recent_.back());
  recent_.push_front(id);
  entries_[id] = Entry{.previous_id = previous_id,
                       .input = std::move(input),
                       .response = std::move(response),
                       .bytes = bytes,
                       .recency = recent_.begin()};
  bytes_ += bytes;
}

std::optional<ResponseJson> ResponseStore::Conversation(const std::string& id,
                                                        std::string* missing) {
  std::lock_guard lock(mu_);
  std::vector<const Entry*> chain;  // newest first
  for (std::string at = id; !at.empty();) {
    const auto it = entries_.find(at);
    if (it == entries_.end() || chain.size() > entries_.size()) {
      *missing = at;
      return std::nullopt;
    }
    Touch(it->second);
    chain.push_back(&it->second);
    at = it->second.previous_id;
  }
  ResponseJson items = ResponseJson::array();
  for (auto entry = chain.rbegin(); entry != chain.rend(); ++entry) {
    for (const ResponseJson& item : (*entry)->input) items.push_back(item);
    for (const ResponseJson& item : (*entry)->response["output"]) items.push_back(item);
  }
  return items;
}

std::optional<ResponseJson> ResponseStore::Response(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  Touch(it->second);
  return it->second.response;
}

bool ResponseStore::Delete(const std::string& id) {
  std::lock_guard lock(mu_);
  if (!entries_.contains(id)) return false;
  Erase(id);
  return true;
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

void ResponseStore::Touch(Entry& entry) { recent_.splice(recent_.begin(), recent_, entry.recency); }

void ResponseStore::Erase(std::string id) {
  const auto it = entries_.find(id);
  bytes_ -= it->second.bytes;
  recent_.erase(it->second.recency);
  entries_.erase(it);
}

}  // namespace dscale::server
