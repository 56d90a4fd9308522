// SPDX-License-Identifier: BSD-3-Clause
// Symbol visibility: the shared library exports only what is marked WEFT_API.
#pragma once

#if defined(WEFT_STATIC_DEFINE)
#define WEFT_API
#else
#define WEFT_API __attribute__((visibility("default")))
#endif
