// SPDX-License-Identifier: BSD-3-Clause
// Libraries opened on first use (dlopen), so that a job pays only for the backends it
// runs: linked outright, libfabric alone cost every Weft program 0.19 s at start-up (the
// PSM library it pulls in sleeps in its constructor), shared-memory jobs included. A
// backend lists the functions it calls; the first context of that backend opens the
// library and looks each one up, and a library or function that is missing is a
// fatal_error naming the library, the function and what it is for.
#pragma once

namespace weft::util {

// dlopen(soname) with RTLD_NOW | RTLD_GLOBAL, once per name; `what` says what needs it
// (for the error: "the ofi backend").
void* open_library(const char* soname, const char* what);
// The address of `name` in `lib`; a fatal_error when it has none.
void* library_function(void* lib, const char* soname, const char* name);

}  // namespace weft::util

// Declares a struct `type` with one pointer per function in LIST (an X-macro of function
// names, each declared by the library's headers) and `const type& getter()` filling it on
// first use from `soname`.
#define WEFT_DYNLIB_STRUCT_MEMBER(f) decltype(&::f) f;
#define WEFT_DYNLIB_LOOKUP(f) \
  t.f = reinterpret_cast<decltype(&::f)>(::weft::util::library_function(lib, soname, #f));
