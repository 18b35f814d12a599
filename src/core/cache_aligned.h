#pragma once
// Vectors whose storage starts on a 64-byte cache line. A tile or vector load of 64 bytes from
// such storage touches one line, where std::vector's heap blocks (16-byte aligned) split every
// such load across two: the AMX tiles read their packed activations about 1.5 times faster from
// aligned buffers (docs/BENCHMARKS.md, "Cache-line alignment of the AMX operands").

#include <cstddef>
#include <new>
#include <vector>

namespace dscale {

inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept {
    ::operator delete (p, std::align_val_t{kCacheLineBytes});
  }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using CacheAlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace dscale
