// Safetensors writer/reader round trips, sharded checkpoints and Checkpoint errors. Corrupt
// files are covered in safetensors_corruption_test.cc.

#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"

namespace dscale {
namespace {

using testing_io::ReadBytes;
using testing_io::ScopedTempDir;
using testing_io::WriteBytes;

std::vector<float> Ramp(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) {
    values[i] = scale * (static_cast<float>(i) - static_cast<float>(count) / 3.0f) + 0.1f;
  }
  return values;
}

TensorToWrite MakeTensor(std::string name, DType dtype, std::vector<int64_t> shape, float scale) {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  return {std::move(name), dtype, std::move(shape), Ramp(static_cast<size_t>(count), scale)};
}

std::vector<float> ReadValues(const TensorInfo& info) {
  std::vector<float> values(static_cast<size_t>(info.NumElements()));
  if (!values.empty()) ConvertToF32(info.dtype, info.data, values.size(), values.data());
  return values;
}

// Values that exercise rounding, sign, subnormals and the extremes of each type.
std::vector<float> AwkwardValues() {
  return {0.0f,
          -0.0f,
          1.0f,
          -1.5f,
          3.14159265f,
          1e-3f,
          -65504.0f,
          65520.0f,
          1e-40f,
          6e-8f,
          1.0e30f,
          -2.5e-20f,
          0.33333f,
          1234.5678f,
          std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()};
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

TEST(SafetensorsTest, F32RoundTripIsExact) {
  ScopedTempDir dir;
  std::vector<float> values = AwkwardValues();
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  const std::vector<TensorToWrite> tensors = {
      {"awkward", DType::kF32, {static_cast<int64_t>(values.size())}, values},
      MakeTensor("matrix", DType::kF32, {3, 5}, 0.37f),
      MakeTensor("cube", DType::kF32, {2, 1, 4}, -1.25f),
      {"scalar", DType::kF32, {}, {42.5f}},
      {"empty", DType::kF32, {0, 7}, {}},
  };
  const std::string path = dir.File("f32.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (const TensorToWrite& expected : tensors) {
    const TensorInfo* info = file->Find(expected.name);
    ASSERT_NE(info, nullptr) << expected.name;
    EXPECT_EQ(info->dtype, DType::kF32);
    EXPECT_EQ(info->shape, expected.shape);
    EXPECT_EQ(info->NumElements(), static_cast<int64_t>(expected.values.size()));
    const std::vector<float> got = ReadValues(*info);
    ASSERT_EQ(got.size(), expected.values.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(Bits(got[i]), Bits(expected.values[i])) << expected.name << "[" << i << "]";
    }
  }
  EXPECT_EQ(file->Find("absent"), nullptr);
  EXPECT_TRUE(file->metadata().empty());
}

// BF16 and F16 keep each value rounded to nearest even: exactly what the scalar conversions
// give, and within half a unit in the last place of the type.
void CheckHalfRoundTrip(DType dtype, float relative_step) {
  ScopedTempDir dir;
  const std::vector<float> values = AwkwardValues();
  const std::vector<TensorToWrite> tensors = {
      {"awkward", dtype, {static_cast<int64_t>(values.size())}, values},
      MakeTensor("ramp", dtype, {4, 33}, 0.013f),
  };
  const std::string path = dir.File("half.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  for (const TensorToWrite& expected : tensors) {
    const TensorInfo* info = file->Find(expected.name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, dtype);
    const std::vector<float> got = ReadValues(*info);
    ASSERT_EQ(got.size(), expected.values.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const float v = expected.values[i];
      const float rounded = dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(v)) : F16ToF32(F32ToF16(v));
      EXPECT_EQ(Bits(got[i]), Bits(rounded)) << expected.name << "[" << i << "]";
      if (std::isfinite(got[i]) && std::fabs(v) > 1e-4f && std::fabs(v) < 60000.0f) {
        EXPECT_LE(std::fabs(got[i] - v), std::fabs(v) * relative_step) << v;
      }
    }
  }
}

TEST(SafetensorsTest, Bf16RoundTripRoundsToNearest) {
  CheckHalfRoundTrip(DType::kBF16, 1.0f / 256);
}

TEST(SafetensorsTest, F16RoundTripRoundsToNearest) { CheckHalfRoundTrip(DType::kF16, 1.0f / 2048); }

TEST(SafetensorsTest, LayoutIsSortedPaddedContiguousAndAligned) {
  ScopedTempDir dir;
  const std::vector<TensorToWrite> tensors = {
      MakeTensor("z.bf16", DType::kBF16, {3}, 1.0f), MakeTensor("a.f16", DType::kF16, {5}, 1.0f),
      MakeTensor("m.f32", DType::kF32, {2, 3}, 1.0f), MakeTensor("b.f32", DType::kF32, {1}, 1.0f),
      MakeTensor("c.bf16", DType::kBF16, {0}, 1.0f)};
  const std::string path = dir.File("layout.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  const std::string bytes = ReadBytes(path);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  const std::string header = bytes.substr(8, header_size);
  EXPECT_EQ(header.find('{'), 0u);
  // Tensor names appear in the header in name order.
  EXPECT_LT(header.find("a.f16"), header.find("b.f32"));
  EXPECT_LT(header.find("b.f32"), header.find("m.f32"));
  EXPECT_LT(header.find("m.f32"), header.find("z.bf16"));

  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : file->tensors()) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t expected_begin = 0;
  for (const TensorInfo* t : by_offset) {
    EXPECT_EQ(t->begin, expected_begin) << t->name;  // contiguous, no gaps
    expected_begin = t->end;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % DTypeSize(t->dtype), 0u) << t->name;
  }
  EXPECT_EQ(8 + header_size + expected_begin, bytes.size());
  for (size_t i = 1; i < file->tensors().size(); ++i) {
    EXPECT_LT(file->tensors()[i - 1].name, file->tensors()[i].name);
  }
}

TEST(SafetensorsTest, MetadataRoundTrips) {
  ScopedTempDir dir;
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"note", "quotes \" and \\ and ünïcödé"}, {"empty", ""}};
  const std::string path = dir.File("meta.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {MakeTensor("w", DType::kBF16, {2}, 1.0f)}, metadata).ok());
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->metadata(), metadata);
  EXPECT_EQ(file->path(), path);
}

// Streamed tensors are made one at a time, in order, and read back like any other file.
TEST(SafetensorsTest, StreamingWriterMakesTensorsInOrder) {
  ScopedTempDir dir;
  const std::string path = dir.File("streamed.safetensors");
  const std::vector<TensorToWrite> tensors = {{"z_first", DType::kBF16, {2, 3}, {}},
                                              {"a_second", DType::kBF16, {5}, {}}};
  std::vector<size_t> made;
  const Status s = WriteSafetensorsStreaming(path, tensors, [&](size_t i) {
    made.push_back(i);
    return std::vector<float>(static_cast<size_t>(i == 0 ? 6 : 5), 1.5f + static_cast<float>(i));
  });
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(made, (std::vector<size_t>{0, 1}));
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_FALSE(checkpoint.ok());  // the file is not named model.safetensors
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const TensorInfo* first = file->Find("z_first");
  const TensorInfo* second = file->Find("a_second");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->begin, 0u);  // data in the order made, not by name
  EXPECT_EQ(second->begin, 12u);
  std::vector<float> values(5);
  ConvertToF32(DType::kBF16, second->data, 5, values.data());
  EXPECT_EQ(values, std::vector<float>(5, 2.5f));

  const Status wrong =
      WriteSafetensorsStreaming(path, tensors, [](size_t) { return std::vector<float>(4, 0.0f); });
  EXPECT_NE(wrong.message().find("made 4 values for shape [2, 3]"), std::string::npos)
      << wrong.message();
  const Status mixed =
      WriteSafetensorsStreaming(path, {{"a", DType::kBF16, {1}, {}}, {"b", DType::kF32, {1}, {}}},
                                [](size_t) { return std::vector<float>(1, 0.0f); });
  EXPECT_NE(mixed.message().find("one dtype"), std::string::npos) << mixed.message();
}

// Values may arrive in any pieces: one Append spanning two tensors, one tensor over three calls.
// F32 before BF16 keeps both ranges aligned; the reverse order is refused.
TEST(SafetensorsTest, StreamWriterTakesValuesInPieces) {
  ScopedTempDir dir;
  const std::string path = dir.File("pieces.safetensors");
  std::vector<TensorToWrite> tensors = {{"wide", DType::kF32, {3}, {}},
                                        {"empty", DType::kF32, {0}, {}},
                                        {"narrow", DType::kBF16, {2, 2}, {}}};
  Result<SafetensorsStreamWriter> writer = SafetensorsStreamWriter::Create(path, tensors);
  ASSERT_TRUE(writer.ok()) << writer.status().message();
  const std::vector<float> values = {0.5f, 1.5f, 2.5f, 3.0f, 4.0f, 5.0f, 6.0f};
  ASSERT_TRUE(writer->Append(values.data(), 2).ok());
  ASSERT_TRUE(writer->Append(values.data() + 2, 3).ok());  // ends "wide", starts "narrow"
  const Status early = writer->Commit();
  EXPECT_NE(early.message().find("\"narrow\" still needs 2 values"), std::string::npos)
      << early.message();
  ASSERT_TRUE(writer->Append(values.data() + 5, 2).ok());
  const Status past = writer->Append(values.data(), 1);
  EXPECT_NE(past.message().find("past the last tensor"), std::string::npos) << past.message();
  ASSERT_TRUE(writer->Commit().ok());

  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(ReadValues(*file->Find("wide")), std::vector<float>({0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(ReadValues(*file->Find("narrow")), std::vector<float>({3.0f, 4.0f, 5.0f, 6.0f}));
  EXPECT_EQ(file->Find("narrow")->begin, 12u);

  std::swap(tensors[0], tensors[2]);
  const Result<SafetensorsStreamWriter> misordered = SafetensorsStreamWriter::Create(path, tensors);
  ASSERT_FALSE(misordered.ok());
  EXPECT_NE(misordered.status().message().find("larger elements must come first"),
            std::string::npos)
      << misordered.status().message();
}

// A streamed checkpoint: one model.safetensors when it fits a shard, else shards in the given
// order with an index; inside each file the F32 tensors are made first.
TEST(SafetensorsTest, StreamedCheckpointShardsInOrder) {
  std::vector<TensorToWrite> tensors = {{"b.first", DType::kBF16, {4}, {}},
                                        {"a.second", DType::kF32, {2}, {}},
                                        {"c.third", DType::kBF16, {6}, {}}};
  for (const uint64_t shard_bytes : {uint64_t{1} << 20, uint64_t{16}}) {
    ScopedTempDir dir;
    std::vector<size_t> made;
    const Status s = WriteCheckpointStreaming(
        dir.path(), tensors, shard_bytes, [&](size_t i, SafetensorsStreamWriter& writer) {
          made.push_back(i);
          int64_t count = 1;
          for (const int64_t d : tensors[i].shape) count *= d;
          const std::vector<float> values(static_cast<size_t>(count), static_cast<float>(i));
          return writer.Append(values.data(), values.size());
        });
    ASSERT_TRUE(s.ok()) << s.message();
    const bool sharded = shard_bytes == 16;
    EXPECT_EQ(made, (std::vector<size_t>{1, 0, 2})) << "F32 first, then the given order";
    EXPECT_EQ(std::filesystem::exists(dir.File("model.safetensors")), !sharded);
    EXPECT_EQ(std::filesystem::exists(dir.File("model-00002-of-00002.safetensors")), sharded);
    Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
    for (size_t i = 0; i < tensors.size(); ++i) {
      Result<std::vector<float>> values = checkpoint->ReadF32(tensors[i].name, tensors[i].shape);
      ASSERT_TRUE(values.ok()) << values.status().message();
      EXPECT_EQ(*values, std::vector<float>(values->size(), static_cast<float>(i)));
    }
  }
}

TEST(SafetensorsTest, EmptyFileListRoundTrips) {
  ScopedTempDir dir;
  const std::string path = dir.File("none.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {}).ok());
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_TRUE(file->tensors().empty());
}

TEST(SafetensorsTest, WriterRejectsBadTensors) {
  ScopedTempDir dir;
  const std::string path = dir.File("bad.safetensors");
  struct Case {
    std::vector<TensorToWrite> tensors;
    std::map<std::string, std::string> metadata;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{MakeTensor("a", DType::kF32, {2}, 1), MakeTensor("a", DType::kF16, {1}, 1)},
       {},
       "duplicate tensor name \"a\""},
      {{{"w", DType::kF32, {2, 2}, {1, 2, 3}}}, {}, "needs 4 values, got 3"},
      {{{"w", DType::kF32, {2, -1}, {}}}, {}, "negative dim"},
      {{MakeTensor("__metadata__", DType::kF32, {1}, 1)}, {}, "reserved"},
      {{MakeTensor("", DType::kF32, {1}, 1)}, {}, "empty name"},
      {{MakeTensor("bad\xff", DType::kF32, {1}, 1)}, {}, "not valid UTF-8"},
      {{MakeTensor("overlong\xc0\xaf", DType::kF32, {1}, 1)}, {}, "not valid UTF-8"},
      {{MakeTensor("cut\xe2\x82", DType::kF32, {1}, 1)}, {}, "not valid UTF-8"},
      {{MakeTensor("ok", DType::kF32, {1}, 1)}, {{"k", "\xed\xa0\x80"}}, "UTF-8"},
  };
  for (const Case& c : cases) {
    const Status status = WriteSafetensors(path, c.tensors, c.metadata);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_NE(status.message().find(c.expected), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsTest, WriterReplacesAtomicallyAndLeavesNoTemporaryFiles) {
  ScopedTempDir dir;
  const std::string path = dir.File("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {MakeTensor("old", DType::kF32, {4}, 1)}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {MakeTensor("new", DType::kF32, {2}, 1)}).ok());
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->Find("old"), nullptr);
  EXPECT_NE(file->Find("new"), nullptr);
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
  // Writing into a missing directory fails cleanly.
  const Status status = WriteSafetensors(dir.File("no/such/dir/x.safetensors"), {});
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find("no/such/dir/x.safetensors"), std::string::npos);
}

TEST(SafetensorsTest, MovedFileKeepsItsMapping) {
  ScopedTempDir dir;
  const std::string path = dir.File("move.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {MakeTensor("w", DType::kF32, {3}, 2.0f)}).ok());
  Result<SafetensorsFile> opened = SafetensorsFile::Open(path);
  ASSERT_TRUE(opened.ok());
  SafetensorsFile file = std::move(opened).value();
  SafetensorsFile other = std::move(file);
  file = std::move(other);  // move-assign back over the moved-from object
  ASSERT_NE(file.Find("w"), nullptr);
  EXPECT_EQ(ReadValues(*file.Find("w")), Ramp(3, 2.0f));
}

TEST(SafetensorsTest, OpenReportsMissingFilesAndDirectories) {
  ScopedTempDir dir;
  Result<SafetensorsFile> missing = SafetensorsFile::Open(dir.File("absent.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.safetensors"), std::string::npos);
  Result<SafetensorsFile> directory = SafetensorsFile::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kIoError);
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);
  const std::string fifo = dir.File("fifo.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<SafetensorsFile> pipe = SafetensorsFile::Open(fifo);  // must not block
  ASSERT_FALSE(pipe.ok());
  EXPECT_EQ(pipe.status().code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------------
// Checkpoint

std::vector<TensorToWrite> SmallModel() {
  return {MakeTensor("model.embed_tokens.weight", DType::kBF16, {16, 8}, 0.01f),
          MakeTensor("model.layers.0.mlp.down_proj.weight", DType::kBF16, {8, 12}, 0.02f),
          MakeTensor("model.layers.0.input_layernorm.weight", DType::kF32, {8}, 0.5f),
          MakeTensor("model.layers.0.self_attn.q_proj.weight", DType::kF16, {8, 8}, 0.03f),
          MakeTensor("model.layers.1.mlp.up_proj.weight", DType::kBF16, {12, 8}, -0.02f),
          MakeTensor("model.norm.weight", DType::kF32, {8}, 1.0f),
          MakeTensor("lm_head.weight", DType::kBF16, {16, 8}, 0.04f)};
}

std::vector<float> Rounded(const TensorToWrite& tensor) {
  std::vector<float> values(tensor.values.size());
  std::vector<uint16_t> bits(tensor.values.size());
  if (tensor.dtype == DType::kF32) return tensor.values;
  ConvertFromF32(tensor.dtype, tensor.values.data(), values.size(), bits.data());
  ConvertToF32(tensor.dtype, bits.data(), values.size(), values.data());
  return values;
}

void ExpectCheckpointHolds(const Checkpoint& checkpoint, const std::vector<TensorToWrite>& model) {
  std::vector<std::string> names;
  for (const TensorToWrite& tensor : model) {
    names.push_back(tensor.name);
    const Result<std::vector<float>> values = checkpoint.ReadF32(tensor.name, tensor.shape);
    ASSERT_TRUE(values.ok()) << values.status().message();
    EXPECT_EQ(*values, Rounded(tensor)) << tensor.name;
    ASSERT_NE(checkpoint.Find(tensor.name), nullptr);
    EXPECT_EQ(checkpoint.Find(tensor.name)->dtype, tensor.dtype);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(checkpoint.TensorNames(), names);
}

TEST(CheckpointTest, SingleFile) {
  ScopedTempDir dir;
  const std::vector<TensorToWrite> model = SmallModel();
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"), model).ok());
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
  EXPECT_EQ(checkpoint->dir(), dir.path());
  ExpectCheckpointHolds(*checkpoint, model);
  EXPECT_EQ(checkpoint->Find("absent"), nullptr);
}

TEST(CheckpointTest, ShardedRoundTrip) {
  ScopedTempDir dir;
  const std::vector<TensorToWrite> model = SmallModel();
  // Sizes in name order: 256, 256, 32, 192, 128, 192, 32 bytes. A 512-byte limit gives
  // [256 256] [32 192 128] [192 32].
  ASSERT_TRUE(WriteShardedSafetensors(dir.path(), model, 512).ok());
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"}) {
    Result<SafetensorsFile> file = SafetensorsFile::Open(dir.File(shard));
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ(file->metadata().at("format"), "pt");
    uint64_t bytes = 0;
    for (const TensorInfo& t : file->tensors()) bytes += t.end - t.begin;
    EXPECT_LE(bytes, 512u) << shard;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("model-00004-of-00004.safetensors")));

  const nlohmann::json index =
      nlohmann::json::parse(ReadBytes(dir.File("model.safetensors.index.json")));
  EXPECT_EQ(index["metadata"]["total_size"], 256 + 256 + 32 + 192 + 128 + 192 + 32);
  EXPECT_EQ(index["weight_map"].size(), model.size());
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["model.layers.0.mlp.down_proj.weight"],
            "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["model.norm.weight"], "model-00003-of-00003.safetensors");

  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
  ExpectCheckpointHolds(*checkpoint, model);
}

TEST(CheckpointTest, ShardingGivesAnOversizedTensorItsOwnShard) {
  ScopedTempDir dir;
  const std::vector<TensorToWrite> model = SmallModel();
  ASSERT_TRUE(WriteShardedSafetensors(dir.path(), model, 100).ok());
  // With a 100-byte limit every tensor of this model ends up in a shard of its own.
  EXPECT_TRUE(std::filesystem::exists(dir.File("model-00007-of-00007.safetensors")));
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
  ExpectCheckpointHolds(*checkpoint, model);

  EXPECT_EQ(WriteShardedSafetensors(dir.path(), model, 0).code(), StatusCode::kInvalidArgument);
  std::vector<TensorToWrite> duplicated = model;
  duplicated.push_back(model[0]);
  const Status status = WriteShardedSafetensors(dir.File("dup"), duplicated, 1000);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("duplicate"), std::string::npos);
}

TEST(CheckpointTest, NonFiniteWeightsAreRejectedNamingTheTensor) {
  ScopedTempDir dir;
  TensorToWrite bad = MakeTensor("model.layers.0.mlp.down_proj.weight", DType::kBF16, {2, 3}, 1);
  bad.values[4] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"),
                               {bad, MakeTensor("fine", DType::kF32, {2}, 1)})
                  .ok());
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status().message();
  EXPECT_TRUE(checkpoint->ReadF32("fine", {2}).ok());
  const Result<std::vector<float>> values = checkpoint->ReadF32(bad.name, {2, 3});
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(values.status().message().find("\"model.layers.0.mlp.down_proj.weight\""),
            std::string::npos)
      << values.status().message();
  EXPECT_NE(values.status().message().find("element 4 is NaN or infinite"), std::string::npos)
      << values.status().message();
}

TEST(CheckpointTest, IndexTakesPrecedenceOverSingleFile) {
  ScopedTempDir dir;
  ASSERT_TRUE(
      WriteShardedSafetensors(dir.path(), {MakeTensor("sharded", DType::kF32, {2}, 1)}, 1000).ok());
  ASSERT_TRUE(
      WriteSafetensors(dir.File("model.safetensors"), {MakeTensor("single", DType::kF32, {2}, 1)})
          .ok());
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_EQ(checkpoint->TensorNames(), std::vector<std::string>{"sharded"});
}

TEST(CheckpointTest, MissingFilesAreNotFound) {
  ScopedTempDir dir;
  for (const std::string& path : {dir.path(), dir.File("does-not-exist")}) {
    Result<Checkpoint> checkpoint = Checkpoint::Open(path);
    ASSERT_FALSE(checkpoint.ok());
    EXPECT_EQ(checkpoint.status().code(), StatusCode::kNotFound);
    EXPECT_NE(checkpoint.status().message().find(path), std::string::npos);
    EXPECT_NE(checkpoint.status().message().find("model.safetensors"), std::string::npos);
  }
}

TEST(CheckpointTest, ReadF32ChecksNameAndShape) {
  ScopedTempDir dir;
  ASSERT_TRUE(
      WriteSafetensors(dir.File("model.safetensors"), {MakeTensor("w", DType::kBF16, {4, 6}, 1)})
          .ok());
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  for (const std::vector<int64_t>& wrong :
       std::vector<std::vector<int64_t>>{{6, 4}, {24}, {4, 6, 1}, {}, {4, 5}}) {
    const Result<std::vector<float>> values = checkpoint->ReadF32("w", wrong);
    ASSERT_FALSE(values.ok());
    EXPECT_EQ(values.status().code(), StatusCode::kInvalidArgument);
    const std::string& message = values.status().message();
    EXPECT_NE(message.find("tensor \"w\""), std::string::npos) << message;
    EXPECT_NE(message.find(dir.File("model.safetensors")), std::string::npos) << message;
    EXPECT_NE(message.find("expected shape " + ShapeToString(wrong) + ", got [4, 6]"),
              std::string::npos)
        << message;
  }
  const Result<std::vector<float>> missing = checkpoint->ReadF32("nope", {1});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("\"nope\""), std::string::npos);
  EXPECT_EQ(ShapeToString({4096, 4096}), "[4096, 4096]");
  EXPECT_EQ(ShapeToString({}), "[]");
}

// Index files that point at the wrong place or are not an index at all.
TEST(CheckpointTest, BadIndexFiles) {
  ScopedTempDir dir;
  ASSERT_TRUE(
      WriteSafetensors(dir.File("shard.safetensors"), {MakeTensor("a", DType::kF32, {2}, 1)}).ok());
  const std::string index_path = dir.File("model.safetensors.index.json");
  struct Case {
    std::string index;
    StatusCode code;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {R"({"weight_map": {"a": "missing.safetensors"}})",
       StatusCode::kNotFound,
       {"missing.safetensors", index_path}},
      {R"({"weight_map": {"a": "shard.safetensors", "b": "shard.safetensors"}})",
       StatusCode::kDataLoss,
       {"tensor \"b\"", "\"shard.safetensors\"", "does not contain it"}},
      {R"({"weight_map": {"a": "shard.safetensors",)", StatusCode::kDataLoss, {"not valid JSON"}},
      {"", StatusCode::kDataLoss, {"not valid JSON"}},
      {R"(["weight_map"])", StatusCode::kDataLoss, {"expected a JSON object"}},
      {R"({"metadata": {}})", StatusCode::kDataLoss, {"\"weight_map\" is missing"}},
      {R"({"weight_map": ["a"]})", StatusCode::kDataLoss, {"\"weight_map\" is missing or not"}},
      {R"({"weight_map": {"a": 3}})", StatusCode::kDataLoss, {"tensor \"a\" maps to 3"}},
      {R"({"weight_map": {"a": "../shard.safetensors"}})",
       StatusCode::kDataLoss,
       {"\"../shard.safetensors\"", "same directory"}},
      {R"({"weight_map": {"a": ""}})", StatusCode::kDataLoss, {"maps to \"\""}},
  };
  for (const Case& c : cases) {
    WriteBytes(index_path, c.index);
    Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
    ASSERT_FALSE(checkpoint.ok()) << c.index;
    EXPECT_EQ(checkpoint.status().code(), c.code) << checkpoint.status().message();
    EXPECT_NE(checkpoint.status().message().find(index_path), std::string::npos)
        << checkpoint.status().message();
    for (const std::string& part : c.expected) {
      EXPECT_NE(checkpoint.status().message().find(part), std::string::npos)
          << checkpoint.status().message() << " lacks " << part;
    }
  }
  // A corrupt shard is reported with both the index and the shard path.
  WriteBytes(dir.File("shard.safetensors"), "bad");
  WriteBytes(index_path, R"({"weight_map": {"a": "shard.safetensors"}})");
  Result<Checkpoint> corrupt = Checkpoint::Open(dir.path());
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(corrupt.status().message().find(dir.File("shard.safetensors")), std::string::npos);
  EXPECT_NE(corrupt.status().message().find(index_path), std::string::npos);
}

TEST(CheckpointTest, EachShardIsOpenedOnce) {
  ScopedTempDir dir;
  std::vector<TensorToWrite> model = SmallModel();
  ASSERT_TRUE(WriteShardedSafetensors(dir.path(), model, 512).ok());
  Result<Checkpoint> checkpoint = Checkpoint::Open(dir.path());
  ASSERT_TRUE(checkpoint.ok());
  // Tensors of one shard share its mapping: their data pointers differ by their offsets.
  const TensorInfo* a = checkpoint->Find("model.layers.0.input_layernorm.weight");
  const TensorInfo* b = checkpoint->Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->data - static_cast<std::ptrdiff_t>(a->begin),
            b->data - static_cast<std::ptrdiff_t>(b->begin));
}

}  // namespace
}  // namespace dscale
