#pragma once
// Vectors of tens of megabytes — a hybrid's recurrent states, about 50 MB a request at Qwen3.5-4B
// and 9B — on transparent huge pages. Memory a process maps is faulted in a page at a time on
// first touch, and at 4 KB a page a new request's states cost a fault per 4 KB (about 80 ms a
// request on a 2-vCPU guest, more than its prompt at a few hundred tokens); a 2 MB page takes one
// fault for 512 of them. Allocations of 2 MB or more are mapped on a 2 MB boundary and advised
// MADV_HUGEPAGE (a hint: where the kernel's transparent huge pages are off, pages stay 4 KB);
// smaller ones come from the heap, on a cache line.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace dscale {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

template <typename T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return static_cast<T*>(::operator new(bytes, kLineAlignment));
    // Map a huge page more than needed, then return the parts before the first 2 MB boundary
    // and after the rounded-up size.
    const std::size_t size = RoundedUp(bytes), mapped = size + kHugePageBytes;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (start + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
    if (aligned > start) munmap(p, aligned - start);
    const std::size_t tail = start + mapped - (aligned + size);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
    return reinterpret_cast<T*>(aligned);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePageBytes) return ::operator delete(p, kLineAlignment);
    munmap(p, RoundedUp(bytes));
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }

 private:
  static constexpr std::align_val_t kLineAlignment{64};  // small ones on cache lines
  static std::size_t RoundedUp(std::size_t bytes) {
    return (bytes + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace dscale
