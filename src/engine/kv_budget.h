#pragma once
// How many KV positions a command needs, and whether they fit in this machine's memory.
//
// K/V rows take resident memory only once written (kv/zero_mapped_bytes.h), but a cache whose
// every slot may be written must fit: the engine checks at creation, so a command that asks for
// more than the machine has says so with the sizes instead of being killed mid-run.

#include <cstdint>

#include "core/status.h"
#include "kv/paged_kv_cache.h"
#include "model/drafter.h"
#include "model/target_model.h"

namespace dscale {

// Host bytes one KV position takes in a cache of this shape (K and V rows of every layer, in the
// shape's dtype).
int64_t KvBytesPerPosition(const KvCacheShape& shape);
// Host bytes one position takes across an engine's caches stored as `dtype`: the target's rows
// and, when there is a drafter, its draft-side rows at the same slot.
int64_t KvBytesPerPosition(const TargetModel& target, const Drafter* drafter, KvDtype dtype);

// Positions for `requests` requests running at once, each of at most `longest_prompt` prompt
// and `max_tokens` output positions, plus the verification block written past the committed
// length and the rounding of each request to whole pages — what the engine reserves per request.
int64_t KvTokensForDemand(int64_t requests, int64_t longest_prompt, int64_t max_tokens,
                          int32_t block, int32_t page_size);

// MemAvailable of /proc/meminfo in bytes: memory the kernel can hand out without swapping,
// counting reclaimable page cache.
Result<int64_t> AvailableMemoryBytes();

// The most positions of `bytes_per_position` that fit in `fraction` of the available memory.
Result<int64_t> KvTokensThatFit(int64_t bytes_per_position, double fraction);

// kResourceExhausted naming the sizes when `positions` of `bytes_per_position` exceed the
// memory available now (the models are already loaded, so their weights are not counted twice).
Status CheckKvFitsInMemory(int64_t positions, int64_t bytes_per_position);

}  // namespace dscale
