// Which backend a runtime uses: WEFT_BACKEND, or by default shared memory when every rank
// is on this host and mixed (shared memory within a host, WEFT_NET_BACKEND across) otherwise.
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "net/backend.hpp"
#include "util/env.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::net {

std::unique_ptr<context> make_shm_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
#ifdef WEFT_HAVE_OFI
std::unique_ptr<context> make_ofi_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
#endif
std::unique_ptr<context> make_mixed_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                            int context_id);
#ifdef WEFT_HAVE_UCX
std::unique_ptr<context> make_ucx_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
#endif

namespace {
// libfabric pulls in the PSM libraries (libinfinipath), and UCX its libucs, whose constructors
// install handlers that turn a crash into a printed backtrace and exit status 1. A crashing Weft
// program must die of its signal, as it would without them (launchers and tests report the
// signal), so those handlers go; handlers the program installed itself are left alone.
void restore_crash_signals() {
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    struct sigaction sa;
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    void* fn = (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                          : reinterpret_cast<void*>(sa.sa_handler);
    if (fn == reinterpret_cast<void*>(SIG_DFL) || fn == reinterpret_cast<void*>(SIG_IGN)) continue;
    Dl_info where;
    if (!dladdr(fn, &where) || !where.dli_fname ||
        (!strstr(where.dli_fname, "libpsm") && !strstr(where.dli_fname, "libinfinipath") &&
         !strstr(where.dli_fname, "libucs")))
      continue;
    signal(sig, SIG_DFL);
    WEFT_LOG(info, "signal %d: handler of %s removed", sig, where.dli_fname);
  }
}
}  // namespace

namespace {
// Builds backend `which` (shm, ofi, ucx or mixed); `variable` is what named it, for errors.
std::unique_ptr<context> make_named(const std::string& which, const char* variable,
                                    std::shared_ptr<bootstrap::bootstrap> boot, int context_id) {
  if (which == "shm") return make_shm_context(std::move(boot), context_id);
  if (which == "mixed") return make_mixed_context(std::move(boot), context_id);
  if (which == "ofi") {
#ifdef WEFT_HAVE_OFI
    return make_ofi_context(std::move(boot), context_id);
#else
    util::fail("g_runtime_init", variable, "ofi",
               "this Weft was built without libfabric (install libfabric-dev and rebuild)");
#endif
  }
  if (which == "ucx") {
#ifdef WEFT_HAVE_UCX
    return make_ucx_context(std::move(boot), context_id);
#else
    util::fail("g_runtime_init", variable, "ucx",
               "this Weft was built without UCX (install libucx-dev and rebuild)");
#endif
  }
  util::fail("g_runtime_init", variable, which,
             "unknown backend (known: auto, shm, ofi, ucx, mixed)");
}
}  // namespace

std::string network_backend_name() {
#if defined(WEFT_HAVE_OFI) || !defined(WEFT_HAVE_UCX)
  return util::env_string("WEFT_NET_BACKEND", "ofi");
#else
  return util::env_string("WEFT_NET_BACKEND", "ucx");
#endif
}

std::unique_ptr<context> make_network_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                              int context_id) {
  const std::string which = network_backend_name();
  if (which != "ofi" && which != "ucx")
    util::fail("g_runtime_init", "WEFT_NET_BACKEND", which,
               "is not a network backend (known: ofi, ucx)");
  return make_named(which, "WEFT_NET_BACKEND", std::move(boot), context_id);
}

std::unique_ptr<context> make_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id) {
  restore_crash_signals();
  std::string which = util::env_string("WEFT_BACKEND", "auto");
  // One host: shared memory; several: shared memory within each, the network across.
  if (which == "auto") which = boot->local_size() == boot->size() ? "shm" : "mixed";
  auto ctx = make_named(which, "WEFT_BACKEND", std::move(boot), context_id);
  restore_crash_signals();  // UCX installs its handlers again when it starts
  return ctx;
}

}  // namespace weft::net
