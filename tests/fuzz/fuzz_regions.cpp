// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory region table (src/net/shm/regions.cpp): a peer's put or get names a
// region by the handle it was sent (key, generation) and an address and size inside it, and
// the owner's table must refuse every access that is not wholly inside a live region under
// exactly that name. Property checked on every input: acquire succeeds only then. Input:
// which of four registered regions to aim at (or none), then a key and generation xor-ed
// onto that region's (all zero: its own), an offset from its base and a size.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <weft/weft.hpp>

#include "core/runtime.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/generation.hpp"

namespace {

struct region {
  std::vector<char> mem;
  weft::mr_t mr;
  weft::rmr_t rmr;
};
region regions[4];
weft::net::shm::shm_context* shm = nullptr;

struct input {
  uint8_t which;
  uint64_t key_xor, generation_xor;
  int64_t offset;
  uint64_t size;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("WEFT_LOG_LEVEL", "none", 1);
  setenv("WEFT_BACKEND", "shm", 1);
  weft::g_runtime_init();
  const size_t sizes[4] = {1, 4096, 65536, 3};
  for (int i = 0; i < 4; ++i) {
    regions[i].mem.resize(sizes[i]);
    regions[i].mr = weft::register_memory(regions[i].mem.data(), sizes[i]);
    regions[i].rmr = weft::get_rmr(regions[i].mr);
  }
  weft::deregister_memory(&regions[3].mr);  // a retired region: never accessible
  auto* rt = weft::util::live(weft::get_g_runtime().p, "fuzz", "runtime");
  shm = dynamic_cast<weft::net::shm::shm_context*>(rt->net.get());
  if (!shm) abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  input in{};
  memcpy(&in, data, std::min(size, sizeof(in)));
  const region& r = regions[in.which % 4];
  const weft::net::rkey_t k{r.rmr.key ^ in.key_xor, r.rmr.generation ^ in.generation_xor};
  const uint64_t addr = r.rmr.base + uint64_t(in.offset);
  uint32_t slot = 0;
  const char* why = shm->regions().acquire(0, k, addr, in.size, slot);
  if (why) return 0;
  shm->regions().release(0, slot);
  // Accepted: it must be a live region's own name, and the range wholly inside it.
  bool inside = false;
  for (int i = 0; i < 3; ++i) {
    const weft::rmr_t& m = regions[i].rmr;
    if (k.key == m.key && k.generation == m.generation && addr >= m.base && in.size <= m.size &&
        addr - m.base <= m.size - in.size)
      inside = true;
  }
  if (!inside) abort();
  return 0;
}
