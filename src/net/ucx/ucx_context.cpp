// The UCX context: the UCP context and the registrations, with the bookkeeping that lets
// deregistration revoke every remote key a peer fetched.
#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "net/ucx/ucx_backend.hpp"
#include "util/env.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"

namespace weft::net::ucx {
namespace {
constexpr const char* call = "ucx backend";
void check(ucs_status_t st, const char* what) {
  if (st != UCS_OK) util::fail(call, what, std::to_string(int(st)), ucs_status_string(st));
}
}  // namespace

ucx_context::ucx_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id)
    : boot_(std::move(boot)), context_id_(context_id) {
  peer_failure_ = util::env_bool("WEFT_UCX_PEER_FAILURE", true);
  stream_chunk_ = util::env_size("WEFT_UCX_CHUNK", 256 << 10);
  if (stream_chunk_ < 4096)
    util::fail(call, "WEFT_UCX_CHUNK", std::to_string(stream_chunk_), "at least 4096 bytes");
  ucp_config_t* config = nullptr;
  check(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                 UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  p.features = UCP_FEATURE_AM | UCP_FEATURE_RMA;
  p.mt_workers_shared = 1;  // devices are driven by different threads
  p.estimated_num_eps = size_t(boot_->size());
  ucs_status_t st = ucp_init(&p, config, &ucp_);
  ucp_config_release(config);
  if (st != UCS_OK)
    util::fail(call, "UCX_TLS", util::env_string("UCX_TLS", "<unset>"),
               std::string("ucp_init failed: ") + ucs_status_string(st) +
                   " (ucx_info -d lists the transports there are)");
  WEFT_LOG(info, "ucx context %d: %s", context_id_, describe().c_str());
}

ucx_context::~ucx_context() {
  for (auto& [key, r] : regs_)
    if (r->memh) ucp_mem_unmap(ucp_, r->memh);
  if (ucp_) ucp_cleanup(ucp_);
}

std::string ucx_context::describe() const {
  return std::string("ucx: UCX ") + ucp_get_version_string() + ", transports " +
         util::env_string("UCX_TLS", "all (UCX_TLS unset)") + ", peer failure detection " +
         (peer_failure_ ? "on" : "off");
}

std::unique_ptr<device> ucx_context::alloc_device(int index, const device_config& cfg) {
  return std::make_unique<ucx_device>(*this, index, cfg);
}

void ucx_context::attach(int index, ucx_device* d) {
  std::lock_guard<std::mutex> g(lock_);
  if (devices_.size() <= size_t(index)) devices_.resize(size_t(index) + 1, nullptr);
  devices_[size_t(index)] = d;
}

void ucx_context::detach(int index) {
  std::lock_guard<std::mutex> g(lock_);
  devices_[size_t(index)] = nullptr;
}

mr_t ucx_context::register_memory(void* base, size_t size) {
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
  mr_t m{base, size, 0, 0, r.get()};
  std::lock_guard<std::mutex> g(lock_);
  m.key = next_key_++;  // never reused: a stale handle finds nothing
  regs_.emplace(m.key, std::move(r));
  return m;
}

bool ucx_context::lookup_for_peer(uint64_t key, int rank, int dev, uint64_t incarnation,
                                  std::string& packed, uint64_t& base, uint64_t& size) {
  std::lock_guard<std::mutex> g(lock_);
  auto it = regs_.find(key);
  if (it == regs_.end() || it->second->revoked) return false;
  registration& r = *it->second;
  const registration::fetcher who{rank, dev, incarnation};
  if (std::find(r.fetchers.begin(), r.fetchers.end(), who) == r.fetchers.end())
    r.fetchers.push_back(who);
  packed = r.packed;
  base = reinterpret_cast<uint64_t>(r.base);
  size = r.size;
  return true;
}

void ucx_context::deregister_memory(mr_t& mr) {
  std::vector<registration::fetcher> fetchers;
  std::vector<ucx_device*> devs;
  {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(mr.key);
    if (it == regs_.end()) return;
    it->second->revoked = true;
    fetchers = it->second->fetchers;
    devs = devices_;
  }
  for (const auto& f : fetchers)
    if (size_t(f.dev) < devs.size() && devs[size_t(f.dev)])
      devs[size_t(f.dev)]->queue_revoke(f.rank, mr.key);
}

void ucx_context::revoke_acknowledged(uint64_t key, int rank, int dev, uint64_t incarnation) {
  std::lock_guard<std::mutex> g(lock_);
  auto it = regs_.find(key);
  if (it != regs_.end())
    std::erase(it->second->fetchers, registration::fetcher{rank, dev, incarnation});
}

bool ucx_context::region_idle(const mr_t& mr) {
  std::lock_guard<std::mutex> g(lock_);
  auto it = regs_.find(mr.key);
  if (it == regs_.end()) return true;
  // A fetcher that died or whose device is gone will never acknowledge, nor access again.
  std::erase_if(it->second->fetchers, [&](const registration::fetcher& f) {
    ucx_device* d = size_t(f.dev) < devices_.size() ? devices_[size_t(f.dev)] : nullptr;
    return !d || !d->peer_alive(f.rank);
  });
  return it->second->fetchers.empty();
}

void ucx_context::release_region(mr_t& mr) {
  std::unique_ptr<registration> r;
  {
    std::lock_guard<std::mutex> g(lock_);
    auto it = regs_.find(mr.key);
    if (it == regs_.end()) return;
    r = std::move(it->second);
    regs_.erase(it);
  }
  ucp_mem_unmap(ucp_, r->memh);
  mr = mr_t{};
}

}  // namespace weft::net::ucx

namespace weft::net {
std::unique_ptr<context> make_ucx_context(std::shared_ptr<bootstrap::bootstrap> boot,
                                          int context_id) {
  return std::make_unique<ucx::ucx_context>(std::move(boot), context_id);
}
}  // namespace weft::net
