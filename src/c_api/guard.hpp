// SPDX-License-Identifier: BSD-3-Clause
// What every C entry point shares (weft/weft.h, weft/engine.h): the calling thread's last
// refusal message, and `guard`, which runs a C++ call and turns an exception into a
// return code with its message kept for weft_last_error().
#pragma once

#include <exception>
#include <new>
#include <string>

#include "weft/types.hpp"
#include "weft/weft.h"

namespace weft::capi {

// This thread's message for weft_last_error().
std::string& last_error();

template <typename Fn>
int guard(Fn&& fn) {
  try {
    fn();
    return WEFT_OK;
  } catch (const fatal_error& e) {
    last_error() = e.what();
    return WEFT_ERR_USAGE;
  } catch (const std::bad_alloc&) {
    last_error() = "weft: out of memory";
    return WEFT_ERR_NOMEM;
  } catch (const std::exception& e) {
    last_error() = e.what();
    return WEFT_ERR_INTERNAL;
  }
}

}  // namespace weft::capi
