// SPDX-License-Identifier: BSD-3-Clause
// libfabric, opened when the first ofi context starts (util/dynlib.hpp says why). Only
// these functions are real symbols; every other fi_* call is inline through the objects'
// operation tables, so it needs no lookup.
#pragma once

#include <rdma/fabric.h>

#include "util/dynlib.hpp"

#define WEFT_FABRIC_FUNCTIONS(X) \
  X(fi_getinfo)                  \
  X(fi_freeinfo)                 \
  X(fi_dupinfo)                  \
  X(fi_fabric)                   \
  X(fi_strerror)                 \
  X(fi_version)

namespace weft::net::ofi {

// fab(): the functions, looked up on the first call; a fatal_error when libfabric cannot
// be loaded.
WEFT_DYNLIB_TABLE(fabric_lib, fab, WEFT_FABRIC_FUNCTIONS, WEFT_OFI_SONAME, "the ofi backend")

}  // namespace weft::net::ofi
