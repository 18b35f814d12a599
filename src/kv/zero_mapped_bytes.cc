#include "kv/zero_mapped_bytes.h"

#include <sys/mman.h>

#include <string>
#include <utility>

#include "core/check.h"

namespace dscale {

ZeroMappedBytes::ZeroMappedBytes(int64_t bytes) : bytes_(bytes) {
  DSCALE_CHECK(bytes >= 0);
  if (bytes == 0) return;
  // MAP_NORESERVE: the cache reserves address space, not memory; the start-up check
  // (engine/kv_budget.h) is what compares the cache with the memory the machine has.
  void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  DSCALE_CHECK_MSG(p != MAP_FAILED,
                   ("cannot reserve " + std::to_string(bytes) + " bytes for the KV cache").c_str());
  data_ = static_cast<std::byte*>(p);
}

ZeroMappedBytes::~ZeroMappedBytes() { Release(); }

ZeroMappedBytes::ZeroMappedBytes(ZeroMappedBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

ZeroMappedBytes& ZeroMappedBytes::operator=(ZeroMappedBytes&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void ZeroMappedBytes::Release() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(bytes_));
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace dscale
