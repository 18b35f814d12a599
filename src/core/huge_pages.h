#pragma once
// Arrays of megabytes — a hybrid's recurrent states (about 50 MB a request at Qwen3.5-4B and 9B),
// the weights a step streams (model/resident_weights.h, quantize_weights.h) — on transparent
// huge pages. Memory a process maps is faulted in a page at a time on
// first touch, and at 4 KB a page a new request's states cost a fault per 4 KB (about 80 ms a
// request on a 2-vCPU guest, more than its prompt at a few hundred tokens); a 2 MB page takes one
// fault for 512 of them. Allocations of 2 MB or more are mapped on a 2 MB boundary and advised
// MADV_HUGEPAGE (a hint: where the kernel's transparent huge pages are off, pages stay 4 KB);
// smaller ones come from the heap, on a cache line.

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
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
    // and after the size rounded up to 4 KB pages: the whole 2 MB stretches get huge pages, the
    // tail small ones (rounding it up to 2 MB would waste up to half of a 3 MB array, which an
    // expert's matrix at 8 bits is).
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
  static constexpr std::size_t kSmallPageBytes = 4096;
  static std::size_t RoundedUp(std::size_t bytes) {
    return (bytes + kSmallPageBytes - 1) & ~(kSmallPageBytes - 1);
  }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

// n values of T (trivial: nothing constructed) in HugePageAllocator's memory, left unzeroed, so
// the threads that write them first fault their pages in.
template <typename T>
struct HugePageDeleter {
  std::size_t n = 0;
  void operator()(T* p) const noexcept { HugePageAllocator<T>().deallocate(p, n); }
};
template <typename T>
using HugePageArray = std::unique_ptr<T[], HugePageDeleter<T>>;
template <typename T>
HugePageArray<T> MakeHugePageArray(std::size_t n) {
  static_assert(std::is_trivially_default_constructible_v<T>);
  return HugePageArray<T>(HugePageAllocator<T>().allocate(n), HugePageDeleter<T>{n});
}

}  // namespace dscale
