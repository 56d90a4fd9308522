// SPDX-License-Identifier: BSD-3-Clause
#include "net/shm/segment.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "net/shm/layout.hpp"
#include "util/fail.hpp"

namespace weft::net::shm {
namespace {
std::string mib(uint64_t bytes) {
  char b[32];
  snprintf(b, sizeof(b), "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return b;
}
}  // namespace

segment::~segment() {
  if (base_) munmap(base_, size_);
  unlink();
}

bool segment::create(const std::string& name, size_t size, const char* settings, bool may_refuse) {
  size_ = size;
  if (name.empty()) {
    base_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      util::fail("shm segment", "size", std::to_string(size), strerror(errno));
    }
    return true;
  }
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) util::fail("shm_open", "name", name, strerror(errno));
  name_ = name;
  owner_ = true;
  if (ftruncate(fd, off_t(size)) != 0) {
    int e = errno;
    close(fd);
    util::fail("shm segment ftruncate", "size", std::to_string(size), strerror(e));
  }
  if (int e = posix_fallocate(fd, 0, off_t(size)); e != 0) {
    close(fd);
    if (may_refuse && (e == ENOSPC || e == ENOMEM)) {
      unlink();
      return false;
    }
    std::string free_space;
    struct statvfs fs {};
    if (statvfs("/dev/shm", &fs) == 0)
      free_space = "; /dev/shm has " + mib(uint64_t(fs.f_bavail) * fs.f_frsize) + " free";
    unlink();
    util::fail("shm segment", "size", mib(size) + " (" + std::to_string(size) + " bytes)",
               std::string("cannot reserve it in /dev/shm: ") + strerror(e) + free_space +
                   "; every rank on this host needs one such segment per device; lower it "
                   "with " +
                   settings + ", or give /dev/shm more room (docker run --shm-size)");
  }
  base_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    util::fail("shm segment mmap", "size", std::to_string(size), strerror(e));
  }
  return true;
}

void segment::prefault(size_t offset, size_t len) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  if (!base_ || offset >= size_ || !len) return;
  len = std::min(len, size_ - offset);
  const uintptr_t page = 4096;
  const uintptr_t start = (reinterpret_cast<uintptr_t>(base_) + offset) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(base_) + offset + len;
  (void)madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE);
}

void segment::attach(const std::string& name, size_t min_size) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) util::fail("shm_open (attach)", "name", name, strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < min_size) {
    close(fd);
    util::fail("shm segment attach", "name", name,
               "segment of " + std::to_string(st.st_size) + " bytes, expected at least " +
                   std::to_string(min_size));
  }
  size_t size = size_t(st.st_size);
  size_ = size;
  base_ = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    util::fail("shm segment mmap (attach)", "name", name, strerror(e));
  }
}

void fail_foreign_segment(const char* call, int rank, const std::string& name) {
  util::fail(call, "segment of rank " + std::to_string(rank), name,
             "belongs to another job: its cookie is not this job's (a segment left by an "
             "earlier job, or ranks started with two jobs' environments?)");
}

void segment::unlink_when_attached(std::atomic<uint32_t>& attached, uint32_t peers,
                                   const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (attached.load(std::memory_order_acquire) < peers) {
    if (std::chrono::steady_clock::now() > deadline)
      util::fail("shm segment", what,
                 std::to_string(attached.load()) + " of " + std::to_string(peers) + " peers",
                 "peers did not map it within 120 s");
    sched_yield();
  }
  unlink();
}

void segment::unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

}  // namespace weft::net::shm
