// SPDX-License-Identifier: BSD-3-Clause
#include "util/dynlib.hpp"

#include <dlfcn.h>

#include <string>

#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::util {

void* open_library(const char* soname, const char* what) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char* why = dlerror();
    fail("dlopen", "library", soname,
         std::string(what) + " needs it: " + (why ? why : "not found") +
             " (install it, or choose another backend with WEFT_BACKEND)");
  }
  WEFT_LOG(info, "loaded %s for %s", soname, what);
  return h;
}

void* library_function(void* lib, const char* soname, const char* name) {
  dlerror();
  void* f = dlsym(lib, name);
  if (!f) fail("dlsym", name, soname, "the library has no such function (too old?)");
  return f;
}

}  // namespace weft::util
