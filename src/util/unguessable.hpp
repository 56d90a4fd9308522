// SPDX-License-Identifier: BSD-3-Clause
// Names that a peer cannot guess: registration keys and ids. A counter, never reused, mixed
// with a secret this process draws at start-up by a bijection on 64 bits (so two names
// never collide), and never 0 (key 0 names nothing). Counting 1, 2, 3 in every job let a
// handle made by hand name a live region.
#pragma once

#include <sys/random.h>

#include <atomic>
#include <cstdint>

namespace weft::util {

class unguessable {
 public:
  unguessable() {
    uint64_t s[2] = {0, 0};
    if (getrandom(s, sizeof(s), 0) != sizeof(s)) {  // no entropy: still unique, less secret
      s[0] = uint64_t(reinterpret_cast<uintptr_t>(this)) * 0x9E3779B97F4A7C15ull;
      s[1] = ~s[0];
    }
    key_ = s[0];
    add_ = s[1] | 1;
  }
  uint64_t next() {
    for (;;) {
      const uint64_t v = mix(next_.fetch_add(1, std::memory_order_relaxed) * add_ ^ key_);
      if (v) return v;
    }
  }

 private:
  // splitmix64's finaliser: a bijection, so distinct counters give distinct names.
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t key_, add_;
  std::atomic<uint64_t> next_{1};
};

}  // namespace weft::util
