// SPDX-License-Identifier: BSD-3-Clause
// FASTQ input for the k-mer counter: a file mapped read-only and cut into byte ranges, one
// per (rank, thread); a record belongs to the range its '@' header starts in. A range that
// starts mid-record finds the next header as the first line starting with '@' whose
// second-next line starts with '+' (a quality line may start with '@'; a sequence line
// never starts with '+'). Four-line records only (no wrapped sequences); a record missing
// a line, a '+' separator or a quality string as long as its sequence is an error naming
// the file and the byte offset.
#ifndef WEFT_APPS_KMER_FASTQ_HPP
#define WEFT_APPS_KMER_FASTQ_HPP

#include <cstddef>
#include <stdexcept>
#include <string>

namespace kmer {

class fastq_file {
 public:
  // Maps `path`; throws std::runtime_error naming it when it cannot be opened or mapped.
  explicit fastq_file(const std::string& path);
  ~fastq_file();
  fastq_file(const fastq_file&) = delete;
  fastq_file& operator=(const fastq_file&) = delete;

  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Calls fn(seq, len) for each record whose header starts in [begin, end); returns the
  // number of records. Throws std::runtime_error for a malformed record.
  template <class Fn>
  size_t for_each_read(size_t begin, size_t end, Fn&& fn) const;

 private:
  size_t next_header(size_t from) const;  // the first header at or after `from`
  size_t line_end(size_t at) const;       // index of the '\n' ending the line at `at` (or size)
  [[noreturn]] void malformed(size_t at, const char* what) const;

  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

template <class Fn>
size_t fastq_file::for_each_read(size_t begin, size_t end, Fn&& fn) const {
  size_t n = 0, at = next_header(begin);
  while (at < end && at < size_) {
    const size_t h_end = line_end(at);
    const size_t s_at = h_end + 1, s_end = line_end(s_at);
    const size_t p_at = s_end + 1, p_end = line_end(p_at);
    const size_t q_at = p_end + 1, q_end = line_end(q_at);
    if (data_[at] != '@') malformed(at, "a record that does not start with '@'");
    if (p_at >= size_ || data_[p_at] != '+') malformed(at, "a record without its '+' line");
    if (q_at > size_ || q_end - q_at != s_end - s_at)
      malformed(at, "a record whose quality line is missing or not as long as its sequence");
    size_t len = s_end - s_at;
    if (len && data_[s_at + len - 1] == '\r') --len;
    fn(data_ + s_at, len);
    ++n;
    at = q_end + 1;
  }
  // The record after this part's last one must be the one the next part starts from: a
  // malformed record there (no '+' line: not recognised as a header) would otherwise be
  // skipped by both.
  if (at < size_ && at != next_header(end)) malformed(at, "a record without its '+' line");
  return n;
}

}  // namespace kmer

#endif
