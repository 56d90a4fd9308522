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

// A table of a library's functions: LIST is an X-macro of function names, each declared
// by the library's headers. WEFT_DYNLIB_TABLE(type, getter, LIST, soname, what) declares
// struct `type` with one pointer per function and `const type& getter()`, which opens the
// library and looks every function up on its first call (thread-safe; dlsym searches the
// library and what it loaded, so a function of a library it depends on is found too).
#define WEFT_DYNLIB_STRUCT_MEMBER(f) decltype(&::f) f;
#define WEFT_DYNLIB_LOOKUP(f) \
  t.f = reinterpret_cast<decltype(&::f)>(::weft::util::library_function(lib, soname, #f));
#define WEFT_DYNLIB_TABLE(type, getter, LIST, soname_text, what) \
  struct type {                                                  \
    LIST(WEFT_DYNLIB_STRUCT_MEMBER)                              \
  };                                                             \
  inline const type& getter() {                                  \
    static const type lib_table = [] {                           \
      const char* soname = soname_text;                          \
      void* lib = ::weft::util::open_library(soname, what);      \
      type t{};                                                  \
      LIST(WEFT_DYNLIB_LOOKUP)                                   \
      return t;                                                  \
    }();                                                         \
    return lib_table;                                            \
  }
