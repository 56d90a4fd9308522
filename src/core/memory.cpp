// SPDX-License-Identifier: BSD-3-Clause
// Memory for one-sided access: registering a program's own buffer, and alloc_memory, which
// allocates memory that the peers on this host can map (net/shm/shareable.hpp), so that
// their puts and gets into it are one memcpy each. Either way the registration's handle
// (get_rmr) is what peers name in post_put and post_get.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/runtime.hpp"
#include "net/shm/shareable.hpp"
#include "util/fail.hpp"
#include "weft/weft.hpp"

namespace weft {
using namespace impl;

namespace detail {

mr_t register_memory_impl(const register_args& a) {
  runtime_impl* rt = resolve_runtime(a.runtime, "register_memory");
  if (!a.base)
    util::fail("register_memory", "base", "nullptr",
               "null buffer with size " + std::to_string(a.size));
  if (a.size == 0) util::fail("register_memory", "size", "0", "an empty region");
  if (a.size > max_msg_size)
    util::fail("register_memory", "size", std::to_string(a.size),
               "exceeds the maximum region size " + std::to_string(max_msg_size));
  // Every page must be mapped: a region a peer writes into must exist. msync answers
  // ENOMEM for a range with a hole, without touching the pages.
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(a.base) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(a.base) + a.size;
  if (msync(reinterpret_cast<void*>(first), end - first, MS_ASYNC) != 0 && errno == ENOMEM)
    util::fail("register_memory", "base", util::to_hex(a.base),
               "the range of " + std::to_string(a.size) + " bytes is not all mapped memory");
  return mr_t{util::tagged(rt->register_memory(a.base, a.size))};
}

mr_t alloc_memory_impl(const alloc_memory_args& a) {
  runtime_impl* rt = resolve_runtime(a.runtime, "alloc_memory");
  if (a.size == 0) util::fail("alloc_memory", "size", "0", "an empty region");
  if (a.size > max_msg_size)
    util::fail("alloc_memory", "size", std::to_string(a.size),
               "exceeds the maximum region size " + std::to_string(max_msg_size));
  void* base = net::shm::alloc_shareable(a.size);
  if (!base)
    util::fail("alloc_memory", "size", std::to_string(a.size),
               std::string("the system refused the memory: ") + strerror(errno));
  mr_impl* m = rt->register_memory(base, a.size);
  m->allocated = true;
  return mr_t{util::tagged(m)};
}

}  // namespace detail

void deregister_memory(mr_t* mr) {
  if (!mr || !mr->p) util::fail("deregister_memory", "mr", "empty", "not a registration");
  mr_impl* m = util::live(mr->p, "deregister_memory", "mr");
  if (!m->rt)
    util::fail("deregister_memory", "runtime", "freed",
               "the region's runtime was freed (g_runtime_fina or free_runtime) before it");
  if (m->allocated)
    util::fail("deregister_memory", "mr", "from alloc_memory",
               "Weft owns that memory: free_memory deregisters and frees it");
  m->rt->deregister_memory(m);
  mr->p = nullptr;
}

rmr_t get_rmr(mr_t mr) {
  if (!mr.p) util::fail("get_rmr", "mr", "empty", "not a registration");
  return util::live(mr.p, "get_rmr", "mr")->rmr;
}

void* mr_t::get_attr_base() const {
  return p ? reinterpret_cast<void*>(util::live(p, "get_attr_base", "mr")->rmr.base) : nullptr;
}
size_t mr_t::get_attr_size() const {
  return p ? util::live(p, "get_attr_size", "mr")->rmr.size : 0;
}

// Deregisters like deregister_memory, then gives the memory back.
void free_memory(mr_t* mr) {
  if (!mr || !mr->p) util::fail("free_memory", "mr", "empty", "not an allocation");
  mr_impl* m = util::live(mr->p, "free_memory", "mr");
  if (!m->allocated)
    util::fail("free_memory", "mr", "from register_memory",
               "the program owns that memory: deregister it with deregister_memory");
  void* base = reinterpret_cast<void*>(m->rmr.base);
  if (m->rt) m->rt->deregister_memory(m);  // a freed runtime has forgotten the region
  net::shm::free_shareable(base);
  mr->p = nullptr;
}

}  // namespace weft
