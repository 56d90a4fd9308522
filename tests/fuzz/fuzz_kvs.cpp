// SPDX-License-Identifier: BSD-3-Clause
// weftrun's key-value server (tools/weftrun/kvs_server.cpp) and the client's decoding of its
// values (src/bootstrap/kvs_wire.cpp): request lines come from any process that reaches the
// job's socket. Each input is a sequence of lines from up to four connections (a line's
// first byte picks the connection) into one server of a job of three ranks. Properties: a
// HELLO names a rank only as a plain decimal number and a cookie only as 16 lowercase hex
// digits, and hex_decode accepts exactly what hex_encode produces.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap/kvs_wire.hpp"
#include "weftrun/kvs_server.hpp"

using namespace weft::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  weftrun::kvs_server server(3, 0x0123456789abcdefull);
  size_t at = 0;
  while (at < in.size()) {
    size_t nl = in.find('\n', at);
    if (nl == std::string::npos) nl = in.size();
    std::string line = in.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) continue;
    // Replies go to fds that are not open (-1 .. -4): writing them fails, as to a client
    // that went away.
    const int fd = -1 - (static_cast<unsigned char>(line[0]) % 4);
    line.erase(0, 1);
    const kvs_request q = parse_kvs_request(line);
    if (q.k == kvs_request::kind::hello) {
      // "HELLO <rank>[ <cookie>]": the rank a plain decimal token, the cookie exactly 16
      // lowercase hex digits and the rest of the line.
      const std::string rest = line.size() > 6 ? line.substr(6) : "";
      const size_t sp = rest.find(' ');
      const std::string rank = rest.substr(0, sp);
      if (q.rank >= 0 && (q.rank > 999999999 || rank.empty() ||
                          rank.find_first_not_of("0123456789") != std::string::npos))
        abort();
      if (q.has_cookie && (sp == std::string::npos || rest.size() - sp - 1 != 16 ||
                           rest.find_first_not_of("0123456789abcdef", sp + 1) != std::string::npos))
        abort();
    }
    if (!server.on_line(fd, line)) server.on_disconnect(fd);
    if (line.size() > 1 && (line[0] & 7) == 0)
      server.rank_exited(static_cast<unsigned char>(line[1]) % 3, line[0] & 8, "fuzz");
    std::string out;
    if (hex_decode(line, out) && !line.empty() && hex_encode(out) != line) abort();
  }
  return 0;
}
