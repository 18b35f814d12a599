#include "train/trace_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dvl/scoped_temp_dir.h"
#include "io/file_util.h"
#include "synthetic_traces.h"

namespace dscale::train {
namespace {

class TraceFileTest : public ::testing::Test {
 protected:
  // Writes `set` to a new trace file in the test's directory and returns its path.
  std::string WriteTraces(const TraceSet& set, const std::string& name);
  void ExpectReadError(const std::vector<char>& bytes, const std::string& what);
  std::string TempPath(const std::string& name) const { return dir_.File(name); }

  test_util::ScopedTempDir dir_;
};

std::string TraceFileTest::WriteTraces(const TraceSet& set, const std::string& name) {
  const std::string path = TempPath(name);
  Result<TraceWriter> writer = TraceWriter::Create(path, set.header);
  DSCALE_CHECK(writer.ok());
  for (size_t r = 0; r < set.size(); ++r)
    DSCALE_CHECK(writer->Append(set.meta[r], set.features_of(r)).ok());
  DSCALE_CHECK(writer->Close().ok());
  return path;
}

std::vector<char> Bytes(const std::string& path) {
  const std::string bytes = ReadFileToString(path, kAnyFileSize).value();
  return {bytes.begin(), bytes.end()};
}

void TraceFileTest::ExpectReadError(const std::vector<char>& bytes, const std::string& what) {
  const std::string path = TempPath("corrupt.trace");
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  Result<TraceSet> set = ReadTraceFile(path);
  ASSERT_FALSE(set.ok()) << "expected failure: " << what;
  EXPECT_EQ(set.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(set.status().message().find(what), std::string::npos) << set.status().message();
  EXPECT_NE(set.status().message().find(path), std::string::npos) << set.status().message();
}

void PutU32(std::vector<char>& bytes, size_t offset, uint32_t v) {
  std::memcpy(bytes.data() + offset, &v, 4);
}

TEST_F(TraceFileTest, RoundTrip) {
  const TraceSet set = testing::SyntheticTraces(37, 1);
  const std::string path = WriteTraces(set, "roundtrip.trace");
  EXPECT_EQ(std::filesystem::file_size(path),
            static_cast<uintmax_t>(kTraceHeaderBytes + 37 * kTraceRecordBytes));
  Result<TraceSet> back = ReadTraceFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->header, set.header);
  EXPECT_EQ(back->meta, set.meta);
  EXPECT_EQ(back->features, set.features);
}

TEST_F(TraceFileTest, EmptyFileHasNoRecords) {
  TraceSet set = testing::SyntheticTraces(0, 1);
  Result<TraceSet> back = ReadTraceFile(WriteTraces(set, "empty.trace"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->size(), 0u);
}

TEST_F(TraceFileTest, ReadsSeveralFilesWithEqualHeaders) {
  const TraceSet a = testing::SyntheticTraces(5, 1);
  const TraceSet b = testing::SyntheticTraces(7, 2);
  Result<TraceSet> both = ReadTraceFiles({WriteTraces(a, "a.trace"), WriteTraces(b, "b.trace")});
  ASSERT_TRUE(both.ok());
  ASSERT_EQ(both->size(), 12u);
  EXPECT_EQ(both->meta[5], b.meta[0]);
  EXPECT_EQ(both->features_of(5)[0], b.features_of(0)[0]);

  TraceSet other = b;
  other.header.projection_seed = 78;
  Result<TraceSet> mixed =
      ReadTraceFiles({WriteTraces(a, "a.trace"), WriteTraces(other, "other.trace")});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("differs"), std::string::npos);
  EXPECT_FALSE(ReadTraceFiles({}).ok());
}

TEST_F(TraceFileTest, RejectsEveryCorruption) {
  const std::vector<char> good = Bytes(WriteTraces(testing::SyntheticTraces(4, 3), "good.trace"));
  const size_t record = kTraceRecordBytes;
  const size_t first = kTraceHeaderBytes;
  std::vector<char> bad = good;
  bad[3] = 'x';
  ExpectReadError(bad, "bad magic");
  bad = good;
  PutU32(bad, 8, 9);
  ExpectReadError(bad, "unsupported version 9");
  bad = good;
  PutU32(bad, 12, 1000);
  ExpectReadError(bad, "feature count is 1000");
  bad = good;
  PutU32(bad, 16, 8);
  ExpectReadError(bad, "block width is 8");
  bad = good;
  PutU32(bad, 24, 3);
  ExpectReadError(bad, "vocabulary size 3");
  bad = good;
  PutU32(bad, 28, 1);
  ExpectReadError(bad, "reserved");
  ExpectReadError(std::vector<char>(good.begin(), good.begin() + 39), "truncated header");
  ExpectReadError(std::vector<char>(good.begin(), good.end() - 100),
                  "record 3 is truncated: 6856 of 6956 bytes");
  bad = good;
  PutU32(bad, first + 2 * record + 12, 16);  // y of record 2
  ExpectReadError(bad, "record 2: accepted count 16 is outside [0, 15]");
  bad = good;
  PutU32(bad, first + record + 4, 0);  // N of record 1
  ExpectReadError(bad, "record 1: live count N is 0");
  bad = good;
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(bad.data() + first + 3 * record + 16 + 4 * 100, &inf, 4);
  ExpectReadError(bad, "record 3: feature 100 is not finite");

  Result<TraceSet> missing = ReadTraceFile(TempPath("missing.trace"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(TraceFileTest, WriterRejectsInvalidRecords) {
  const TraceSet set = testing::SyntheticTraces(1, 4);
  Result<TraceWriter> writer = TraceWriter::Create(TempPath("writer.trace"), set.header);
  ASSERT_TRUE(writer.ok());
  TraceMeta meta = set.meta[0];
  meta.accepted = 15;
  EXPECT_TRUE(writer->Append(meta, set.features_of(0)).ok());
  meta.accepted = 16;
  Status bad = writer->Append(meta, set.features_of(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("record 1"), std::string::npos);
  EXPECT_EQ(writer->records(), 1);
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_FALSE(writer->Append(set.meta[0], set.features_of(0)).ok());

  TraceHeader header = set.header;
  header.drafter_hidden = 0;
  EXPECT_FALSE(TraceWriter::Create(TempPath("bad_header.trace"), header).ok());
}

}  // namespace
}  // namespace dscale::train
