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

// KV positions one request of `prompt_len` + `max_tokens` tokens (the prompt and at most that
// many outputs) reserves, rounded up to whole pages of `page_size`: every position but the last
// output's (a token's K/V row is written when it is fed back as an anchor; the last output never
// is), plus the `block` − 1 positions past its anchor that a decode step's block (the drafted
// candidates, verified or not) is staged at. The last decode step anchors at position
// prompt_len + max_tokens − 2, so positions 0 .. prompt_len + max_tokens + block − 3 may be
// written: prompt_len + max_tokens + block − 2 in all (block 1 without a drafter).
int64_t KvPositionsForRequest(int64_t prompt_len, int64_t max_tokens, int32_t block,
                              int32_t page_size);

// The largest prompt + max_tokens one request may have in a cache of `cache_positions`
// positions (a whole number of pages): the inverse of KvPositionsForRequest.
int64_t MaxRequestTokensForKv(int64_t cache_positions, int32_t block);

// Positions for `requests` requests running at once, each of at most `longest_prompt` prompt
// and `max_tokens` output tokens: KvPositionsForRequest for each — what the engine reserves.
int64_t KvTokensForDemand(int64_t requests, int64_t longest_prompt, int64_t max_tokens,
                          int32_t block, int32_t page_size);

// MemAvailable of /proc/meminfo in bytes: memory the kernel can hand out without swapping,
// counting reclaimable page cache.
Result<int64_t> AvailableMemoryBytes();

// The bytes a hybrid target's recurrent states may take beside the K/V (kv/recurrent_state.h):
// each of `max_running` requests' state and its working copy while a verify is pending, and the
// `prefix_states` the prefix cache keeps (kv/recurrent_snapshots.h). 0 without such layers.
int64_t RecurrentStateBytes(int64_t bytes_per_state, int64_t max_running, int64_t prefix_states);
// The same for `target`'s state (RecurrentStateShape::BytesPerSequence).
int64_t RecurrentStateBytes(const TargetModel& target, int64_t max_running, int64_t prefix_states);

// The most positions of `bytes_per_position` that fit in `fraction` of `available_bytes` less
// `reserved_bytes` (other memory the engine will take; unbounded, 2^40, when a position costs
// nothing).
int64_t KvTokensThatFitIn(int64_t available_bytes, int64_t bytes_per_position, double fraction,
                          int64_t reserved_bytes = 0);

// KvTokensThatFitIn the memory available now (AvailableMemoryBytes).
Result<int64_t> KvTokensThatFit(int64_t bytes_per_position, double fraction,
                                int64_t reserved_bytes = 0);

// kResourceExhausted naming the sizes when `positions` of `bytes_per_position` and
// `state_bytes` of recurrent states (RecurrentStateBytes) exceed the memory available now (the
// models are already loaded, so their weights are not counted twice).
Status CheckKvFitsInMemory(int64_t positions, int64_t bytes_per_position, int64_t state_bytes = 0);

}  // namespace dscale
