// SPDX-License-Identifier: BSD-3-Clause
// The PMI replies Weft decodes, apart from the socket so that they can be tested and fuzzed:
// bytes that come from the launcher (or whatever holds PMI_FD).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace weft::bootstrap {

using pmi_fields = std::map<std::string, std::string>;

// A PMI-1 line of blank-separated key=value words; words without '=' are ignored.
pmi_fields parse_pmi1_line(const std::string& line);

// The length of a PMI-2 frame from its 6-character prefix (decimal digits, padded with
// blanks on either side): false when it is not one, or above max_pmi2_frame.
inline constexpr size_t max_pmi2_frame = size_t(1) << 20;
bool parse_pmi2_length(const char prefix[6], size_t* n);

// A PMI-2 body of key=value; pairs (a ';' inside a value doubled).
pmi_fields parse_pmi2_body(const std::string& body);

// The node of each of `size` ranks from a PMI_process_mapping value,
// "(vector,(first node,node count,ranks per node),...)" repeated until every rank has a
// node; empty when the value is malformed.
std::vector<int> parse_process_mapping(const std::string& mapping, int size);

}  // namespace weft::bootstrap
