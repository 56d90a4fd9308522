// SPDX-License-Identifier: BSD-3-Clause
#include "info/info.hpp"

#include "weft/version.hpp"

namespace weft::info {

std::vector<finding> build() {
  std::vector<finding> out;
  out.push_back({"version", WEFT_VERSION_STRING});
#ifdef WEFT_BUILD_TYPE
  out.push_back({"build type", WEFT_BUILD_TYPE});
#endif
#if defined(__clang__)
  out.push_back({"compiler", std::string("clang ") + __clang_version__});
#else
  out.push_back({"compiler", std::string("GCC ") + __VERSION__});
#endif
#if defined(__SANITIZE_ADDRESS__)
  out.push_back({"sanitizer", "address"});
#elif defined(__SANITIZE_THREAD__)
  out.push_back({"sanitizer", "thread"});
#else
  out.push_back({"sanitizer", "none"});
#endif
#ifdef WEFT_TEST_HOOKS
  out.push_back({"test hooks", "built in (WEFT_TEST_HOOKS; not for production)"});
#else
  out.push_back({"test hooks", "none"});
#endif
  out.push_back({"bootstrap weftrun", "built in"});
  out.push_back({"bootstrap pmi (PMI-1, PMI-2 wire)", "built in"});
#ifdef WEFT_HAVE_PMIX
  out.push_back({"bootstrap pmix", "built in"});
#else
  out.push_back({"bootstrap pmix", "not built: needs PMIx (install libpmix-dev and rebuild)"});
#endif
  return out;
}

std::vector<net::backend_report> backends() {
  return net::describe_backends();
}

}  // namespace weft::info
