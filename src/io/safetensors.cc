// Safetensors reader: maps the file, then validates the whole header before handing out any
// pointer into the data region. The writer is in safetensors_writer.cc.

#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "io/file_util.h"
#include "io/json_util.h"

namespace dscale {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian values; big-endian hosts are not supported");

// The reference implementation refuses headers above 100 MB; a real one is a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
constexpr size_t kLengthPrefixBytes = 8;

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string RangeToString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Parses the header. nlohmann objects are maps and would silently keep one of two equal keys, so
// the parser callback watches every object for repeated keys.
Status ParseHeaderJson(std::string_view text, nlohmann::json* header) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  int duplicate_depth = 0;
  auto watch = [&](int depth, Event event, nlohmann::json& value) {
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && value.is_string() && !open_objects.empty() &&
               duplicate.empty()) {
      const std::string& key = value.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        duplicate = key;
        duplicate_depth = depth;
      }
    }
    return true;
  };
  *header = nlohmann::json::parse(text.begin(), text.end(), watch, /*allow_exceptions=*/false);
  if (header->is_discarded()) return DataLoss("header is not valid JSON");
  if (!duplicate.empty()) {
    if (duplicate_depth == 1) return DataLoss("duplicate tensor name " + Quoted(duplicate));
    return DataLoss("duplicate key " + Quoted(duplicate) + " in the header");
  }
  return Status::Ok();
}

Status ParseDType(const nlohmann::json& entry, DType* dtype) {
  const auto it = entry.find("dtype");
  if (it == entry.end()) return DataLoss("missing \"dtype\"");
  if (!it->is_string()) {
    return DataLoss("\"dtype\" is " + DescribeJson(*it) + ", expected a string");
  }
  const std::string& name = it->get_ref<const std::string&>();
  const std::optional<DType> parsed = DTypeFromName(name);
  if (!parsed) {
    return DataLoss("unsupported dtype " + DescribeJson(*it) +
                    " (only F32, BF16 and F16 are accepted)");
  }
  *dtype = *parsed;
  return Status::Ok();
}

Status ParseShape(const nlohmann::json& entry, std::vector<int64_t>* shape) {
  const auto it = entry.find("shape");
  if (it == entry.end()) return DataLoss("missing \"shape\"");
  if (!it->is_array()) return DataLoss("\"shape\" is " + DescribeJson(*it) + ", expected an array");
  shape->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    const std::optional<int64_t> dim = JsonInt64((*it)[i]);
    if (!dim || *dim < 0) {
      return DataLoss("\"shape\" element " + std::to_string(i) + " is " + DescribeJson((*it)[i]) +
                      ", expected a non-negative integer");
    }
    shape->push_back(*dim);
  }
  return Status::Ok();
}

Status ParseOffsets(const nlohmann::json& entry, uint64_t* begin, uint64_t* end) {
  const auto it = entry.find("data_offsets");
  if (it == entry.end()) return DataLoss("missing \"data_offsets\"");
  const char* expected = ", expected two non-negative integers [begin, end]";
  if (!it->is_array() || it->size() != 2) {
    return DataLoss("\"data_offsets\" is " + DescribeJson(*it) + expected);
  }
  for (size_t i = 0; i < 2; ++i) {
    const std::optional<int64_t> offset = JsonInt64((*it)[i]);
    if (!offset || *offset < 0) {
      return DataLoss("\"data_offsets\" element " + std::to_string(i) + " is " +
                      DescribeJson((*it)[i]) + expected);
    }
    (i == 0 ? *begin : *end) = static_cast<uint64_t>(*offset);
  }
  if (*begin > *end) {
    return DataLoss("data_offsets " + RangeToString(*begin, *end) + " begin after they end");
  }
  return Status::Ok();
}

// Bytes `shape` of `dtype` needs; nullopt when the count does not fit in 63 bits.
std::optional<uint64_t> ByteSize(const std::vector<int64_t>& shape, DType dtype) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t bytes = DTypeSize(dtype);
  for (const int64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) return std::nullopt;
  }
  if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return bytes;
}

// Fills `info` from one header entry; `data` is the data region of `data_size` bytes.
Status ParseEntry(const nlohmann::json& entry, const std::byte* data, uint64_t data_size,
                  TensorInfo* info) {
  if (!entry.is_object()) {
    return DataLoss("entry is " + DescribeJson(entry) +
                    ", expected an object with dtype, shape and data_offsets");
  }
  DSCALE_RETURN_IF_ERROR(ParseDType(entry, &info->dtype));
  DSCALE_RETURN_IF_ERROR(ParseShape(entry, &info->shape));
  DSCALE_RETURN_IF_ERROR(ParseOffsets(entry, &info->begin, &info->end));
  const std::string shape_text =
      ShapeToString(info->shape) + " × " + std::string(DTypeName(info->dtype));
  const std::optional<uint64_t> needed = ByteSize(info->shape, info->dtype);
  if (!needed) return DataLoss("shape " + shape_text + " overflows: too many elements");
  const uint64_t covered = info->end - info->begin;
  if (covered != *needed) {
    return DataLoss("data_offsets " + RangeToString(info->begin, info->end) + " cover " +
                    std::to_string(covered) + " bytes but shape " + shape_text + " needs " +
                    std::to_string(*needed));
  }
  if (info->end > data_size) {
    return DataLoss("data_offsets " + RangeToString(info->begin, info->end) +
                    " reach beyond the data region of " + std::to_string(data_size) + " bytes");
  }
  info->data = data + info->begin;
  return Status::Ok();
}

Status ParseMetadata(const nlohmann::json& value, std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) {
    return DataLoss("\"__metadata__\" is " + DescribeJson(value) +
                    ", expected an object of strings");
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return DataLoss("\"__metadata__\" value " + Quoted(key) + " is " + DescribeJson(item) +
                      ", expected a string");
    }
    (*metadata)[key] = item.get_ref<const std::string&>();
  }
  return Status::Ok();
}

// Non-empty ranges must be disjoint; empty ones touch no byte and may sit anywhere.
Status CheckNoOverlap(const std::vector<TensorInfo>& tensors) {
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& tensor : tensors) {
    if (tensor.end > tensor.begin) by_offset.push_back(&tensor);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  const TensorInfo* furthest = nullptr;  // the range reaching furthest so far
  for (const TensorInfo* tensor : by_offset) {
    if (furthest != nullptr && tensor->begin < furthest->end) {
      return DataLoss("tensors " + Quoted(furthest->name) + " " +
                      RangeToString(furthest->begin, furthest->end) + " and " +
                      Quoted(tensor->name) + " " + RangeToString(tensor->begin, tensor->end) +
                      " overlap");
    }
    if (furthest == nullptr || tensor->end > furthest->end) furthest = tensor;
  }
  return Status::Ok();
}

}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  return count;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// ---------------------------------------------------------------------------------------------
// SafetensorsFile

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_size_(std::exchange(other.mapping_size_, 0)),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_size_ = std::exchange(other.mapping_size_, 0);
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  file.path_ = path;
  DSCALE_RETURN_IF_ERROR(file.MapFile());
  DSCALE_RETURN_IF_ERROR(file.ParseMapped().WithContext(path));
  return file;
}

Status SafetensorsFile::MapFile() {
  // O_NONBLOCK keeps a FIFO named by mistake from blocking here; fstat then refuses it.
  UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return OsError(path_, "cannot open", errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return OsError(path_, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return IoError(path_ + ": not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  // Also keeps mmap away from empty files, which it refuses.
  if (size < kLengthPrefixBytes) {
    return DataLoss(path_ + ": file is " + std::to_string(size) +
                    " bytes, shorter than the 8-byte header length");
  }
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapping == MAP_FAILED) return OsError(path_, "cannot map", errno);
  mapping_ = mapping;
  mapping_size_ = size;
  return Status::Ok();
}

void SafetensorsFile::DropResident(const TensorInfo& tensor) const {
  // The mapping is private and read-only, so no page of it holds a private copy: MADV_DONTNEED
  // only unmaps pages, and the next read maps the file's bytes again.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(tensor.data);
  const uintptr_t begin = first / page * page;
  const uintptr_t end = std::min(first + (tensor.end - tensor.begin),
                                 reinterpret_cast<uintptr_t>(mapping_) + mapping_size_);
  if (tensor.data == nullptr || end <= begin) return;
  // Advice: where it fails the pages stay resident, which costs memory, not correctness.
  static_cast<void>(::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED));
}

// Reads the header out of the mapping; messages carry no path (Open adds it).
Status SafetensorsFile::ParseMapped() {
  const auto* bytes = static_cast<const std::byte*>(mapping_);
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes, sizeof header_size);
  const uint64_t after_prefix = mapping_size_ - kLengthPrefixBytes;
  if (header_size > kMaxHeaderBytes) {
    return DataLoss("header length " + std::to_string(header_size) +
                    " is absurd (the limit is 100 MiB)");
  }
  if (header_size > after_prefix) {
    return DataLoss("header length " + std::to_string(header_size) + " is larger than the " +
                    std::to_string(after_prefix) + " bytes after the length prefix");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes + kLengthPrefixBytes),
                              header_size);
  nlohmann::json header;
  DSCALE_RETURN_IF_ERROR(ParseHeaderJson(text, &header));
  if (!header.is_object()) {
    return DataLoss("header is " + DescribeJson(header) + ", expected a JSON object");
  }
  const std::byte* data = bytes + kLengthPrefixBytes + header_size;
  const uint64_t data_size = after_prefix - header_size;
  for (const auto& [name, entry] : header.items()) {
    if (name == kSafetensorsMetadataKey) {
      DSCALE_RETURN_IF_ERROR(ParseMetadata(entry, &metadata_));
      continue;
    }
    if (name.empty()) return DataLoss("a tensor has an empty name");
    TensorInfo info;
    info.name = name;
    DSCALE_RETURN_IF_ERROR(
        ParseEntry(entry, data, data_size, &info).WithContext("tensor " + Quoted(name)));
    tensors_.push_back(std::move(info));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return CheckNoOverlap(tensors_);
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  const auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorInfo& tensor, const std::string& key) { return tensor.name < key; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

// ---------------------------------------------------------------------------------------------
// Checkpoint

Result<Checkpoint> Checkpoint::Open(const std::string& dir) {
  Checkpoint checkpoint;
  checkpoint.dir_ = dir;
  const std::string index_path = JoinPath(dir, kSafetensorsIndexFileName);
  if (PathExists(index_path)) {
    DSCALE_RETURN_IF_ERROR(checkpoint.LoadIndex(index_path));
    return checkpoint;
  }
  const std::string single_path = JoinPath(dir, kSafetensorsSingleFileName);
  if (!PathExists(single_path)) {
    return NotFound(dir + ": no " + kSafetensorsSingleFileName + " or " +
                    kSafetensorsIndexFileName + " there");
  }
  DSCALE_RETURN_IF_ERROR(checkpoint.AddWholeFile(single_path));
  return checkpoint;
}

Result<Checkpoint> Checkpoint::OpenFile(const std::string& path) {
  Checkpoint checkpoint;
  checkpoint.dir_ = path;
  DSCALE_RETURN_IF_ERROR(checkpoint.AddWholeFile(path));
  return checkpoint;
}

Status Checkpoint::AddWholeFile(const std::string& path) {
  DSCALE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  const SafetensorsFile* added = AddFile(std::move(file));
  for (const TensorInfo& tensor : added->tensors()) index_[tensor.name] = Entry{&tensor, added};
  return Status::Ok();
}

const SafetensorsFile* Checkpoint::AddFile(SafetensorsFile file) {
  files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
  return files_.back().get();
}

namespace {

// Shards must sit in the checkpoint directory itself.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

// Reads {"weight_map": {"tensor": "shard file"}}, opening each distinct shard once.
Status Checkpoint::LoadIndex(const std::string& index_path) {
  DSCALE_ASSIGN_OR_RETURN(const std::string text, ReadFileToString(index_path));
  const Result<nlohmann::json> index = ParseJsonDocument(text);
  if (!index.ok()) return index.status().WithContext(index_path);
  if (!index->is_object()) {
    return DataLoss(index_path + ": the index is " + DescribeJson(*index) +
                    ", expected a JSON object");
  }
  const auto weight_map = index->find("weight_map");
  if (weight_map == index->end() || !weight_map->is_object()) {
    return DataLoss(index_path + ": \"weight_map\" is missing or not an object");
  }
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [tensor, shard] : weight_map->items()) {
    const std::string where = index_path + ": tensor " + Quoted(tensor);
    if (!shard.is_string() || !IsPlainFileName(shard.get_ref<const std::string&>())) {
      return DataLoss(where + " maps to " + DescribeJson(shard) +
                      ", expected the file name of a shard in the same directory");
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    const SafetensorsFile*& file = shards[shard_name];
    if (file == nullptr) {
      Result<SafetensorsFile> opened = SafetensorsFile::Open(JoinPath(dir_, shard_name));
      if (!opened.ok()) return opened.status().WithContext(index_path);
      file = AddFile(std::move(opened).value());
    }
    const TensorInfo* info = file->Find(tensor);
    if (info == nullptr) {
      return DataLoss(where + " is mapped to shard " + Quoted(shard_name) +
                      ", which does not contain it");
    }
    index_[tensor] = Entry{info, file};
  }
  return Status::Ok();
}

const TensorInfo* Checkpoint::Find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second.info;
}

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, entry] : index_) names.push_back(name);
  return names;
}

Result<const TensorInfo*> Checkpoint::Tensor(const std::string& name,
                                             const std::vector<int64_t>& expected_shape) const {
  const auto it = index_.find(name);
  if (it == index_.end()) return NotFound(dir_ + ": tensor " + Quoted(name) + " not found");
  const TensorInfo& tensor = *it->second.info;
  const std::string where = "tensor " + Quoted(name) + " in " + it->second.file->path();
  if (tensor.shape != expected_shape) {
    return InvalidArgument(where + ": expected shape " + ShapeToString(expected_shape) + ", got " +
                           ShapeToString(tensor.shape) + " (" +
                           std::string(DTypeName(tensor.dtype)) + ")");
  }
  const int64_t bad =
      FirstNonFinite(tensor.dtype, tensor.data, static_cast<size_t>(tensor.NumElements()));
  if (bad >= 0) {
    return DataLoss(where + ": element " + std::to_string(bad) +
                    " is NaN or infinite; weights must be finite");
  }
  return &tensor;
}

void Checkpoint::DropResident(const std::string& name) const {
  const auto it = index_.find(name);
  if (it != index_.end()) it->second.file->DropResident(*it->second.info);
}

Result<std::vector<float>> Checkpoint::ReadF32(const std::string& name,
                                               const std::vector<int64_t>& expected_shape) const {
  DSCALE_ASSIGN_OR_RETURN(const TensorInfo* tensor, Tensor(name, expected_shape));
  std::vector<float> values(static_cast<size_t>(tensor->NumElements()));
  if (!values.empty()) ConvertToF32(tensor->dtype, tensor->data, values.size(), values.data());
  return values;
}

}  // namespace dscale
