#pragma once
// Start-up profiling of DSpark's steps-per-second table (budget/sps_table.h) for
// --spec dspark: for each probed verify size B, the median time of the target's verification
// forward over B rows — ⌈B / W⌉ requests of up to W rows (full blocks, the last one partial),
// each after `context` cached positions, with the drafter's feature layers captured as a real
// verify step does — and SPS(B) = 1 / that time. A scratch KV cache of its own is used, so it
// runs before the engine is created (a device target then binds the engine's cache afterwards).

#include <cstdint>
#include <string>
#include <vector>

#include "budget/sps_table.h"
#include "core/status.h"
#include "model/target_model.h"

namespace dscale {

struct SpsProfileOptions {
  int64_t max_tokens = 256;  // the largest B (W · max running requests)
  int32_t block = 16;        // W: rows per request
  int32_t context = 128;     // cached positions per request before its rows
  int repeats = 5;           // timed forwards per B, after one warm-up
  std::vector<int32_t> capture_layers;
};

// The probed sizes: every B up to 32, then steps of about 1/8 of B, and max_tokens itself.
std::vector<int64_t> SpsProbeSizes(int64_t max_tokens);

Result<budget::SpsTable> ProfileStepsPerSecond(TargetModel& target,
                                               const SpsProfileOptions& options);

}  // namespace dscale
