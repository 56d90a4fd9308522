// SPDX-License-Identifier: BSD-3-Clause
// A device's life: construction (the backend device, the request slab, the backlog),
// destruction (the buffers of messages nobody received), what it still has pending, and
// its counters (read through the API, printed at finalize with WEFT_STATS=1).
#include "core/device.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/runtime.hpp"
#include "pool/packet_pool.hpp"

namespace weft::impl {

device_impl::device_impl(runtime_impl& r, int idx, packet_pool_impl* p, size_t inbox_depth,
                         bool peers_progress, bool shared)
    : rt(r),
      index(idx),
      inbox_depth(inbox_depth),
      peers_progress(peers_progress),
      shared(shared),
      pool(p),
      slab(uint32_t(r.attr.max_requests)),
      backlog_limit(r.attr.backlog_size),
      // Past backlog_limit only operations already in flight add to the backlog (each a
      // control message or data to send, then its completion signal) and Weft's own posts
      // of a few list pieces: room for all of them, allocated only as it fills.
      backlog(r.attr.backlog_size + 2 * r.attr.max_requests + 1024),
      data_backlog(r.attr.max_requests + 1),
      eager_limit(r.attr.eager_size),
      inject_limit(r.attr.inject_size),
      dead_(new std::atomic<bool>[size_t(r.size())]),
      gone_claimed_(new std::atomic<bool>[size_t(r.size())]) {
  for (int i = 0; i < r.size(); ++i) {
    dead_[size_t(i)].store(false);
    gone_claimed_[size_t(i)].store(false);
  }
  net::device_config cfg{r.attr.packet_size, inbox_depth, peers_progress, shared};
  net = r.net->alloc_device(idx, cfg);
}

device_impl::~device_impl() {
  // Unexpected messages nobody received, and active messages whose data never came: release
  // their buffers.
  for (uint32_t i = 0; i < slab.capacity() && slab.in_use(); ++i) {
    request& q = slab.at(i);
    if (q.kind() == req_kind::unexpected_eager) {
      if (q.pool)
        q.pool->put(q.buf);
      else
        std::free(q.buf);
    } else if (q.kind() == req_kind::rdv_recv && q.is_am) {
      q.am_target->deallocate(q.buf);
    }
  }
}

size_t device_impl::pending_operations() {
  size_t n = backlog_size();
  if (!slab.in_use()) return n;
  for (uint32_t i = 0; i < slab.capacity(); ++i) {
    req_kind k = slab.at(i).kind();
    if (k == req_kind::posted_recv || k == req_kind::rdv_send || k == req_kind::rdv_recv ||
        k == req_kind::rma)
      ++n;
  }
  return n;
}

namespace {
constexpr const char* counter_names[] = {
#define WEFT_COUNTER(name, NAME, doc) #name,
#include "weft/counters.def"
};
static_assert(sizeof(counter_names) / sizeof(counter_names[0]) == size_t(counter_t::count));
}  // namespace

const char* counter_name(counter_t c) {
  return int(c) >= 0 && c < counter_t::count ? counter_names[size_t(c)] : "";
}

uint64_t device_impl::read_counter(counter_t c) const {
  return counters.read(c) + net->count(c);
}

// One line per device, its non-zero counters: what WEFT_STATS=1 prints at finalize.
void device_impl::print_counters(FILE* out) const {
  std::string line;
  for (size_t i = 0; i < device_counters::ncounters; ++i) {
    const uint64_t v = read_counter(counter_t(i));
    if (v) line += std::string(" ") + counter_name(counter_t(i)) + "=" + std::to_string(v);
  }
  fprintf(out, "weft[%d] stats: device %d:%s\n", rt.rank(), index,
          line.empty() ? " nothing counted" : line.c_str());
}

}  // namespace weft::impl
