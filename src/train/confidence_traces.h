#pragma once
// Confidence traces: what `dscale collect --confidence-out` logs for every drafted request of
// every full-width verification step when the drafter has a confidence head (DSpark's): the
// head's raw logits for the block's γ drafts and how many of them full-width verification
// accepted. Sequential temperature scaling is fitted on them (train/sts_calibration.h).
// Byte layout (docs/TRACE_FORMAT.md), little-endian:
//
//   header   magic "DSCLCONF", u32 version (1), u32 positions γ (1 .. 256)
//   record   u32 prompt id, u32 step, u32 accepted y (0..γ), f32 logits[γ]
//
// Draft k (0-based) survived iff y > k. No record count: the reader derives it from the size.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::train {

inline constexpr uint32_t kConfidenceTraceVersion = 1;
inline constexpr char kConfidenceTraceMagic[8] = {'D', 'S', 'C', 'L', 'C', 'O', 'N', 'F'};
inline constexpr int64_t kConfidenceTraceHeaderBytes = 16;
inline constexpr uint32_t kMaxConfidencePositions = 256;

struct ConfidenceTraces {
  int32_t positions = 0;               // γ
  std::vector<uint32_t> prompt_ids;    // [R]
  std::vector<uint32_t> steps;         // [R]
  std::vector<uint32_t> accepted;      // [R], 0..γ
  std::vector<float> logits;           // [R, γ]

  size_t size() const { return accepted.size(); }
  const float* logits_of(size_t r) const { return logits.data() + r * positions; }
  // Appends one record; InvalidArgument for y > γ or non-finite logits.
  Status Append(uint32_t prompt_id, uint32_t step, uint32_t accepted_drafts,
                const float* record_logits);
};

// Writes `traces` to `path` at once (the file holds all of them or none).
Status WriteConfidenceTraces(const ConfidenceTraces& traces, const std::string& path);
// Reads and validates one file or several with the same γ; errors name the file and record.
Result<ConfidenceTraces> ReadConfidenceTraces(const std::vector<std::string>& paths);

}  // namespace dscale::train
