#include "engine/kv_budget.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace dscale {
namespace {

std::string GiB(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

int64_t KvBytesPerPosition(const KvCacheShape& shape) {
  return int64_t{2} * shape.num_layers * shape.kv_heads * shape.head_dim * KvDtypeSize(shape.dtype);
}

int64_t KvBytesPerPosition(const TargetModel& target, const Drafter* drafter, KvDtype dtype) {
  return KvBytesPerPosition(target.KvShape(/*page_size=*/1, /*num_pages=*/1).WithDtype(dtype)) +
         (drafter != nullptr ? drafter->KvBytesPerPosition(dtype) : 0);
}

int64_t KvPositionsForRequest(int64_t prompt_len, int64_t max_tokens, int32_t block,
                              int32_t page_size) {
  DSCALE_CHECK(prompt_len >= 0 && max_tokens >= 0 && block >= 1 && page_size >= 1);
  // At least the prompt's rows (a request that ends at its first token never decodes).
  const int64_t positions = std::max(prompt_len, prompt_len + max_tokens + block - 2);
  return (positions + page_size - 1) / page_size * page_size;
}

int64_t MaxRequestTokensForKv(int64_t cache_positions, int32_t block) {
  DSCALE_CHECK(cache_positions >= 0 && block >= 1);
  return cache_positions - block + 2;
}

int64_t KvTokensForDemand(int64_t requests, int64_t longest_prompt, int64_t max_tokens,
                          int32_t block, int32_t page_size) {
  return requests * KvPositionsForRequest(longest_prompt, max_tokens, block, page_size);
}

Result<int64_t> AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key, unit;
    int64_t kib = 0;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && unit == "kB") {
      return kib * 1024;
    }
  }
  return IoError("/proc/meminfo: no \"MemAvailable: N kB\" line");
}

int64_t RecurrentStateBytes(int64_t bytes_per_state, int64_t max_running, int64_t prefix_states) {
  return bytes_per_state * (2 * max_running + prefix_states);
}

int64_t RecurrentStateBytes(const TargetModel& target, int64_t max_running, int64_t prefix_states) {
  const int64_t bytes_per_state =
      target.KvShape(/*page_size=*/1, /*num_pages=*/1).recurrent.BytesPerSequence();
  return RecurrentStateBytes(bytes_per_state, max_running, prefix_states);
}

int64_t KvTokensThatFitIn(int64_t available_bytes, int64_t bytes_per_position, double fraction,
                          int64_t reserved_bytes) {
  if (bytes_per_position <= 0) return int64_t{1} << 40;
  const auto room = static_cast<int64_t>(static_cast<double>(available_bytes) * fraction);
  return std::max<int64_t>(0, room - reserved_bytes) / bytes_per_position;
}

Result<int64_t> KvTokensThatFit(int64_t bytes_per_position, double fraction,
                                int64_t reserved_bytes) {
  DSCALE_ASSIGN_OR_RETURN(const int64_t available, AvailableMemoryBytes());
  return KvTokensThatFitIn(available, bytes_per_position, fraction, reserved_bytes);
}

Status CheckKvFitsInMemory(int64_t positions, int64_t bytes_per_position, int64_t state_bytes) {
  const int64_t needed = positions * bytes_per_position + state_bytes;
  if (needed == 0) return Status::Ok();
  DSCALE_ASSIGN_OR_RETURN(const int64_t available, AvailableMemoryBytes());
  if (needed <= available) return Status::Ok();
  const std::string states =
      state_bytes > 0 ? " + " + GiB(state_bytes) + " of recurrent states" : std::string();
  return ResourceExhausted(
      "KV cache of " + std::to_string(positions) + " positions × " +
      std::to_string(bytes_per_position) + " bytes (K and V of every layer)" + states + " = " +
      GiB(needed) + ", but only " + GiB(available) +
      " of memory is available with the models loaded; lower --kv-tokens, the number of "
      "requests running at once" +
      (state_bytes > 0 ? std::string(" or --prefix-cache-states") : std::string()));
}

}  // namespace dscale
