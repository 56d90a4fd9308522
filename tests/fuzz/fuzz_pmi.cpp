// SPDX-License-Identifier: BSD-3-Clause
// PMI replies (src/bootstrap/pmi_wire.cpp): what a launcher, or whatever holds PMI_FD, sends.
// The first byte picks the decoder; the rest is its input. Properties beyond "no crash": a
// frame length is accepted only as 1 to 6 digits padded with blanks, never above the bound,
// and a process mapping is either empty or has exactly one node per rank.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "bootstrap/pmi_wire.hpp"

using namespace weft::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: (void)parse_pmi1_line(in); break;
    case 1:
      if (in.size() >= 6) {
        size_t n = 0;
        if (parse_pmi2_length(in.data(), &n) &&
            (n > max_pmi2_frame ||
             in.substr(0, 6).find_first_not_of(" 0123456789") != std::string::npos))
          abort();
      }
      break;
    case 2: (void)parse_pmi2_body(in); break;
    default: {
      const int ranks = 1 + data[0] / 4 % 64;
      const std::vector<int> node = parse_process_mapping(in, ranks);
      if (!node.empty() && int(node.size()) != ranks) abort();
      for (int v : node)
        if (v < 0) abort();
    }
  }
  return 0;
}
