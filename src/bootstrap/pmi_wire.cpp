// SPDX-License-Identifier: BSD-3-Clause
#include "bootstrap/pmi_wire.hpp"

#include <array>
#include <climits>
#include <cstdio>
#include <cstring>

namespace weft::bootstrap {

pmi_fields parse_pmi1_line(const std::string& line) {
  pmi_fields out;
  size_t i = 0;
  while (i < line.size()) {
    size_t end = line.find(' ', i);
    if (end == std::string::npos) end = line.size();
    const std::string word = line.substr(i, end - i);
    const size_t eq = word.find('=');
    if (eq != std::string::npos) out[word.substr(0, eq)] = word.substr(eq + 1);
    i = end + 1;
  }
  return out;
}

bool parse_pmi2_length(const char prefix[6], size_t* n) {
  // Digits, padded with blanks on either side: Weft writes "%-6zu", hydra "%6d".
  size_t v = 0, digits = 0, i = 0;
  while (i < 6 && prefix[i] == ' ') ++i;
  for (; i < 6 && prefix[i] >= '0' && prefix[i] <= '9'; ++i, ++digits)
    v = v * 10 + size_t(prefix[i] - '0');
  for (; i < 6; ++i)
    if (prefix[i] != ' ') return false;
  if (!digits || v > max_pmi2_frame) return false;
  *n = v;
  return true;
}

pmi_fields parse_pmi2_body(const std::string& body) {
  pmi_fields out;
  std::string key, value;
  bool in_value = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (!in_value && c == '=') {
      in_value = true;
    } else if (c == ';' && i + 1 < body.size() && body[i + 1] == ';' && in_value) {
      value += ';';
      ++i;
    } else if (c == ';') {
      out[key] = value;
      key.clear();
      value.clear();
      in_value = false;
    } else {
      (in_value ? value : key) += c;
    }
  }
  return out;
}

std::vector<int> parse_process_mapping(const std::string& m, int size) {
  std::vector<std::array<int, 3>> blocks;
  const char* p = m.c_str();
  if (strncmp(p, "(vector,", 8) != 0) return {};
  p += 8;
  for (;;) {
    int a, b, c, used = 0;
    if (sscanf(p, "(%d,%d,%d)%n", &a, &b, &c, &used) != 3 || a < 0 || b <= 0 || c <= 0 ||
        a > INT_MAX - b)
      return {};
    blocks.push_back({a, b, c});
    p += used;
    if (*p == ',')
      ++p;
    else if (*p == ')')
      break;
    else
      return {};
  }
  std::vector<int> node;
  while (int(node.size()) < size)
    for (auto& [start, nodes, ppn] : blocks)
      for (int n = 0; n < nodes && int(node.size()) < size; ++n)
        for (int k = 0; k < ppn && int(node.size()) < size; ++k) node.push_back(start + n);
  return node;
}

}  // namespace weft::bootstrap
