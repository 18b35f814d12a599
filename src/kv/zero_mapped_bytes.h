#pragma once
// Storage that reads as zeros and costs resident memory only where it has been written:
// anonymous memory that the kernel maps page by page on first touch. A KV cache sized for the
// worst case (every running request at its longest) then holds in RAM only the slots that live
// contexts have used.

#include <cstddef>
#include <cstdint>

namespace dscale {

class ZeroMappedBytes {
 public:
  ZeroMappedBytes() = default;
  // `bytes` zero bytes, page-aligned (so any element type may be stored). CHECK-fails, naming
  // the size, when the address space cannot be reserved.
  explicit ZeroMappedBytes(int64_t bytes);
  ~ZeroMappedBytes();
  ZeroMappedBytes(ZeroMappedBytes&& other) noexcept;
  ZeroMappedBytes& operator=(ZeroMappedBytes&& other) noexcept;
  ZeroMappedBytes(const ZeroMappedBytes&) = delete;
  ZeroMappedBytes& operator=(const ZeroMappedBytes&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  int64_t size() const { return bytes_; }

 private:
  void Release();

  std::byte* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace dscale
