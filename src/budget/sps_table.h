#pragma once
// DSpark's steps-per-second table: SPS(B), verification forwards per second at B verified
// tokens (rows), profiled once at start-up (engine/sps_profile.h) or loaded from a file.
//
// File (JSON): {"format": "dscale-sps-v1", "verify_tokens": [B...], "steps_per_second": [...],
//               "context": positions per request while profiling, "target": "what ran"}
// B strictly increasing from ≥ 1, rates positive and finite.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::budget {

struct SpsTable {
  std::vector<int64_t> tokens;           // B probed, strictly increasing
  std::vector<double> steps_per_second;  // SPS at each B
  int64_t context = 0;
  std::string target;

  // InvalidArgument naming the field unless the shape above holds.
  Status Validate() const;
  // SPS(B) for B ≥ 1: linear interpolation between probes (DSpark's tables are read as
  // staircases; interpolating keeps the walk's early stop from halting at a probe boundary
  // that is only an artefact of where the probes lie); below the first probe its rate; past
  // the last, time grows in proportion to B.
  double StepsPerSecond(int64_t b) const;
};

Result<SpsTable> LoadSpsTable(const std::string& path);
Status SaveSpsTable(const SpsTable& table, const std::string& path);

}  // namespace dscale::budget
