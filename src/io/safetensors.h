#pragma once
// Safetensors checkpoints: a memory-mapped reader with full validation, sharded checkpoints
// through `model.safetensors.index.json`, and a writer.
//
// File layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [r, c], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"k": "v"}}, then the data region; offsets are relative to its start.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace dscale {

// The names the format reserves: the header's metadata entry, and a folder's one-file checkpoint
// and shard index.
inline constexpr char kSafetensorsMetadataKey[] = "__metadata__";
inline constexpr char kSafetensorsSingleFileName[] = "model.safetensors";
inline constexpr char kSafetensorsIndexFileName[] = "model.safetensors.index.json";

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offset inside the data region
  uint64_t end = 0;    // one past the last byte; end - begin = product(shape) * DTypeSize(dtype)
  const std::byte* data = nullptr;  // points into the mapping; valid while the file is open

  int64_t NumElements() const;
};

// "[4096, 1024]"; "[]" for a scalar. For error messages.
std::string ShapeToString(const std::vector<int64_t>& shape);

// One .safetensors file, mapped read-only. Move-only; the mapping lives as long as the object.
class SafetensorsFile {
 public:
  // Validates everything before returning: header length within the file, JSON well formed,
  // every entry has a known dtype, non-negative shape, shape x dtype size == byte range,
  // ranges inside the data region and not overlapping, no duplicate names, `__metadata__` an
  // object of strings. Errors name `path` and the problem: NotFound when the file is missing,
  // IoError when the OS refuses, DataLoss when the contents are corrupt. Gaps between ranges
  // are accepted. Like any mapping, the file must not be truncated while it is open.
  static Result<SafetensorsFile> Open(const std::string& path);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // nullptr when absent.
  const TensorInfo* Find(const std::string& name) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Drops the pages holding `tensor` (one of tensors()) from this process's resident memory, for
  // callers that have copied it into another form. Its bytes stay readable: a later read faults
  // them back in from the file (or the page cache). Pages shared with neighbouring tensors go
  // too and come back the same way.
  void DropResident(const TensorInfo& tensor) const;

 private:
  SafetensorsFile() = default;
  Status MapFile();
  Status ParseMapped();

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::vector<TensorInfo> tensors_;  // sorted by name
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` ({"weight_map": {"tensor": "shard file"}}).
class Checkpoint {
 public:
  // With an index, every distinct shard is opened once and every tensor it lists must be in its
  // shard; tensors a shard holds but the index does not list are not visible. Without an index,
  // `model.safetensors`; with neither, NotFound naming `dir`.
  static Result<Checkpoint> Open(const std::string& dir);
  // One safetensors file on its own (a checkpoint's side file, e.g. a drafter head); dir() is the
  // file's path.
  static Result<Checkpoint> OpenFile(const std::string& path);

  const std::string& dir() const { return dir_; }
  // nullptr when absent.
  const TensorInfo* Find(const std::string& name) const;
  std::vector<std::string> TensorNames() const;

  // A tensor with `expected_shape` whose values are all finite. Errors name the tensor and the
  // file: NotFound for a missing tensor, InvalidArgument (with both shapes) for another shape,
  // DataLoss for a NaN or infinity (the first one's element index). The finiteness scan reads
  // the whole tensor once, at memory speed.
  Result<const TensorInfo*> Tensor(const std::string& name,
                                   const std::vector<int64_t>& expected_shape) const;
  // SafetensorsFile::DropResident for the tensor `name`; nothing when there is none.
  void DropResident(const std::string& name) const;
  // Tensor(), converted to f32.
  Result<std::vector<float>> ReadF32(const std::string& name,
                                     const std::vector<int64_t>& expected_shape) const;

 private:
  struct Entry {
    const TensorInfo* info = nullptr;
    const SafetensorsFile* file = nullptr;
  };

  Status LoadIndex(const std::string& index_path);
  const SafetensorsFile* AddFile(SafetensorsFile file);
  // Adds the file at `path` with every tensor it holds visible.
  Status AddWholeFile(const std::string& path);

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry> index_;
};

// A tensor to write: f32 values stored as `dtype`.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<float> values;  // product(shape) values, row-major
};

// Writes one .safetensors file through a temporary file renamed into place. The header lists the
// tensors sorted by name and is padded with spaces so that the data region starts 8-byte aligned.
// As the reference implementation requires, the data ranges are contiguous; they are ordered by
// element size (largest first), then name, so every tensor is aligned to its element size.
// InvalidArgument for empty, duplicate or reserved names, negative dims, a value count that does
// not match the shape, or names/metadata that are not valid UTF-8.
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

// Writes one .safetensors file of tensors made one at a time: `make_values(i)` returns the
// product(shape) f32 values of tensors[i] (whose `values` are ignored), called in index order,
// and the data follow the header in that order, so only one tensor is in memory at a time (a
// Qwen3-8B-sized checkpoint can be written on a machine with less memory than its f32 size).
// Every tensor must have the same dtype (so each range stays aligned); errors as
// WriteSafetensors, plus InvalidArgument when `make_values` returns the wrong count.
Status WriteSafetensorsStreaming(const std::string& path, const std::vector<TensorToWrite>& tensors,
                                 const std::function<std::vector<float>(size_t)>& make_values);

// Writes one .safetensors file whose values arrive in pieces: Create writes the header from the
// tensors' names, dtypes and shapes (`values` ignored), Append takes f32 values in tensor order
// (a call may end inside a tensor or span several) and converts them as they come, so only the
// caller's piece is in memory. Data ranges follow the given order, so each tensor's element
// size must not exceed the one before it (F32 before BF16 and F16) for every range to stay
// aligned. Errors as WriteSafetensors; Append past the last tensor and Commit before every value
// arrived are InvalidArgument. Dropping the writer without Commit leaves no file.
class SafetensorsStreamWriter {
 public:
  static Result<SafetensorsStreamWriter> Create(
      const std::string& path, std::vector<TensorToWrite> tensors,
      const std::map<std::string, std::string>& metadata = {});

  SafetensorsStreamWriter(SafetensorsStreamWriter&&) noexcept;
  SafetensorsStreamWriter& operator=(SafetensorsStreamWriter&&) = delete;
  ~SafetensorsStreamWriter();

  Status Append(const float* values, size_t count);
  Status Commit();

 private:
  struct Impl;
  explicit SafetensorsStreamWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A checkpoint made tensor by tensor into `dir` (created when needed): `write_values(i, writer)`
// appends tensors[i]'s values (`values` ignored) to `writer`, in as many pieces as it likes.
// Tensors go to shards in the given order, a shard closing when the next tensor would push it
// past `max_shard_bytes` (a larger tensor gets one of its own); one shard is written as
// model.safetensors, several as model-0000i-of-0000n.safetensors with
// model.safetensors.index.json. Within a file the F32 tensors come first, so `write_values` is
// called in that order, not necessarily in index order.
Status WriteCheckpointStreaming(
    const std::string& dir, const std::vector<TensorToWrite>& tensors, uint64_t max_shard_bytes,
    const std::function<Status(size_t, SafetensorsStreamWriter&)>& write_values);

// Writes `tensors` split over shards of at most `max_shard_bytes` of tensor data each (a larger
// tensor gets a shard of its own), filled greedily in name order and named
// model-0000i-of-0000n.safetensors, plus model.safetensors.index.json with
// {"metadata": {"total_size": bytes}, "weight_map": {...}}. Creates `dir` when needed.
Status WriteShardedSafetensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                               uint64_t max_shard_bytes);

}  // namespace dscale
