#pragma once
// Little-endian byte buffers and whole-file reads/writes for the predictor and trace files.
// Readers check the size up front (so they can name what is missing); ByteReader CHECKs
// against overruns, which would be a bug in that up-front check.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace dscale::dvl {

class ByteReader {
 public:
  explicit ByteReader(std::span<const char> bytes) : bytes_(bytes) {}

  void Bytes(void* out, size_t n);
  uint8_t U8();
  uint32_t U32();
  uint64_t U64();
  void Floats(float* out, size_t n) { Bytes(out, n * sizeof(float)); }

  size_t position() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::span<const char> bytes_;
  size_t pos_ = 0;
};

class ByteWriter {
 public:
  void Bytes(const void* data, size_t n);
  void U8(uint8_t v) { Bytes(&v, 1); }
  void U32(uint32_t v) { Bytes(&v, sizeof(v)); }
  void U64(uint64_t v) { Bytes(&v, sizeof(v)); }
  void Floats(const float* data, size_t n) { Bytes(data, n * sizeof(float)); }

  const std::vector<char>& bytes() const { return bytes_; }
  void Clear() { bytes_.clear(); }

 private:
  std::vector<char> bytes_;
};

// The whole file; NotFound / IoError name the path.
Result<std::vector<char>> ReadWholeFile(const std::string& path);

// Writes `bytes` to path + ".tmp" and renames it over `path`, so a reader never sees a
// half-written file.
Status WriteWholeFile(const std::string& path, std::span<const char> bytes);

}  // namespace dscale::dvl
