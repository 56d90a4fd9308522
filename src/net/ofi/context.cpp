// SPDX-License-Identifier: BSD-3-Clause
// The ofi context: the provider Weft asks libfabric for (reliable datagrams with messages and
// RMA, in order between two endpoints), its fabric and domain, and what the provider's
// answers decide for every device (addresses, registration modes, notification by CQ data).
#include <rdma/fi_domain.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "bootstrap/bootstrap.hpp"
#include "net/ofi/ofi_backend.hpp"
#include "util/fail.hpp"
#include "util/log.hpp"
#include "util/settings.hpp"

namespace weft::net::ofi {

// WEFT_OFI_PASSTHRU: read by ofi_rxm when libfabric starts (its first call), so set
// before it; a value in the environment wins. Over tcp, rxm's own protocol on top of
// tcp's cost the tiled Cholesky 0-7% a round across hosts (docs/backends.md).
static void prefer_passthru() {
  if (util::get_flag(util::setting::ofi_passthru)) setenv("FI_OFI_RXM_ENABLE_PASSTHRU", "1", 0);
}

// What Weft asks of a provider (also what weft-info lists providers by).
fi_info* weft_hints() {
  prefer_passthru();
  fi_info* hints = fab().fi_dupinfo(nullptr);
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  // FI_RX_CQ_DATA: a write's CQ data may consume a posted receive (verbs asks for that).
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  // Messages between two endpoints arrive in the order they were sent (Weft's matching
  // does not overtake).
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  return hints;
}

ofi_context::ofi_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id)
    : boot_(std::move(boot)), context_id_(context_id) {
  fi_info* hints = weft_hints();
  const std::string prov = util::get_text(util::setting::ofi_provider);
  if (!prov.empty()) hints->fabric_attr->prov_name = strdup(prov.c_str());
  int rc = fab().fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info_);
  fab().fi_freeinfo(hints);
  if (rc != 0 || !info_)
    util::fail(call, "WEFT_OFI_PROVIDER", prov.empty() ? "<any>" : prov,
               std::string("no provider offers reliable datagrams with messages and RMA here (") +
                   fab().fi_strerror(-rc) + "); fi_info -t FI_EP_RDM lists what there is");
  if (prov.empty()) {
    // The first answer is libfabric's preference; shared memory only reaches this host.
    for (fi_info* i = info_; i; i = i->next)
      if (strcmp(i->fabric_attr->prov_name, "shm") != 0 || boot_->local_size() == boot_->size()) {
        fi_info* chosen = fab().fi_dupinfo(i);
        fab().fi_freeinfo(info_);
        info_ = chosen;
        break;
      }
  }
  // Room for messages that arrive before a receive is posted again: the sockets provider's
  // default overflowed thousands of times a run under four threads (each time it holds the
  // message back). Only there: ofi_rxm refuses an endpoint that asks for more than its own.
  if (strcmp(info_->fabric_attr->prov_name, "sockets") == 0) {
    if (info_->rx_attr->total_buffered_recv == 0) info_->rx_attr->total_buffered_recv = 64 << 20;
    warn_small_tcp_receive_buffers();
  }
  virt_addr_ = info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
  prov_key_ = info_->domain_attr->mr_mode & FI_MR_PROV_KEY;
  mr_local_ =
      (info_->domain_attr->mr_mode & FI_MR_LOCAL) || util::get_flag(util::setting::ofi_mr_local);
  cq_data_ = info_->domain_attr->cq_data_size >= sizeof(uint64_t) &&
             boot_->size() <= int(max_cq_data_ranks) && util::get_flag(util::setting::ofi_cq_data);
  peer_timeout_ns_ = int64_t(*util::get_size(util::setting::peer_timeout)) * 1000000000;
  check(fab().fi_fabric(info_->fabric_attr, &fabric_, nullptr), "fi_fabric");
  check(fi_domain(fabric_, info_, &domain_, nullptr), "fi_domain");
  WEFT_LOG(info, "ofi context %d: %s", context_id_, describe().c_str());
}

// The sockets provider waits for a whole header before it reads any of it. A connection
// whose receive buffer is held by the few bytes of a header's start (the kernel charges the
// whole packet they came in) advertises no window, the rest never comes, and both sides
// stall for good. Buffers that start at 1 MiB leave room; the provider sets none on the
// sockets it accepts (FI_SOCKETS_MAX_BUF_SZ reaches only those it connects).
void ofi_context::warn_small_tcp_receive_buffers() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_rmem");
  size_t low = 0, initial = 0, most = 0;
  if (!(f >> low >> initial >> most) || initial >= (size_t(1) << 20)) return;
  WEFT_LOG(warn,
           "ofi: the sockets provider can stall under load with TCP receive buffers that start "
           "at %zu bytes (net.ipv4.tcp_rmem); 1 MiB avoids it: sysctl -w "
           "net.ipv4.tcp_rmem=\"%zu 1048576 %zu\" (docs/backends.md)",
           initial, low, std::max<size_t>(most, size_t(1) << 20));
}

ofi_context::~ofi_context() {
  // Registrations never deregistered: the domain does not close while they are open.
  regs_.for_each([](registration& r) { fi_close(&r.mr->fid); });
  if (domain_) fi_close(&domain_->fid);
  if (fabric_) fi_close(&fabric_->fid);
  if (info_) fab().fi_freeinfo(info_);
}

std::string ofi_context::describe() const {
  return std::string("ofi: provider ") + info_->fabric_attr->prov_name + ", fabric " +
         info_->fabric_attr->name + ", domain " + info_->domain_attr->name + ", inject " +
         std::to_string(info_->tx_attr->inject_size) + " B, addresses " +
         (virt_addr_ ? "virtual" : "offsets") + (mr_local_ ? ", local buffers registered" : "") +
         ", put notifications by " + (cq_data_ ? "remote CQ data" : "message");
}

std::unique_ptr<device> ofi_context::alloc_device(int index, const device_config& cfg) {
  return std::make_unique<ofi_device>(*this, index, cfg);
}

}  // namespace weft::net::ofi
