// SPDX-License-Identifier: BSD-3-Clause
// Generations for the objects behind public handles (runtimes, devices, pools, engines,
// completion objects, registrations). Their memory is type-stable: a freed object's memory
// goes to a free list of its size class, never back to the system, and a header before the
// object counts how many times that memory was freed. A handle carries the count's low 16
// bits in its pointer's top 16 bits (user-space pointers use 48), so a handle used after
// its object was freed (a stale copy, a device after finalize) is recognised on use and
// refused with an error, instead of being dereferenced.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace weft::util {

namespace gen {

// The stamp packs the generation (times this memory was freed, modulo 2^16) in the same
// top 16 bits a handle carries it in, and the state (live or freed) in the low 32, so that
// checking a handle is one load and one compare.
struct alignas(16) header {
  std::atomic<uint64_t> stamp;
  uint64_t size_class;
};
inline constexpr uint64_t live = 0x11fe11feu, freed = 0xdeadf4eeu;
inline constexpr uint64_t state_mask = 0xffffffffu;
inline constexpr unsigned tag_shift = 48;
inline constexpr uintptr_t address_mask = (uintptr_t(1) << tag_shift) - 1;

// 64-byte aligned memory of at least `size` bytes, with a header before it.
void* allocate(size_t size);
// Back to its size class; the header counts one more free.
void release(void* p) noexcept;
inline header* header_of(const void* p) {
  return reinterpret_cast<header*>(reinterpret_cast<uintptr_t>(p) - sizeof(header));
}

// For objects an owner recycles itself (continuations, kept by their request): `retire`
// counts a free without giving the memory back, so handles to it go stale; `revive` makes
// the same memory live again under its new generation. Inline: once each per continuation.
inline void retire(void* p) noexcept {
  header* h = header_of(p);
  // One more free: the generation moves on (wrapping within its 16 bits), the state is freed.
  const uint64_t g =
      (h->stamp.load(std::memory_order_relaxed) & ~address_mask) + (uint64_t(1) << tag_shift);
  h->stamp.store(g | freed, std::memory_order_release);
}

inline void revive(void* p) noexcept {
  header* h = header_of(p);
  const uint64_t g = h->stamp.load(std::memory_order_relaxed) & ~address_mask;
  h->stamp.store(g | live, std::memory_order_release);
}

}  // namespace gen

// A handle's pointer for object `p` (allocated by gen::allocate): the object's generation
// in the top bits.
template <typename T>
T* tagged(T* p) {
  if (!p) return p;
  const uint64_t g = gen::header_of(p)->stamp.load(std::memory_order_relaxed) & ~gen::address_mask;
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) | g);
}

// A handle's pointer without its generation tag: the object's address.
template <typename T>
[[gnu::always_inline]] inline T* untagged(T* h) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(h) & gen::address_mask);
}

// Whether a handle pointer is null or names a live object of the generation its tag
// carries: one load and one compare.
[[gnu::always_inline]] inline bool live_any(uintptr_t h) {
  return !h ||
         gen::header_of(reinterpret_cast<const void*>(h & gen::address_mask))
                 ->stamp.load(std::memory_order_relaxed) == ((h & ~gen::address_mask) | gen::live);
}

// For a handle pointer known to carry no tag: live_any with the tag's part of the compare
// folded into a constant.
[[gnu::always_inline]] inline bool live_untagged(uintptr_t h) {
  return !h ||
         gen::header_of(reinterpret_cast<const void*>(h))->stamp.load(std::memory_order_relaxed) ==
             gen::live;
}

// A fatal_error naming `call` and `argument`, saying why `h` names no live object.
[[noreturn, gnu::cold]] void fail_stale(const char* call, const char* argument, const void* h);

// The object a handle names, checked: `h` without its tag, or a fatal_error naming `call`
// and `argument` when the object was freed. Inline: completion queues are popped and
// operations posted through handles on the critical path.
template <typename T>
[[gnu::always_inline]] inline T* live(T* h, const char* call, const char* argument) {
  if (!live_any(reinterpret_cast<uintptr_t>(h))) [[unlikely]]
    fail_stale(call, argument, h);
  return untagged(h);
}

// For a class behind a handle: its objects live in generational memory.
#define WEFT_GENERATIONAL_MEMORY                                    \
  static void* operator new(size_t n) {                             \
    return ::weft::util::gen::allocate(n);                          \
  }                                                                 \
  static void* operator new(size_t n, std::align_val_t) {           \
    return ::weft::util::gen::allocate(n);                          \
  }                                                                 \
  static void operator delete(void* p) noexcept {                   \
    ::weft::util::gen::release(p);                                  \
  }                                                                 \
  static void operator delete(void* p, std::align_val_t) noexcept { \
    ::weft::util::gen::release(p);                                  \
  }

}  // namespace weft::util
