// SPDX-License-Identifier: BSD-3-Clause
// libpmix, opened when the PMIx bootstrap starts (util/dynlib.hpp says why): a job under
// weftrun or PMI never loads it. Included by pmix.cpp alone, after <pmix.h>: each PMIx
// function the bootstrap or the header's macros call becomes a call through the table.
#pragma once

#include <pmix.h>

#include "util/dynlib.hpp"

#define WEFT_PMIX_FUNCTIONS(X) \
  X(PMIx_Init)                 \
  X(PMIx_Finalize)             \
  X(PMIx_Put)                  \
  X(PMIx_Commit)               \
  X(PMIx_Fence)                \
  X(PMIx_Get)                  \
  X(PMIx_Error_string)         \
  X(PMIx_Info_load)            \
  X(PMIx_Value_destruct)

namespace weft::bootstrap {

WEFT_DYNLIB_TABLE(pmix_lib, pmix, WEFT_PMIX_FUNCTIONS, WEFT_PMIX_SONAME, "the PMIx bootstrap")

}  // namespace weft::bootstrap

// Calls, including those inside <pmix.h>'s macros, go through the table (a macro does not
// expand inside its own expansion, so the member names stay as they are).
#define PMIx_Init (::weft::bootstrap::pmix().PMIx_Init)
#define PMIx_Finalize (::weft::bootstrap::pmix().PMIx_Finalize)
#define PMIx_Put (::weft::bootstrap::pmix().PMIx_Put)
#define PMIx_Commit (::weft::bootstrap::pmix().PMIx_Commit)
#define PMIx_Fence (::weft::bootstrap::pmix().PMIx_Fence)
#define PMIx_Get (::weft::bootstrap::pmix().PMIx_Get)
#define PMIx_Error_string (::weft::bootstrap::pmix().PMIx_Error_string)
#define PMIx_Info_load (::weft::bootstrap::pmix().PMIx_Info_load)
#define PMIx_Value_destruct (::weft::bootstrap::pmix().PMIx_Value_destruct)
