#pragma once
// Little-endian byte buffers for the binary file formats (predictor, traces); whole-file reads
// and writes are in io/file_util.h. Readers check the size up front (so they can name what is
// missing); ByteReader CHECKs against overruns, which would be a bug in that up-front check.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/check.h"

namespace dscale {

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

}  // namespace dscale
