// SPDX-License-Identifier: BSD-3-Clause
// Which backend a runtime uses: WEFT_BACKEND, or by default shared memory when every rank
// is on this host and mixed (shared memory within a host, WEFT_NET_BACKEND across) otherwise.
#include <dlfcn.h>
#include <signal.h>

#include <cstring>
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "net/backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

namespace weft::net {

using factory = std::unique_ptr<context> (*)(std::shared_ptr<bootstrap::bootstrap>, int);
std::unique_ptr<context> make_shm_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
std::unique_ptr<context> make_mixed_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                            int context_id);
std::unique_ptr<context> make_ofi_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
std::unique_ptr<context> make_ucx_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
void probe_shm(std::vector<finding>& out);
void probe_ofi(std::vector<finding>& out);
void probe_ucx(std::vector<finding>& out);

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
// Every backend, whether this build has it, and what it takes when it has not.
struct known_backend {
  const char* name;
  factory make;  // nullptr: not built
  const char* needs;
  void (*probe)(std::vector<finding>&);  // what it finds on this machine, for weft-info
};
constexpr known_backend backends[] = {
    {"shm", make_shm_context, nullptr, probe_shm},
    {"mixed", make_mixed_context, nullptr, nullptr},
#ifdef WEFT_HAVE_OFI
    {"ofi", make_ofi_context, nullptr, probe_ofi},
#else
    {"ofi", nullptr, "libfabric (install libfabric-dev and rebuild)", nullptr},
#endif
#ifdef WEFT_HAVE_UCX
    {"ucx", make_ucx_context, nullptr, probe_ucx},
#else
    {"ucx", nullptr, "UCX (install libucx-dev and rebuild)", nullptr},
#endif
};

// Builds backend `which`; `variable` is what named it, for errors.
std::unique_ptr<context> make_named(const std::string& which, const char* variable,
                                    std::shared_ptr<bootstrap::bootstrap> boot, int context_id) {
  for (const known_backend& b : backends) {
    if (which != b.name) continue;
    if (!b.make)
      util::fail("g_runtime_init", variable, which,
                 std::string("this Weft was built without ") + b.needs);
    return b.make(std::move(boot), context_id);
  }
  util::fail("g_runtime_init", variable, which,
             "unknown backend (known: auto, shm, ofi, ucx, mixed)");
}
}  // namespace

std::vector<backend_report> describe_backends() {
  std::vector<backend_report> out;
  for (const known_backend& b : backends) {
    backend_report r{b.name, b.make != nullptr, b.needs ? b.needs : "", {}};
    try {
      if (b.probe) b.probe(r.found);
    } catch (const std::exception& e) {  // its library cannot be loaded here
      r.found.push_back({"unavailable", e.what()});
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string network_backend_name() {
  if (util::is_set(util::setting::net_backend)) return util::get_text(util::setting::net_backend);
#if defined(WEFT_HAVE_OFI) || !defined(WEFT_HAVE_UCX)
  return "ofi";
#else
  return "ucx";
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
  std::string which = util::get_text(util::setting::backend);
  // One host: shared memory; several: shared memory within each, the network across.
  if (which == "auto") which = boot->local_size() == boot->size() ? "shm" : "mixed";
  // After the backend, failed or not: a network library is opened when its backend
  // starts, and its constructors install the handlers.
  std::unique_ptr<context> ctx;
  try {
    ctx = make_named(which, "WEFT_BACKEND", std::move(boot), context_id);
  } catch (...) {
    restore_crash_signals();
    throw;
  }
  restore_crash_signals();
  return ctx;
}

}  // namespace weft::net
