// SPDX-License-Identifier: BSD-3-Clause
#include "bootstrap/kvs_wire.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace weft::bootstrap {

kvs_request parse_kvs_request(const std::string& line) {
  kvs_request r;
  const size_t sp = line.find(' ');
  r.cmd = line.substr(0, sp);
  const std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
  using k = kvs_request::kind;
  if (r.cmd == "HELLO") {
    r.k = k::hello;
    const size_t sp2 = rest.find(' ');
    const std::string rank = rest.substr(0, sp2);
    if (!rank.empty() && rank.size() <= 9 &&
        rank.find_first_not_of("0123456789") == std::string::npos)
      r.rank = std::stoi(rank);
    if (sp2 != std::string::npos) r.has_cookie = parse_cookie(rest.substr(sp2 + 1), r.cookie);
  } else if (r.cmd == "PUT") {
    r.k = k::put;
    const size_t sp2 = rest.find(' ');
    r.has_value = sp2 != std::string::npos;
    r.key = rest.substr(0, sp2);
    if (r.has_value) r.value = rest.substr(sp2 + 1);
  } else if (r.cmd == "GET") {
    r.k = k::get;
    r.key = rest;
  } else if (r.cmd == "FENCE") {
    r.k = k::fence;
  } else if (r.cmd == "BYE") {
    r.k = k::bye;
  }
  return r;
}

std::string hex_encode(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  if (bytes.empty()) return std::string(1, '-');  // an empty value still forms a token
  std::string out;
  out.reserve(bytes.size() * 2 + 1);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string cookie_hex(uint64_t cookie) {
  char b[17];
  snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(cookie));
  return b;
}

bool parse_cookie(const std::string& hex, uint64_t& cookie) {
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  cookie = std::stoull(hex, nullptr, 16);
  return true;
}

bool hex_decode(const std::string& hex, std::string& out) {
  out.clear();
  if (hex == "-") return true;
  if (hex.size() % 2) return false;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = val(hex[i]), lo = val(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(char(hi * 16 + lo));
  }
  return true;
}

bool write_line(int fd, const std::string& line) {
  std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

bool read_line(int fd, std::string& line, std::string& pending) {
  for (;;) {
    size_t nl = pending.find('\n');
    if (nl != std::string::npos) {
      line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return true;
    }
    if (pending.size() > max_kvs_line) return false;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    pending.append(buf, size_t(n));
  }
}

bool random_bytes(void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(static_cast<char*>(p) + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

}  // namespace weft::bootstrap
