#pragma once
// Float storage that reads as zeros and costs resident memory only where it has been written:
// anonymous memory that the kernel maps page by page on first touch. A KV cache sized for the
// worst case (every running request at its longest) then holds in RAM only the slots that live
// contexts have used.

#include <cstddef>
#include <cstdint>

namespace dscale {

class ZeroMappedFloats {
 public:
  ZeroMappedFloats() = default;
  // `count` zeros. CHECK-fails, naming the size, when the address space cannot be reserved.
  explicit ZeroMappedFloats(int64_t count);
  ~ZeroMappedFloats();
  ZeroMappedFloats(ZeroMappedFloats&& other) noexcept;
  ZeroMappedFloats& operator=(ZeroMappedFloats&& other) noexcept;
  ZeroMappedFloats(const ZeroMappedFloats&) = delete;
  ZeroMappedFloats& operator=(const ZeroMappedFloats&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return count_; }

 private:
  void Release();

  float* data_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace dscale
