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

template <typename T>
T* need(T* out, const char* call, const char* argument) {
  if (!out) throw fatal_error(call, argument, "NULL", "this call needs somewhere to write");
  return out;
}

// Completion handles: the C pointer is the C++ handle's implementation pointer.
inline comp_t cmp(weft_comp_t c) {
  return comp_t{reinterpret_cast<impl::comp_impl*>(c)};
}
inline weft_comp_t c_comp(comp_t c) {
  return reinterpret_cast<weft_comp_t>(c.p);
}
inline weft_status_t to_c(const status_t& s) {
  return weft_status_t{int(s.error.errorcode), s.rank, s.tag, s.buf, s.size, s.user_context};
}

}  // namespace weft::capi
