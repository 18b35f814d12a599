// Corrupt safetensors files: every truncation, every header byte overwritten, random header
// damage, and one hand-written header per validation rule. A corrupt file must either open with
// every tensor inside the file, or fail with a message naming the file; it must never crash.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace dscale {
namespace {

using testing_io::LengthPrefix;
using testing_io::ReadBytes;
using testing_io::SafetensorsBytes;
using testing_io::ScopedTempDir;
using testing_io::WriteBytes;

// A small valid file: three dtypes, an empty tensor and metadata.
std::string ValidFileBytes(const ScopedTempDir& dir) {
  const std::string path = dir.File("valid.safetensors");
  const std::vector<TensorToWrite> tensors = {
      {"w.f32", DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}},
      {"b.bf16", DType::kBF16, {5}, {1, -1, 0.5, 2, 3}},
      {"h.f16", DType::kF16, {2, 2}, {0.25, 8, -3, 1}},
      {"e", DType::kF32, {0}, {}},
  };
  EXPECT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  return ReadBytes(path);
}

uint64_t HeaderSize(const std::string& bytes) {
  uint64_t size = 0;
  std::memcpy(&size, bytes.data(), 8);
  return size;
}

// Writes `bytes`, opens them and checks the outcome. Returns whether the open succeeded.
bool CheckOpenIsSafe(const std::string& path, const std::string& bytes) {
  WriteBytes(path, bytes);
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  if (!file.ok()) {
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << file.status().message();
    EXPECT_NE(file.status().message().find(path), std::string::npos) << file.status().message();
    return false;
  }
  // Opened: every range must lie in the data region and match its shape, and all data pointers
  // must come from one base. Reading every byte would fault if a pointer left the mapping.
  const uint64_t header_size = HeaderSize(bytes);
  EXPECT_LE(8 + header_size, bytes.size());
  const uint64_t data_size = bytes.size() - 8 - header_size;
  const std::byte* base = nullptr;
  unsigned sum = 0;  // touching the bytes is the point; the value is not
  for (const TensorInfo& t : file->tensors()) {
    EXPECT_LE(t.begin, t.end) << t.name;
    EXPECT_LE(t.end, data_size) << t.name;
    EXPECT_EQ(t.end - t.begin, static_cast<uint64_t>(t.NumElements()) * DTypeSize(t.dtype));
    const std::byte* tensor_base = t.data - static_cast<std::ptrdiff_t>(t.begin);
    if (base == nullptr) base = tensor_base;
    EXPECT_EQ(tensor_base, base) << t.name;
    for (uint64_t i = 0; i < t.end - t.begin; ++i) sum += static_cast<unsigned>(t.data[i]);
  }
  volatile unsigned sink = sum;
  (void)sink;
  return true;
}

TEST(SafetensorsCorruptionTest, EveryTruncationFailsCleanly) {
  ScopedTempDir dir;
  const std::string valid = ValidFileBytes(dir);
  const std::string path = dir.File("truncated.safetensors");
  for (size_t length = 0; length < valid.size(); ++length) {
    SCOPED_TRACE("length " + std::to_string(length));
    // The data region ends with the last tensor's bytes, so any cut loses some of them.
    EXPECT_FALSE(CheckOpenIsSafe(path, valid.substr(0, length)));
  }
  EXPECT_TRUE(CheckOpenIsSafe(path, valid));
}

TEST(SafetensorsCorruptionTest, EveryHeaderByteOverwritten) {
  ScopedTempDir dir;
  const std::string valid = ValidFileBytes(dir);
  const std::string path = dir.File("flipped.safetensors");
  const size_t header_end = 8 + HeaderSize(valid);
  const std::string replacements = std::string(1, '\0') + "\xff\"{}[],:09-. e\\";
  int opened = 0;
  for (size_t position = 0; position < header_end; ++position) {
    SCOPED_TRACE("byte " + std::to_string(position));
    std::string bytes = valid;
    const char original = valid[position];
    std::string values = replacements;
    for (const char flip : {'\x01', '\x20', '\x80'}) values.push_back(original ^ flip);
    for (const char value : values) {
      if (value == original) continue;
      bytes[position] = value;
      opened += CheckOpenIsSafe(path, bytes) ? 1 : 0;
    }
  }
  // Some damage is harmless (a digit in a metadata string, spaces in the padding).
  EXPECT_GT(opened, 0);
}

TEST(SafetensorsCorruptionTest, RandomHeaderDamage) {
  ScopedTempDir dir;
  const std::string valid = ValidFileBytes(dir);
  const std::string path = dir.File("random.safetensors");
  const size_t header_end = 8 + HeaderSize(valid);
  std::mt19937 rng(1234);
  for (int round = 0; round < 1500; ++round) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < edits; ++i) {
      bytes[8 + rng() % (header_end - 8)] = static_cast<char>(rng() % 256);
    }
    SCOPED_TRACE("round " + std::to_string(round));
    CheckOpenIsSafe(path, bytes);
  }
}

// ---------------------------------------------------------------------------------------------
// One hand-written file per validation rule.

struct BadFile {
  std::string label;
  std::string bytes;
  std::string expected;  // part of the message
};

std::string Entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"dtype": )" + dtype + R"(, "shape": )" + shape + R"(, "data_offsets": )" + offsets +
         "}";
}

std::string OneTensor(const std::string& entry, size_t data_size) {
  return SafetensorsBytes(R"({"x": )" + entry + "}", data_size);
}

std::vector<BadFile> BadFiles() {
  const std::string ok_entry = Entry(R"("F32")", "[2]", "[0, 8]");
  return {
      {"empty file", "", "file is 0 bytes, shorter than the 8-byte header length"},
      {"short file", "abc", "file is 3 bytes"},
      {"header longer than file", LengthPrefix(100) + "{}", "header length 100 is larger than"},
      {"absurd header length", LengthPrefix(uint64_t{1} << 62) + "{}", "is absurd"},
      {"header length past the end by one", LengthPrefix(3) + "{}", "header length 3"},
      {"not json", SafetensorsBytes(R"({"x": )", 0), "header is not valid JSON"},
      {"trailing junk", SafetensorsBytes("{} {}", 0), "header is not valid JSON"},
      {"nul in header", SafetensorsBytes(std::string("{\0}", 3), 0), "not valid JSON"},
      {"invalid utf-8", SafetensorsBytes("{\"\xff\": 1}", 0), "not valid JSON"},
      {"array header", SafetensorsBytes("[1, 2]", 0), "header is an array of 2 elements"},
      {"string header", SafetensorsBytes(R"("hi")", 0), "expected a JSON object"},
      {"entry not object", OneTensor("5", 0), "tensor \"x\": entry is 5"},
      {"entry is array", OneTensor("[]", 0), "tensor \"x\": entry is an empty array"},
      {"dtype I64", OneTensor(Entry(R"("I64")", "[1]", "[0, 8]"), 8),
       "tensor \"x\": unsupported dtype \"I64\" (only F32, BF16 and F16 are accepted)"},
      {"dtype F64", OneTensor(Entry(R"("F64")", "[1]", "[0, 8]"), 8),
       "tensor \"x\": unsupported dtype \"F64\""},
      {"dtype lower case", OneTensor(Entry(R"("f32")", "[1]", "[0, 4]"), 4), "dtype \"f32\""},
      {"dtype number", OneTensor(Entry("4", "[1]", "[0, 4]"), 4),
       "tensor \"x\": \"dtype\" is 4, expected a string"},
      {"missing dtype", OneTensor(R"({"shape": [1], "data_offsets": [0, 4]})", 4),
       "tensor \"x\": missing \"dtype\""},
      {"missing shape", OneTensor(R"({"dtype": "F32", "data_offsets": [0, 4]})", 4),
       "tensor \"x\": missing \"shape\""},
      {"missing offsets", OneTensor(R"({"dtype": "F32", "shape": [1]})", 4),
       "tensor \"x\": missing \"data_offsets\""},
      {"shape not array", OneTensor(Entry(R"("F32")", "4", "[0, 16]"), 16),
       "\"shape\" is 4, expected an array"},
      {"shape negative", OneTensor(Entry(R"("F32")", "[2, -1]", "[0, 8]"), 8),
       "\"shape\" element 1 is -1, expected a non-negative integer"},
      {"shape float", OneTensor(Entry(R"("F32")", "[2.5]", "[0, 8]"), 8),
       "\"shape\" element 0 is 2.5"},
      {"shape string", OneTensor(Entry(R"("F32")", R"(["2"])", "[0, 8]"), 8),
       "\"shape\" element 0 is \"2\""},
      {"shape null", OneTensor(Entry(R"("F32")", "[null]", "[0, 8]"), 8),
       "\"shape\" element 0 is null"},
      {"shape beyond int64", OneTensor(Entry(R"("F32")", "[18446744073709551615]", "[0, 8]"), 8),
       "\"shape\" element 0 is 18446744073709551615"},
      {"element count overflow",
       OneTensor(Entry(R"("F32")", "[4294967296, 4294967296, 4]", "[0, 8]"), 8),
       "shape [4294967296, 4294967296, 4] × F32 overflows"},
      {"byte count overflow", OneTensor(Entry(R"("BF16")", "[4611686018427387904]", "[0, 8]"), 8),
       "overflows"},
      {"offsets not array", OneTensor(Entry(R"("F32")", "[1]", R"("0")"), 4),
       "\"data_offsets\" is \"0\", expected two non-negative integers"},
      {"offsets one element", OneTensor(Entry(R"("F32")", "[1]", "[4]"), 4),
       "\"data_offsets\" is an array of 1 element"},
      {"offsets three elements", OneTensor(Entry(R"("F32")", "[1]", "[0, 4, 8]"), 8),
       "\"data_offsets\" is an array of 3 elements"},
      {"offsets negative", OneTensor(Entry(R"("F32")", "[1]", "[-4, 0]"), 4),
       "\"data_offsets\" element 0 is -4"},
      {"offsets float", OneTensor(Entry(R"("F32")", "[1]", "[0, 4.0]"), 4),
       "\"data_offsets\" element 1 is 4.0"},
      {"offsets reversed", OneTensor(Entry(R"("F32")", "[1]", "[8, 4]"), 8),
       "data_offsets [8, 4] begin after they end"},
      {"size mismatch", OneTensor(Entry(R"("F32")", "[2, 2]", "[0, 12]"), 16),
       "tensor \"x\": data_offsets [0, 12] cover 12 bytes but shape [2, 2] × F32 needs 16"},
      {"size mismatch bf16", OneTensor(Entry(R"("BF16")", "[3]", "[0, 4]"), 8),
       "cover 4 bytes but shape [3] × BF16 needs 6"},
      {"beyond data", OneTensor(Entry(R"("F32")", "[4]", "[0, 16]"), 8),
       "data_offsets [0, 16] reach beyond the data region of 8 bytes"},
      {"beyond data far",
       OneTensor(Entry(R"("F32")", "[1]",
                       "[4611686018427387900, "
                       "4611686018427387904]"),
                 8),
       "reach beyond the data region"},
      {"overlap",
       SafetensorsBytes(R"({"a": )" + Entry(R"("F32")", "[2]", "[0, 8]") + R"(, "b": )" +
                            Entry(R"("F32")", "[2]", "[4, 12]") + "}",
                        12),
       "tensors \"a\" [0, 8] and \"b\" [4, 12] overlap"},
      {"nested overlap",
       SafetensorsBytes(R"({"a": )" + Entry(R"("F32")", "[8]", "[0, 32]") + R"(, "b": )" +
                            Entry(R"("F32")", "[1]", "[4, 8]") + R"(, "c": )" +
                            Entry(R"("F32")", "[2]", "[16, 24]") + "}",
                        32),
       "overlap"},
      {"same range twice",
       SafetensorsBytes(R"({"a": )" + ok_entry + R"(, "b": )" + ok_entry + "}", 8),
       "tensors \"a\" [0, 8] and \"b\" [0, 8] overlap"},
      {"duplicate name",
       SafetensorsBytes(R"({"x": )" + ok_entry + R"(, "x": )" + ok_entry + "}", 8),
       "duplicate tensor name \"x\""},
      {"duplicate key in entry",
       OneTensor(R"({"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]})", 8),
       "duplicate key \"dtype\""},
      {"empty name", SafetensorsBytes(R"({"": )" + ok_entry + "}", 8), "empty name"},
      {"metadata not object", SafetensorsBytes(R"({"__metadata__": [1]})", 0),
       "\"__metadata__\" is an array of 1 element, expected an object of strings"},
      {"metadata value not string", SafetensorsBytes(R"({"__metadata__": {"k": 1}})", 0),
       "\"__metadata__\" value \"k\" is 1, expected a string"},
      {"metadata value null", SafetensorsBytes(R"({"__metadata__": {"k": null}})", 0),
       "\"__metadata__\" value \"k\" is null"},
  };
}

TEST(SafetensorsCorruptionTest, EachValidationRuleHasAClearMessage) {
  ScopedTempDir dir;
  const std::string path = dir.File("bad.safetensors");
  for (const BadFile& bad : BadFiles()) {
    WriteBytes(path, bad.bytes);
    Result<SafetensorsFile> file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok()) << bad.label;
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << bad.label;
    const std::string& message = file.status().message();
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << bad.label << ": " << message;
    EXPECT_NE(message.find(bad.expected), std::string::npos)
        << bad.label << ": \"" << message << "\" lacks \"" << bad.expected << "\"";
  }
}

// Nesting far deeper than any header must fail cleanly, not exhaust the stack.
TEST(SafetensorsCorruptionTest, DeeplyNestedHeaderFailsCleanly) {
  ScopedTempDir dir;
  const std::string path = dir.File("deep.safetensors");
  constexpr size_t kDepth = 100000;
  const std::string deep = std::string(kDepth, '[') + std::string(kDepth, ']');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {deep, "header is an array of 1 element"},
      {R"({"x": {"dtype": "F32", "shape": )" + deep + R"(, "data_offsets": [0, 4]}})",
       "\"shape\" element 0 is an array"},
      {R"({"x": )" + std::string(kDepth, '{'), "not valid JSON"},
  };
  for (const auto& [header, expected] : cases) {
    WriteBytes(path, SafetensorsBytes(header, 4));
    Result<SafetensorsFile> file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok());
    EXPECT_NE(file.status().message().find(expected), std::string::npos) << file.status().message();
  }
}

// Files the format allows that a stricter reader might refuse.
TEST(SafetensorsCorruptionTest, UnusualButValidFilesOpen) {
  ScopedTempDir dir;
  const std::string path = dir.File("unusual.safetensors");
  const std::string empty_entry = Entry(R"("F16")", "[0, 3]", "[4, 4]");
  const std::vector<std::string> valid = {
      SafetensorsBytes("{}", 0),
      SafetensorsBytes("{}      ", 0),
      SafetensorsBytes("  {\n}\t", 0),
      // A gap before the data, an empty tensor inside another's range, trailing bytes.
      SafetensorsBytes(R"({"a": )" + Entry(R"("F32")", "[2]", "[8, 16]") + R"(, "e": )" +
                           Entry(R"("F16")", "[0, 3]", "[12, 12]") + "}",
                       40),
      SafetensorsBytes(R"({"x": )" + Entry(R"("BF16")", "[]", "[0, 2]") + R"(, "y": )" +
                           empty_entry + R"(, "__metadata__": {}})",
                       4),
      SafetensorsBytes(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], )"
                       R"("extra": [1, {"deep": null}]}})",
                       4),
  };
  for (const std::string& bytes : valid) {
    SCOPED_TRACE(bytes.substr(8));
    WriteBytes(path, bytes);
    Result<SafetensorsFile> file = SafetensorsFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status().message();
  }
  WriteBytes(path, valid[4]);
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  ASSERT_NE(file->Find("x"), nullptr);
  EXPECT_EQ(file->Find("x")->NumElements(), 1);
  EXPECT_EQ(file->Find("y")->NumElements(), 0);
}

}  // namespace
}  // namespace dscale
