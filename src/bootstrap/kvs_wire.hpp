// SPDX-License-Identifier: BSD-3-Clause
// Line protocol between a rank and weftrun's key-value server (a Unix socket):
//   HELLO <rank> <cookie> | PUT <key> <hex> | GET <key> | FENCE | BYE   (rank -> weftrun)
//   OK | VAL <hex> | ERR <text>                                          (weftrun -> rank)
// Keys contain no blanks; values travel hex-encoded. The cookie is the job's secret
// (WEFT_JOB_COOKIE, 16 hex digits), which weftrun gave its ranks: a process of another job
// that reaches the socket by mistake is refused before it can read or write a key.
#pragma once

#include <cstdint>
#include <string>

namespace weft::bootstrap {

// One request line as weftrun's server reads it. A HELLO's rank is -1 unless it is a plain
// decimal number, and its cookie is set only when it is 16 lowercase hex digits (has_cookie);
// a PUT without a value has kind put and has_value false.
struct kvs_request {
  enum class kind { hello, put, get, fence, bye, unknown } k = kind::unknown;
  std::string cmd, key, value;
  int rank = -1;
  uint64_t cookie = 0;
  bool has_value = false, has_cookie = false;
};
kvs_request parse_kvs_request(const std::string& line);

// The longest line either side accepts (values are hex-encoded blobs): a peer that sends
// more without a newline is cut off instead of growing the buffer without bound.
inline constexpr size_t max_kvs_line = size_t(64) << 20;

std::string hex_encode(const std::string& bytes);
// A job cookie as it travels: 16 lowercase hex digits, and back (false unless exactly that).
std::string cookie_hex(uint64_t cookie);
bool parse_cookie(const std::string& hex, uint64_t& cookie);
bool hex_decode(const std::string& hex, std::string& out);

// Fills `n` bytes from the kernel's random source (job ids and cookies); false, with errno
// set, when it cannot.
bool random_bytes(void* p, size_t n);

// Blocking helpers on a connected socket; false on EOF or error (read_line: also on a line
// longer than max_kvs_line).
bool write_line(int fd, const std::string& line);
bool read_line(int fd, std::string& line, std::string& pending);

}  // namespace weft::bootstrap
