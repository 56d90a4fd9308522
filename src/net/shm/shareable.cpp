// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/shareable.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

namespace weft::net::shm {

namespace {
struct allocation {
  size_t size;
  int fd;
};
// By base address. Allocation and registration are rare (not on any transfer's path): a
// mutex is enough.
std::mutex lock;
std::map<uintptr_t, allocation>& allocations() {
  static std::map<uintptr_t, allocation> m;
  return m;
}
}  // namespace

namespace {
// A memory file of `size` bytes mapped here, or MAP_FAILED (fd -1).
void* map_file(size_t size, unsigned flags, int& fd) {
  fd = memfd_create("weft-memory", MFD_CLOEXEC | flags);
  if (fd < 0) return MAP_FAILED;
  void* base = MAP_FAILED;
  if (ftruncate(fd, off_t(size)) == 0)
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    fd = -1;
    errno = err;
  }
  return base;
}
}  // namespace

void* alloc_shareable(size_t size) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), huge = size_t(2) << 20;
  if (size == 0 || size > SIZE_MAX - huge) {
    errno = EINVAL;
    return nullptr;
  }
  // On huge pages where the host has reserved them (vm.nr_hugepages; transparent huge
  // pages do not reach memory files unless shmem_enabled allows): a copy of megabytes
  // then walks a 512th of the page tables. Otherwise small pages.
  int fd = -1;
  void* base = MAP_FAILED;
  if (size >= huge) {
    size = (size + huge - 1) / huge * huge;
    base = map_file(size, MFD_HUGETLB, fd);
  }
  if (base == MAP_FAILED) {
    size = (size + page - 1) / page * page;
    base = map_file(size, 0, fd);
  }
  if (base == MAP_FAILED) return nullptr;
  std::lock_guard<std::mutex> g(lock);
  allocations()[reinterpret_cast<uintptr_t>(base)] = allocation{size, fd};
  return base;
}

bool free_shareable(void* base) {
  allocation a{};
  {
    std::lock_guard<std::mutex> g(lock);
    auto it = allocations().find(reinterpret_cast<uintptr_t>(base));
    if (it == allocations().end()) return false;
    a = it->second;
    allocations().erase(it);
  }
  munmap(base, a.size);
  close(a.fd);
  return true;
}

bool find_shareable(const void* base, size_t size, int& fd, uint64_t& offset, uint64_t& ino) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> g(lock);
  auto it = allocations().upper_bound(b);
  if (it == allocations().begin()) return false;
  --it;
  const uintptr_t start = it->first;
  if (b - start >= it->second.size || size > it->second.size - (b - start)) return false;
  struct stat st {};
  if (fstat(it->second.fd, &st) != 0) return false;
  fd = it->second.fd;
  offset = b - start;
  ino = uint64_t(st.st_ino);
  return true;
}

}  // namespace weft::net::shm
