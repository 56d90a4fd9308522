// SPDX-License-Identifier: BSD-3-Clause
// The UCX context: the UCP context and the registrations, with the bookkeeping that lets
// deregistration revoke every remote key a peer fetched.
#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "net/ucx/ucx_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

// Last, in a block of its own: its macros route UCX calls through the table.
#include "net/ucx/ucx_lib.hpp"

namespace weft::net::ucx {
namespace {
constexpr const char* call = "ucx backend";
void check(ucs_status_t st, const char* what) {
  if (st != UCS_OK) util::fail(call, what, std::to_string(int(st)), ucs_status_string(st));
}
}  // namespace

ucx_context::ucx_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id)
    : boot_(std::move(boot)), context_id_(context_id) {
  peer_failure_ = util::get_flag(util::setting::ucx_peer_failure);
  stream_chunk_ = *util::get_size(util::setting::ucx_chunk);
  peer_timeout_s_ = int64_t(*util::get_size(util::setting::peer_timeout));
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                 UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  // WAKEUP: a worker's event fd, for blocking progress (wait_for_message).
  p.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  p.mt_workers_shared = 1;  // devices are driven by different threads
  p.estimated_num_eps = size_t(boot_->size());
  // ucp_init is inline over ucp_init_version: called directly, through the table.
  ucs_status_t st = ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, config, &ucp_);
  ucp_config_release(config);
  if (st != UCS_OK)
    util::fail(call, "UCX_TLS", util::env_or("UCX_TLS", "<unset>"),
               std::string("ucp_init failed: ") + ucs_status_string(st) +
                   " (ucx_info -d lists the transports there are)");
  WEFT_LOG(info, "ucx context %d: %s", context_id_, describe().c_str());
}

ucx_context::~ucx_context() {
  regs_.for_each([&](registration& r) {
    if (r.memh) ucp_mem_unmap(ucp_, r.memh);
  });
  if (ucp_) ucp_cleanup(ucp_);
}

std::string ucx_context::describe() const {
  return std::string("ucx: UCX ") + ucp_get_version_string() + ", transports " +
         util::env_or("UCX_TLS", "all (UCX_TLS unset)") + ", peer failure detection " +
         (peer_failure_ ? "on" : "off");
}

std::unique_ptr<device> ucx_context::alloc_device(int index, const device_config& cfg) {
  return std::make_unique<ucx_device>(*this, index, cfg);
}

local_region ucx_context::register_memory(void* base, size_t size) {
  auto r = std::make_unique<registration>();
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base;
  mp.length = size;
  check(ucp_mem_map(ucp_, &mp, &r->memh), "ucp_mem_map");
  void* packed = nullptr;
  size_t len = 0;
  check(ucp_rkey_pack(ucp_, r->memh, &packed, &len), "ucp_rkey_pack");
  r->packed.assign(static_cast<const char*>(packed), len);
  ucp_rkey_buffer_release(packed);
  r->base = base;
  r->size = size;
  local_region m{base, size, 0, 0, r.get()};
  m.key = keys_.next();  // never reused (a stale handle finds nothing), never guessed
  regs_.add(m.key, std::move(r));
  return m;
}

bool ucx_context::lookup_for_peer(uint64_t key, const key_asker& who, std::string& packed,
                                  uint64_t& base, uint64_t& size) {
  return regs_.ask(key, who, [&](const registration& r) {
    packed = r.packed;
    base = reinterpret_cast<uint64_t>(r.base);
    size = r.size;
    return true;
  });
}

void ucx_context::deregister_memory(local_region& mr) {
  regs_.revoke(mr.key);
}

bool ucx_context::region_idle(const local_region& mr) {
  return regs_.idle(mr.key);
}

void ucx_context::release_region(local_region& mr) {
  if (std::unique_ptr<registration> r = regs_.release(mr.key)) ucp_mem_unmap(ucp_, r->memh);
  mr = local_region{};
}

}  // namespace weft::net::ucx

namespace weft::net {
std::unique_ptr<context> make_ucx_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id) {
  return std::make_unique<ucx::ucx_context>(std::move(boot), context_id);
}
}  // namespace weft::net
