// SPDX-License-Identifier: BSD-3-Clause
// Zeroed memory for the counting table: one reservation of address space, mapped with huge
// pages where the kernel offers them (MADV_HUGEPAGE), handed out by a bump pointer. The
// table's gigabytes are touched once each, by the counting threads; in 4 KiB pages that was
// half a million page faults, 3.5-10 s of system time in a 15-22 s run on the 2-core
// virtual machine, varying from run to run more than the libraries under comparison did
// (docs/kmer.md). Memory is never reused: a slice given back returns its whole pages to
// the kernel, and the next take is fresh, hence zero.
#ifndef WEFT_APPS_KMER_ARENA_HPP
#define WEFT_APPS_KMER_ARENA_HPP

#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace kmer {

class arena {
 public:
  // Reserves `bytes` of address space (rounded up to 2 MiB; nothing is touched). Where the
  // system refuses that much (strict overcommit), a quarter, then the `least` bytes; where
  // it refuses even that, the arena is empty and every take() says so.
  arena(size_t bytes, size_t least) {
    for (size_t want : {bytes, bytes / 4, least}) {
      size_ = round_up(want, huge);
      if (size_ < least || size_ == 0) continue;
      void* p = mmap(nullptr, size_ + huge, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) continue;
      map_ = static_cast<char*>(p);
      base_ = map_ + (round_up(uintptr_t(map_), huge) - uintptr_t(map_));  // on a 2 MiB line
      madvise(base_, size_, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages as before
      return;
    }
    size_ = 0;
  }
  ~arena() {
    if (map_) munmap(map_, size_ + huge);
  }
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  // `n` zeroed bytes aligned to a cache line, or nullptr when the reservation is used up.
  void* take(size_t n) {
    n = round_up(n, 64);
    size_t at = used_.load(std::memory_order_relaxed);
    do {
      if (at + n > size_) return nullptr;
    } while (!used_.compare_exchange_weak(at, at + n, std::memory_order_relaxed));
    return base_ + at;
  }
  bool owns(const void* p) const { return p >= base_ && p < base_ + size_; }
  // Gives the whole pages inside [p, p + n) back to the kernel (a slice no longer used).
  static void give_back(void* p, size_t n) {
    const uintptr_t b = round_up(uintptr_t(p), 4096), e = (uintptr_t(p) + n) & ~uintptr_t(4095);
    if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }

 private:
  static constexpr size_t huge = size_t(2) << 20;
  static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

  char* map_ = nullptr;
  char* base_ = nullptr;
  size_t size_ = 0;
  std::atomic<size_t> used_{0};
};

}  // namespace kmer

#endif
