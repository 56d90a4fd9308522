// SPDX-License-Identifier: BSD-3-Clause
// A POSIX shared-memory segment private to the job: mode 0600, an unguessable name, and
// unlinked as soon as every local peer has mapped it (so a crash leaves no file behind).
// A job with one local process uses anonymous memory and creates no file at all.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::net::shm {

class segment {
 public:
  segment() = default;
  ~segment();
  segment(const segment&) = delete;
  segment& operator=(const segment&) = delete;

  // name empty: anonymous. The file's memory is reserved here (posix_fallocate), so a
  // full /dev/shm is an error at start-up, naming the size and `settings` (the variables
  // that lower it), not a SIGBUS in the middle of traffic. With may_refuse, a /dev/shm
  // without room returns false instead (nothing created) so that the caller may ask less.
  bool create(const std::string& name, size_t size, const char* settings, bool may_refuse = false);
  // Maps the whole of an existing segment, which must hold at least min_size bytes.
  void attach(const std::string& name, size_t min_size);
  void unlink();
  // Waits until `attached` (a counter in the segment that each peer increments once it has
  // mapped it) reaches `peers`, then unlinks the name: a crash from then on leaves no file.
  void unlink_when_attached(std::atomic<uint32_t>& attached, uint32_t peers, const char* what);
  // Fills this process's page table for [offset, offset + len) without touching the data
  // (MADV_POPULATE_WRITE, Linux 5.14): the first transfer through it then takes no page
  // faults. A kernel without it leaves the faults to the first use.
  void prefault(size_t offset, size_t len);
  void* base() const { return base_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }  // "" when anonymous

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace weft::net::shm
