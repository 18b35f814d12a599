#include "train/trace_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <span>
#include <utility>

#include "io/byte_buffer.h"
#include "io/file_util.h"

namespace dscale::train {
namespace {

constexpr uint32_t kMaxDrafterHidden = 1u << 20;
constexpr uint32_t kMaxDrafterVocab = 1u << 24;

Status CheckHeader(const TraceHeader& h) {
  if (h.feature_count != dvl::kFeatureCount) {
    return DataLoss("feature count is " + std::to_string(h.feature_count) + ", expected " +
                    std::to_string(dvl::kFeatureCount));
  }
  if (h.width != dvl::kBlockWidth) {
    return DataLoss("block width is " + std::to_string(h.width) + ", expected " +
                    std::to_string(dvl::kBlockWidth));
  }
  if (h.drafter_hidden == 0 || h.drafter_hidden > kMaxDrafterHidden) {
    return DataLoss("drafter hidden size " + std::to_string(h.drafter_hidden) + " is out of range");
  }
  if (h.drafter_vocab < dvl::kTopRanks || h.drafter_vocab > kMaxDrafterVocab) {
    return DataLoss("drafter vocabulary size " + std::to_string(h.drafter_vocab) +
                    " is out of range");
  }
  return Status::Ok();
}

// Checks one record's fields; the caller adds the record index.
Status CheckRecord(const TraceMeta& m, const float* features, uint32_t width) {
  if (m.live_count == 0) return InvalidArgument("live count N is 0");
  if (m.accepted >= width) {
    return InvalidArgument("accepted count " + std::to_string(m.accepted) + " is outside [0, " +
                           std::to_string(width - 1) + "]");
  }
  for (int d = 0; d < dvl::kFeatureCount; ++d) {
    if (!std::isfinite(features[d])) {
      return InvalidArgument("feature " + std::to_string(d) + " is not finite");
    }
  }
  return Status::Ok();
}

Result<TraceHeader> ParseHeader(ByteReader& in) {
  char magic[8];
  in.Bytes(magic, sizeof(magic));
  if (!std::equal(magic, magic + 8, kTraceMagic)) {
    return DataLoss("bad magic: not a dscale trace file");
  }
  const uint32_t version = in.U32();
  if (version != kTraceFileVersion) {
    return DataLoss("unsupported version " + std::to_string(version) + " (this build reads " +
                    std::to_string(kTraceFileVersion) + ")");
  }
  TraceHeader h;
  h.feature_count = in.U32();
  h.width = in.U32();
  h.drafter_hidden = in.U32();
  h.drafter_vocab = in.U32();
  const uint32_t reserved = in.U32();
  h.projection_seed = in.U64();
  if (reserved != 0) return DataLoss("reserved header field is " + std::to_string(reserved));
  DSCALE_RETURN_IF_ERROR(CheckHeader(h));
  return h;
}

Result<TraceSet> ParseTrace(std::span<const char> bytes) {
  if (bytes.size() < static_cast<size_t>(kTraceHeaderBytes)) {
    return DataLoss("truncated header: " + std::to_string(bytes.size()) + " of " +
                    std::to_string(kTraceHeaderBytes) + " bytes");
  }
  ByteReader in(bytes);
  TraceSet set;
  DSCALE_ASSIGN_OR_RETURN(set.header, ParseHeader(in));
  const size_t count = in.remaining() / kTraceRecordBytes;
  if (const size_t partial = in.remaining() % kTraceRecordBytes; partial != 0) {
    return DataLoss("record " + std::to_string(count) +
                    " is truncated: " + std::to_string(partial) + " of " +
                    std::to_string(kTraceRecordBytes) + " bytes");
  }
  set.meta.resize(count);
  set.features.resize(count * dvl::kFeatureCount);
  for (size_t r = 0; r < count; ++r) {
    TraceMeta& m = set.meta[r];
    m.prompt_id = in.U32();
    m.live_count = in.U32();
    m.step = in.U32();
    m.accepted = in.U32();
    float* features = set.features.data() + r * dvl::kFeatureCount;
    in.Floats(features, dvl::kFeatureCount);
    Status status = CheckRecord(m, features, set.header.width);
    if (!status.ok()) return DataLoss("record " + std::to_string(r) + ": " + status.message());
  }
  return set;
}

}  // namespace

TraceWriter::TraceWriter(std::string path, std::FILE* file, TraceHeader header)
    : path_(std::move(path)), file_(file), header_(header) {}

Result<TraceWriter> TraceWriter::Create(const std::string& path, const TraceHeader& header) {
  Status valid = CheckHeader(header);
  if (!valid.ok()) return InvalidArgument("trace file " + path + ": " + valid.message());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return IoError("trace file " + path + ": cannot create: " + std::strerror(errno));
  TraceWriter writer(path, f, header);
  ByteWriter out;
  out.Bytes(kTraceMagic, sizeof(kTraceMagic));
  for (uint32_t v : {kTraceFileVersion, header.feature_count, header.width, header.drafter_hidden,
                     header.drafter_vocab, 0u}) {
    out.U32(v);
  }
  out.U64(header.projection_seed);
  if (std::fwrite(out.bytes().data(), 1, out.bytes().size(), f) != out.bytes().size()) {
    return IoError("trace file " + path + ": header write failed");
  }
  return writer;
}

Status TraceWriter::Append(const TraceMeta& meta, const float* features) {
  if (!file_) return InvalidArgument("trace file " + path_ + ": append after close");
  Status valid = CheckRecord(meta, features, header_.width);
  if (!valid.ok()) {
    return InvalidArgument("trace file " + path_ + ": record " + std::to_string(records_) + ": " +
                           valid.message());
  }
  ByteWriter out;
  for (uint32_t v : {meta.prompt_id, meta.live_count, meta.step, meta.accepted}) out.U32(v);
  out.Floats(features, dvl::kFeatureCount);
  if (std::fwrite(out.bytes().data(), 1, out.bytes().size(), file_.get()) != out.bytes().size()) {
    return IoError("trace file " + path_ + ": write failed at record " + std::to_string(records_));
  }
  ++records_;
  return Status::Ok();
}

Status TraceWriter::Close() {
  if (!file_) return Status::Ok();
  std::FILE* f = file_.release();
  const bool flushed = std::fflush(f) == 0;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) return IoError("trace file " + path_ + ": close failed");
  return Status::Ok();
}

Result<TraceSet> ReadTraceFile(const std::string& path) {
  DSCALE_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path, kAnyFileSize));
  Result<TraceSet> set = ParseTrace(bytes);
  if (!set.ok()) return set.status().WithContext("trace file " + path);
  return set;
}

Result<TraceSet> ReadTraceFiles(const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidArgument("no trace files given");
  TraceSet all;
  for (size_t f = 0; f < paths.size(); ++f) {
    DSCALE_ASSIGN_OR_RETURN(TraceSet one, ReadTraceFile(paths[f]));
    if (f == 0) {
      all.header = one.header;
    } else if (!(one.header == all.header)) {
      return InvalidArgument("trace file " + paths[f] +
                             ": header (drafter dims, projection seed) differs from " + paths[0]);
    }
    all.meta.insert(all.meta.end(), one.meta.begin(), one.meta.end());
    all.features.insert(all.features.end(), one.features.begin(), one.features.end());
  }
  return all;
}

}  // namespace dscale::train
