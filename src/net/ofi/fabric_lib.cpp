// SPDX-License-Identifier: BSD-3-Clause
#include "net/ofi/fabric_lib.hpp"

namespace weft::net::ofi {

const fabric_lib& fab() {
  static const fabric_lib lib_table = [] {
    const char* soname = WEFT_OFI_SONAME;
    void* lib = util::open_library(soname, "the ofi backend");
    fabric_lib t{};
    WEFT_FABRIC_FUNCTIONS(WEFT_DYNLIB_LOOKUP)
    return t;
  }();
  return lib_table;
}

}  // namespace weft::net::ofi
