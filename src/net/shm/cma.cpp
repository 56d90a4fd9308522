// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/cma.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace weft::net::shm {
namespace {
// Stay well below the 2 GiB a single call can move.
constexpr size_t max_per_call = size_t(1) << 30;

template <typename Fn>
int cma_loop(Fn&& call, char* local, uint64_t remote, size_t size) {
  size_t done = 0;
  while (done < size) {
    size_t n = std::min(size - done, max_per_call);
    iovec l{local + done, n};
    iovec r{reinterpret_cast<void*>(remote + done), n};
    ssize_t got = call(&l, &r);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    done += size_t(got);
  }
  return 0;
}
}  // namespace

int cma_read(pid_t pid, void* local, uint64_t remote, size_t size) {
  return cma_loop([pid](iovec* l, iovec* r) { return process_vm_readv(pid, l, 1, r, 1, 0); },
                  static_cast<char*>(local), remote, size);
}

int cma_write(pid_t pid, const void* local, uint64_t remote, size_t size) {
  return cma_loop([pid](iovec* l, iovec* r) { return process_vm_writev(pid, l, 1, r, 1, 0); },
                  const_cast<char*>(static_cast<const char*>(local)), remote, size);
}

}  // namespace weft::net::shm
