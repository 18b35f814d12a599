// Safetensors writer: single files and sharded checkpoints with their index.

#include <algorithm>
#include <bit>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "io/file_util.h"
#include "io/safetensors.h"

namespace dscale {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian values; big-endian hosts are not supported");

constexpr size_t kHeaderAlignment = 8;
constexpr size_t kConvertChunk = 16384;  // elements converted per write

// True for well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF):
// the JSON writer would otherwise throw on such names.
bool IsValidUtf8(std::string_view text) {
  static constexpr uint32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t code = lead;
    if ((lead & 0xe0) == 0xc0) {
      extra = 1, code = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, code = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, code = lead & 0x07;
    } else if (lead >= 0x80) {
      return false;  // a continuation byte or 0xf8..0xff where a character should start
    }
    if (text.size() - i <= extra) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    if (code < kMinForLength[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Element count of `shape`; nullopt for a negative dim or a count beyond 2^62.
std::optional<uint64_t> ElementCount(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count)) return std::nullopt;
  }
  if (count > (uint64_t{1} << 62)) return std::nullopt;
  return count;
}

Status ValidateTensor(const TensorToWrite& tensor, bool check_values = true) {
  const std::string where = "tensor \"" + tensor.name + "\": ";
  if (tensor.name.empty()) return InvalidArgument("a tensor has an empty name");
  if (tensor.name == kSafetensorsMetadataKey)
    return InvalidArgument(where + "the name is reserved");
  if (!IsValidUtf8(tensor.name)) return InvalidArgument(where + "the name is not valid UTF-8");
  const std::optional<uint64_t> count = ElementCount(tensor.shape);
  if (!count) {
    return InvalidArgument(where + "shape " + ShapeToString(tensor.shape) +
                           " has a negative dim or too many elements");
  }
  if (!check_values) return Status::Ok();
  if (tensor.values.size() != *count) {
    return InvalidArgument(where + "shape " + ShapeToString(tensor.shape) + " needs " +
                           std::to_string(*count) + " values, got " +
                           std::to_string(tensor.values.size()));
  }
  return Status::Ok();
}

Status ValidateAll(const std::vector<const TensorToWrite*>& tensors,
                   const std::map<std::string, std::string>& metadata, bool check_values = true) {
  std::set<std::string_view> names;
  for (const TensorToWrite* tensor : tensors) {
    DSCALE_RETURN_IF_ERROR(ValidateTensor(*tensor, check_values));
    if (!names.insert(tensor->name).second) {
      return InvalidArgument("duplicate tensor name \"" + tensor->name + "\"");
    }
  }
  for (const auto& [key, value] : metadata) {
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      return InvalidArgument("metadata entries must be valid UTF-8");
    }
  }
  return Status::Ok();
}

// Bytes of a validated tensor's data, from its shape.
uint64_t ByteSize(const TensorToWrite& tensor) {
  return *ElementCount(tensor.shape) * DTypeSize(tensor.dtype);
}

Status WriteValues(AtomicFileWriter& writer, DType dtype, const std::vector<float>& values) {
  std::vector<std::byte> buffer(kConvertChunk * DTypeSize(dtype));
  for (size_t start = 0; start < values.size(); start += kConvertChunk) {
    const size_t count = std::min(kConvertChunk, values.size() - start);
    ConvertFromF32(dtype, values.data() + start, count, buffer.data());
    DSCALE_RETURN_IF_ERROR(writer.Write(buffer.data(), count * DTypeSize(dtype)));
  }
  return Status::Ok();
}

// The length-prefixed header of `tensors` with data ranges in the given order, padded so that
// the data region starts 8-byte aligned.
Status WriteHeader(AtomicFileWriter& writer, const std::vector<const TensorToWrite*>& tensors,
                   const std::map<std::string, std::string>& metadata) {
  // nlohmann objects keep keys sorted, so the header lists tensors by name.
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const TensorToWrite* tensor : tensors) {
    const uint64_t end = offset + ByteSize(*tensor);
    header[tensor->name] = {{"dtype", std::string(DTypeName(tensor->dtype))},
                            {"shape", tensor->shape},
                            {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header[kSafetensorsMetadataKey] = metadata;
  std::string text = header.dump();
  text.append((kHeaderAlignment - text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
  const uint64_t header_size = text.size();
  DSCALE_RETURN_IF_ERROR(writer.Write(&header_size, sizeof header_size));
  return writer.Write(text.data(), text.size());
}

// Writes already validated tensors. Data ranges are contiguous, ordered by element size
// (largest first) then name, so each tensor is aligned to its element size.
Status WriteValidated(const std::string& path, std::vector<const TensorToWrite*> tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    const size_t size_a = DTypeSize(a->dtype), size_b = DTypeSize(b->dtype);
    return size_a != size_b ? size_a > size_b : a->name < b->name;
  });
  DSCALE_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  DSCALE_RETURN_IF_ERROR(WriteHeader(writer, tensors, metadata));
  for (const TensorToWrite* tensor : tensors) {
    DSCALE_RETURN_IF_ERROR(WriteValues(writer, tensor->dtype, tensor->values));
  }
  return writer.Commit();
}

std::vector<const TensorToWrite*> Pointers(const std::vector<TensorToWrite>& tensors) {
  std::vector<const TensorToWrite*> pointers;
  pointers.reserve(tensors.size());
  for (const TensorToWrite& tensor : tensors) pointers.push_back(&tensor);
  return pointers;
}

std::string ShardName(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index, count);
  return name;
}

// Greedy split in name order: a shard closes when the next tensor would push it past
// `max_bytes`. Always at least one shard, so that an empty checkpoint still opens.
std::vector<std::vector<const TensorToWrite*>> SplitIntoShards(
    std::vector<const TensorToWrite*> tensors, uint64_t max_bytes) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });
  std::vector<std::vector<const TensorToWrite*>> shards(1);
  uint64_t shard_bytes = 0;
  for (const TensorToWrite* tensor : tensors) {
    const uint64_t bytes = ByteSize(*tensor);
    if (!shards.back().empty() && shard_bytes + bytes > max_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(tensor);
    shard_bytes += bytes;
  }
  return shards;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  DSCALE_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  DSCALE_RETURN_IF_ERROR(writer.Write(text.data(), text.size()));
  return writer.Commit();
}

}  // namespace

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  const std::vector<const TensorToWrite*> pointers = Pointers(tensors);
  DSCALE_RETURN_IF_ERROR(ValidateAll(pointers, metadata).WithContext(path));
  return WriteValidated(path, pointers, metadata);
}

Status WriteSafetensorsStreaming(const std::string& path, const std::vector<TensorToWrite>& tensors,
                                 const std::function<std::vector<float>(size_t)>& make_values) {
  for (const TensorToWrite& tensor : tensors) {
    if (tensor.dtype != tensors.front().dtype) {
      return InvalidArgument(path + ": streamed tensors must share one dtype");
    }
  }
  DSCALE_ASSIGN_OR_RETURN(SafetensorsStreamWriter writer,
                          SafetensorsStreamWriter::Create(path, tensors));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<float> values = make_values(i);
    if (values.size() != *ElementCount(tensors[i].shape)) {
      return InvalidArgument(path + ": tensor \"" + tensors[i].name + "\": made " +
                             std::to_string(values.size()) + " values for shape " +
                             ShapeToString(tensors[i].shape));
    }
    DSCALE_RETURN_IF_ERROR(writer.Append(values.data(), values.size()));
  }
  return writer.Commit();
}

// The stream writer's state: the open temporary file, the tensors in data order, and how far
// the values have got.
struct SafetensorsStreamWriter::Impl {
  std::string path;
  AtomicFileWriter file;
  std::vector<TensorToWrite> tensors;
  size_t current = 0;  // tensor the next value belongs to
  uint64_t left = 0;   // values still owed to tensors[current]
  std::vector<std::byte> buffer;

  // Moves `current` past tensors that are complete (or empty).
  void SkipFinished() {
    while (left == 0 && current < tensors.size()) {
      ++current;
      if (current < tensors.size()) left = *ElementCount(tensors[current].shape);
    }
  }
};

SafetensorsStreamWriter::SafetensorsStreamWriter(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
SafetensorsStreamWriter::SafetensorsStreamWriter(SafetensorsStreamWriter&&) noexcept = default;
SafetensorsStreamWriter::~SafetensorsStreamWriter() = default;

Result<SafetensorsStreamWriter> SafetensorsStreamWriter::Create(
    const std::string& path, std::vector<TensorToWrite> tensors,
    const std::map<std::string, std::string>& metadata) {
  const std::vector<const TensorToWrite*> pointers = Pointers(tensors);
  DSCALE_RETURN_IF_ERROR(ValidateAll(pointers, metadata, /*check_values=*/false).WithContext(path));
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (DTypeSize(tensors[i].dtype) > DTypeSize(tensors[i - 1].dtype)) {
      return InvalidArgument(path + ": tensor \"" + tensors[i].name + "\" (" +
                             std::string(DTypeName(tensors[i].dtype)) + ") follows a smaller " +
                             std::string(DTypeName(tensors[i - 1].dtype)) +
                             " tensor; larger elements must come first to stay aligned");
    }
  }
  DSCALE_ASSIGN_OR_RETURN(AtomicFileWriter file, AtomicFileWriter::Create(path));
  DSCALE_RETURN_IF_ERROR(WriteHeader(file, pointers, metadata));
  auto impl = std::unique_ptr<Impl>(new Impl{.path = path,
                                             .file = std::move(file),
                                             .tensors = std::move(tensors),
                                             .current = 0,
                                             .left = 0,
                                             .buffer = {}});
  if (!impl->tensors.empty()) impl->left = *ElementCount(impl->tensors[0].shape);
  impl->SkipFinished();
  impl->buffer.resize(kConvertChunk * sizeof(float));
  return SafetensorsStreamWriter(std::move(impl));
}

Status SafetensorsStreamWriter::Append(const float* values, size_t count) {
  Impl& s = *impl_;
  while (count > 0) {
    if (s.current >= s.tensors.size()) {
      return InvalidArgument(s.path + ": " + std::to_string(count) +
                             " values past the last tensor");
    }
    const DType dtype = s.tensors[s.current].dtype;
    const size_t n = std::min<uint64_t>({count, s.left, kConvertChunk});
    ConvertFromF32(dtype, values, n, s.buffer.data());
    DSCALE_RETURN_IF_ERROR(s.file.Write(s.buffer.data(), n * DTypeSize(dtype)));
    values += n;
    count -= n;
    s.left -= n;
    s.SkipFinished();
  }
  return Status::Ok();
}

Status SafetensorsStreamWriter::Commit() {
  Impl& s = *impl_;
  if (s.current < s.tensors.size()) {
    return InvalidArgument(s.path + ": tensor \"" + s.tensors[s.current].name + "\" still needs " +
                           std::to_string(s.left) + " values");
  }
  return s.file.Commit();
}

Status WriteShardedSafetensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                               uint64_t max_shard_bytes) {
  if (max_shard_bytes == 0) return InvalidArgument(dir + ": max_shard_bytes must be positive");
  const std::vector<const TensorToWrite*> pointers = Pointers(tensors);
  DSCALE_RETURN_IF_ERROR(ValidateAll(pointers, {}).WithContext(dir));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(dir + ": cannot create the directory: " + error.message());

  const auto shards = SplitIntoShards(pointers, max_shard_bytes);
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total_size = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = ShardName(i + 1, shards.size());
    DSCALE_RETURN_IF_ERROR(WriteValidated(JoinPath(dir, name), shards[i], {{"format", "pt"}}));
    for (const TensorToWrite* tensor : shards[i]) {
      weight_map[tensor->name] = name;
      total_size += ByteSize(*tensor);
    }
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                                {"weight_map", std::move(weight_map)}};
  return WriteTextFile(JoinPath(dir, kSafetensorsIndexFileName), index.dump(2) + "\n");
}

Status WriteCheckpointStreaming(
    const std::string& dir, const std::vector<TensorToWrite>& tensors, uint64_t max_shard_bytes,
    const std::function<Status(size_t, SafetensorsStreamWriter&)>& write_values) {
  if (max_shard_bytes == 0) return InvalidArgument(dir + ": max_shard_bytes must be positive");
  DSCALE_RETURN_IF_ERROR(
      ValidateAll(Pointers(tensors), {}, /*check_values=*/false).WithContext(dir));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return IoError(dir + ": cannot create the directory: " + error.message());

  // Shards in the given order; inside each, larger elements first (stable, so F32 tensors keep
  // their relative order, then BF16 and F16).
  std::vector<std::vector<size_t>> shards(1);
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = ByteSize(tensors[i]);
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += bytes;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total_size = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<size_t>& order = shards[s];
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return DTypeSize(tensors[a].dtype) > DTypeSize(tensors[b].dtype);
    });
    const std::string name =
        shards.size() == 1 ? kSafetensorsSingleFileName : ShardName(s + 1, shards.size());
    std::vector<TensorToWrite> headers;
    for (const size_t i : order) {
      headers.push_back({.name = tensors[i].name,
                         .dtype = tensors[i].dtype,
                         .shape = tensors[i].shape,
                         .values = {}});
      weight_map[tensors[i].name] = name;
      total_size += ByteSize(tensors[i]);
    }
    DSCALE_ASSIGN_OR_RETURN(SafetensorsStreamWriter writer,
                            SafetensorsStreamWriter::Create(JoinPath(dir, name), std::move(headers),
                                                            {{"format", "pt"}}));
    for (const size_t i : order) DSCALE_RETURN_IF_ERROR(write_values(i, writer));
    DSCALE_RETURN_IF_ERROR(writer.Commit());
  }
  if (shards.size() == 1) return Status::Ok();
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                                {"weight_map", std::move(weight_map)}};
  return WriteTextFile(JoinPath(dir, kSafetensorsIndexFileName), index.dump(2) + "\n");
}

}  // namespace dscale
