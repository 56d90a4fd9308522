// Which backend a runtime uses: WEFT_BACKEND, or by default shared memory when every rank
// is on this host and the network (libfabric) otherwise.
#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "net/backend.hpp"
#include "util/env.hpp"
#include "util/fail.hpp"

namespace weft::net {

std::unique_ptr<context> make_shm_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
#ifdef WEFT_HAVE_OFI
std::unique_ptr<context> make_ofi_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id);
#endif

std::unique_ptr<context> make_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id) {
  std::string which = util::env_string("WEFT_BACKEND", "auto");
  if (which == "auto") which = boot->local_size() == boot->size() ? "shm" : "ofi";
  if (which == "shm") return make_shm_context(std::move(boot), context_id);
  if (which == "ofi") {
#ifdef WEFT_HAVE_OFI
    return make_ofi_context(std::move(boot), context_id);
#else
    util::fail("g_runtime_init", "WEFT_BACKEND", "ofi",
               "this Weft was built without libfabric (install libfabric-dev and rebuild)");
#endif
  }
  util::fail("g_runtime_init", "WEFT_BACKEND", which, "unknown backend (known: auto, shm, ofi)");
}

}  // namespace weft::net
