#pragma once
// Predictor training traces: what `dscale collect` logs for every live request of every
// full-width verification step. The byte layout is specified in docs/TRACE_FORMAT.md; in short
// a 40-byte header then fixed-size records, all little-endian:
//
//   header   magic "DSCLTRCE", u32 version, u32 feature count (1735), u32 block width W (16),
//            u32 drafter hidden size, u32 drafter vocabulary size, u32 reserved (0),
//            u64 projection seed
//   record   u32 prompt id, u32 live count N, u32 step, u32 accepted y (0..W−1),
//            f32 features[1735]
//
// There is no record count: a writer streams records, and a reader derives the count from the
// file size, so an interrupted write shows up as a truncated last record.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/dvl_shapes.h"
#include "core/status.h"

namespace dscale::train {

inline constexpr uint32_t kTraceFileVersion = 1;
inline constexpr char kTraceMagic[8] = {'D', 'S', 'C', 'L', 'T', 'R', 'C', 'E'};
inline constexpr int64_t kTraceHeaderBytes = 40;
inline constexpr int64_t kTraceRecordBytes = 16 + 4 * dvl::kFeatureCount;  // 6956

struct TraceHeader {
  uint32_t feature_count = dvl::kFeatureCount;
  uint32_t width = dvl::kBlockWidth;
  uint32_t drafter_hidden = 0;  // the drafter the features were extracted from
  uint32_t drafter_vocab = 0;
  uint64_t projection_seed = 0;  // seed of the fixed projections used for the features

  bool operator==(const TraceHeader&) const = default;
};

// Everything of a record except its features.
struct TraceMeta {
  uint32_t prompt_id = 0;   // identifies the prompt (for prompt-disjoint splits)
  uint32_t live_count = 0;  // N at that step, ≥ 1
  uint32_t step = 0;        // collection step; records of one step form a cohort
  uint32_t accepted = 0;    // y: drafts accepted by full-width verification, 0..W−1

  bool operator==(const TraceMeta&) const = default;
};

// Records of one or more trace files with the same header.
struct TraceSet {
  TraceHeader header;
  std::vector<TraceMeta> meta;  // [R]
  std::vector<float> features;  // [R, 1735] row-major

  size_t size() const { return meta.size(); }
  const float* features_of(size_t r) const { return features.data() + r * dvl::kFeatureCount; }
};

// Streams records to a new trace file. Not thread-safe.
class TraceWriter {
 public:
  // Creates (truncates) `path` and writes the header.
  static Result<TraceWriter> Create(const std::string& path, const TraceHeader& header);

  // Appends one record; InvalidArgument for N = 0, y ≥ W or non-finite features.
  Status Append(const TraceMeta& meta, const float* features);
  // Flushes and closes; further appends fail. Also done (errors ignored) by the destructor.
  Status Close();

  int64_t records() const { return records_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  TraceWriter(std::string path, std::FILE* file, TraceHeader header);

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  TraceHeader header_;
  int64_t records_ = 0;
};

// Reads one file with full validation; errors name the file and, for record problems, the
// record index.
Result<TraceSet> ReadTraceFile(const std::string& path);

// Reads several files into one set; their headers must agree.
Result<TraceSet> ReadTraceFiles(const std::vector<std::string>& paths);

}  // namespace dscale::train
