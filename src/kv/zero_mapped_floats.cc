#include "kv/zero_mapped_floats.h"

#include <sys/mman.h>

#include <string>
#include <utility>

#include "core/check.h"

namespace dscale {

ZeroMappedFloats::ZeroMappedFloats(int64_t count) : count_(count) {
  DSCALE_CHECK(count >= 0);
  if (count == 0) return;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  // MAP_NORESERVE: the cache reserves address space, not memory; the start-up check
  // (kv/kv_budget.h) is what compares the cache with the memory the machine has.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  DSCALE_CHECK_MSG(p != MAP_FAILED,
                   ("cannot reserve " + std::to_string(bytes) + " bytes for the KV cache").c_str());
  data_ = static_cast<float*>(p);
}

ZeroMappedFloats::~ZeroMappedFloats() { Release(); }

ZeroMappedFloats::ZeroMappedFloats(ZeroMappedFloats&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}

ZeroMappedFloats& ZeroMappedFloats::operator=(ZeroMappedFloats&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

void ZeroMappedFloats::Release() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(count_) * sizeof(float));
  data_ = nullptr;
  count_ = 0;
}

}  // namespace dscale
