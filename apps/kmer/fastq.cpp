// SPDX-License-Identifier: BSD-3-Clause
#include "fastq.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kmer {

fastq_file::fastq_file(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw std::runtime_error(path + ": cannot map: " + std::strerror(errno));
    }
    ::madvise(p, size_, MADV_SEQUENTIAL);
    data_ = static_cast<const char*>(p);
  }
  ::close(fd);
  if (size_ && data_[0] != '@')
    throw std::runtime_error(path + ": not FASTQ (no '@' at its start)");
}

fastq_file::~fastq_file() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

size_t fastq_file::line_end(size_t at) const {
  if (at >= size_) return size_;
  const void* nl = std::memchr(data_ + at, '\n', size_ - at);
  return nl ? size_t(static_cast<const char*>(nl) - data_) : size_;
}

size_t fastq_file::next_header(size_t from) const {
  if (from == 0) return 0;
  size_t at = line_end(from - 1) + 1;  // the first line starting at or after `from`
  while (at < size_) {
    const size_t second = line_end(line_end(at) + 1) + 1;
    if (data_[at] == '@' && second < size_ && data_[second] == '+') return at;
    at = line_end(at) + 1;
  }
  return size_;
}

void fastq_file::malformed(size_t at, const char* what) const {
  throw std::runtime_error(path_ + ": byte " + std::to_string(at) + ": " + what +
                           " (truncated or not FASTQ)");
}

}  // namespace kmer
