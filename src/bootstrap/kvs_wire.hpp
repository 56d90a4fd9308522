// Line protocol between a rank and weftrun's key-value server (a Unix socket):
//   HELLO <rank> | PUT <key> <hex> | GET <key> | FENCE | BYE      (rank -> weftrun)
//   OK | VAL <hex> | ERR <text>                                   (weftrun -> rank)
// Keys contain no blanks; values travel hex-encoded.
#pragma once

#include <string>

namespace weft::bootstrap {

std::string hex_encode(const std::string& bytes);
bool hex_decode(const std::string& hex, std::string& out);

// Blocking helpers on a connected socket; false on EOF or error.
bool write_line(int fd, const std::string& line);
bool read_line(int fd, std::string& line, std::string& pending);

}  // namespace weft::bootstrap
