// SPDX-License-Identifier: BSD-3-Clause
#include "util/generation.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "util/fail.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define WEFT_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define WEFT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define WEFT_POISON(p, n) ((void)(p), (void)(n))
#define WEFT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace weft::util {
namespace gen {
namespace {

// Size classes: powers of two from 128 bytes; each chunk is [64 bytes: header at its end]
// [object], so the object is 64-byte aligned. Rarely taken (allocations and frees of
// handle objects), so one lock.
constexpr size_t prefix = 64;
constexpr unsigned nclasses = 40;

struct lists {
  std::mutex lock;
  std::vector<void*> free[nclasses];
};

lists& the_lists() {
  static lists* l = new lists;  // never destroyed: objects may be freed at exit
  return *l;
}

unsigned class_of(size_t size) {
  const size_t total = size + prefix;
  unsigned c = 7;  // 128 bytes
  while ((size_t(1) << c) < total) ++c;
  return c;
}

}  // namespace

void* allocate(size_t size) {
  const unsigned c = class_of(size);
  if (c >= nclasses) throw std::bad_alloc();
  void* obj = nullptr;
  {
    lists& l = the_lists();
    std::lock_guard<std::mutex> guard(l.lock);
    if (!l.free[c].empty()) {
      obj = l.free[c].back();
      l.free[c].pop_back();
    }
  }
  if (!obj) {
    char* chunk = static_cast<char*>(std::aligned_alloc(64, size_t(1) << c));
    if (!chunk) throw std::bad_alloc();
    obj = chunk + prefix;
    header* h = new (header_of(obj)) header{};
    h->stamp.store(0, std::memory_order_relaxed);
    h->size_class = c;
  }
  WEFT_UNPOISON(obj, (size_t(1) << c) - prefix);
  header* h = header_of(obj);
  const uint64_t g = h->stamp.load(std::memory_order_relaxed) & ~address_mask;
  h->stamp.store(g | live, std::memory_order_release);
  return obj;
}

void release(void* p) noexcept {
  if (!p) return;
  header* h = header_of(p);
  if ((h->stamp.load(std::memory_order_relaxed) & state_mask) != freed) retire(p);
  const unsigned c = unsigned(h->size_class);
  WEFT_POISON(p, (size_t(1) << c) - prefix);
  lists& l = the_lists();
  std::lock_guard<std::mutex> guard(l.lock);
  l.free[c].push_back(p);
}

}  // namespace gen

namespace {
// Why the handle pointer `h` does not name a live object of its generation.
const char* stale_reason(const void* h) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(h);
  const uint64_t stamp =
      gen::header_of(reinterpret_cast<const void*>(v & gen::address_mask))->stamp.load();
  if ((stamp & gen::state_mask) == gen::freed) return "the object it names has been freed";
  if ((stamp & gen::state_mask) != gen::live) return "not a handle Weft gave out";
  return "the object it named has been freed (its memory now holds another)";
}
}  // namespace

void fail_stale(const char* call, const char* argument, const void* h) {
  fail(call, argument, to_hex(h), std::string("a stale handle: ") + stale_reason(h));
}

}  // namespace weft::util
