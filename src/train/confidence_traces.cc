#include "train/confidence_traces.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "io/byte_buffer.h"
#include "io/file_util.h"

namespace dscale::train {
namespace {

int64_t ConfidenceRecordBytes(int32_t positions) { return 12 + 4 * int64_t{positions}; }

Status CheckPositions(uint32_t positions) {
  if (positions == 0 || positions > kMaxConfidencePositions) {
    return DataLoss("positions γ is " + std::to_string(positions) + ", expected 1.." +
                    std::to_string(kMaxConfidencePositions));
  }
  return Status::Ok();
}

Result<ConfidenceTraces> ParseTraces(std::span<const char> bytes) {
  if (bytes.size() < static_cast<size_t>(kConfidenceTraceHeaderBytes)) {
    return DataLoss("truncated header: " + std::to_string(bytes.size()) + " of " +
                    std::to_string(kConfidenceTraceHeaderBytes) + " bytes");
  }
  ByteReader in(bytes);
  char magic[8];
  in.Bytes(magic, sizeof(magic));
  if (!std::equal(magic, magic + 8, kConfidenceTraceMagic)) {
    return DataLoss("bad magic: not a dscale confidence trace file");
  }
  if (const uint32_t version = in.U32(); version != kConfidenceTraceVersion) {
    return DataLoss("unsupported version " + std::to_string(version));
  }
  const uint32_t positions = in.U32();
  DSCALE_RETURN_IF_ERROR(CheckPositions(positions));
  ConfidenceTraces traces{.positions = static_cast<int32_t>(positions)};
  const auto record_bytes = static_cast<size_t>(ConfidenceRecordBytes(traces.positions));
  const size_t count = in.remaining() / record_bytes;
  if (const size_t partial = in.remaining() % record_bytes; partial != 0) {
    return DataLoss("record " + std::to_string(count) + " is truncated: " +
                    std::to_string(partial) + " of " + std::to_string(record_bytes) + " bytes");
  }
  std::vector<float> logits(positions);
  for (size_t r = 0; r < count; ++r) {
    const uint32_t prompt = in.U32();
    const uint32_t step = in.U32();
    const uint32_t accepted = in.U32();
    in.Floats(logits.data(), positions);
    Status status = traces.Append(prompt, step, accepted, logits.data());
    if (!status.ok()) return DataLoss("record " + std::to_string(r) + ": " + status.message());
  }
  return traces;
}

}  // namespace

Status ConfidenceTraces::Append(uint32_t prompt_id, uint32_t step, uint32_t accepted_drafts,
                                const float* record_logits) {
  if (accepted_drafts > static_cast<uint32_t>(positions)) {
    return InvalidArgument("accepted count " + std::to_string(accepted_drafts) +
                           " is outside [0, " + std::to_string(positions) + "]");
  }
  for (int32_t k = 0; k < positions; ++k) {
    if (!std::isfinite(record_logits[k])) {
      return InvalidArgument("confidence logit " + std::to_string(k) + " is not finite");
    }
  }
  prompt_ids.push_back(prompt_id);
  steps.push_back(step);
  accepted.push_back(accepted_drafts);
  logits.insert(logits.end(), record_logits, record_logits + positions);
  return Status::Ok();
}

Status WriteConfidenceTraces(const ConfidenceTraces& traces, const std::string& path) {
  if (Status s = CheckPositions(static_cast<uint32_t>(traces.positions)); !s.ok()) {
    return InvalidArgument("confidence traces " + path + ": " + s.message());
  }
  ByteWriter out;
  out.Bytes(kConfidenceTraceMagic, sizeof(kConfidenceTraceMagic));
  out.U32(kConfidenceTraceVersion);
  out.U32(static_cast<uint32_t>(traces.positions));
  for (size_t r = 0; r < traces.size(); ++r) {
    for (uint32_t v : {traces.prompt_ids[r], traces.steps[r], traces.accepted[r]}) out.U32(v);
    out.Floats(traces.logits_of(r), static_cast<size_t>(traces.positions));
  }
  Status written = WriteFileAtomically(path, out.bytes().data(), out.bytes().size());
  if (!written.ok()) return written.WithContext("confidence traces " + path);
  return Status::Ok();
}

Result<ConfidenceTraces> ReadConfidenceTraces(const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidArgument("no confidence trace files given");
  ConfidenceTraces all;
  for (size_t f = 0; f < paths.size(); ++f) {
    DSCALE_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(paths[f], kAnyFileSize));
    Result<ConfidenceTraces> one = ParseTraces(bytes);
    if (!one.ok()) return one.status().WithContext("confidence traces " + paths[f]);
    if (f == 0) {
      all.positions = one->positions;
    } else if (one->positions != all.positions) {
      return InvalidArgument("confidence traces " + paths[f] + ": " +
                             std::to_string(one->positions) + " positions, " + paths[0] +
                             " has " + std::to_string(all.positions));
    }
    for (size_t r = 0; r < one->size(); ++r) {
      DSCALE_RETURN_IF_ERROR(all.Append(one->prompt_ids[r], one->steps[r], one->accepted[r],
                                        one->logits_of(r)));
    }
  }
  return all;
}

}  // namespace dscale::train
