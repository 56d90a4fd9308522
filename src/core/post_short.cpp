// SPDX-License-Identifier: BSD-3-Clause
// The short post: a send or active message that names nothing but its positional arguments,
// a device and a tag (post_send_x / post_am_x with no other setter, post_send, post_am)
// arrives here with its arguments in registers instead of in a comm_args the caller built
// on its stack. Those 216 bytes were some twenty stores per message, and they queued in
// the store buffer behind the ring cell's write: an 8-byte message rate went 20% higher
// when the benchmark built its functor once instead of per message. What fits one eager
// message of a valid call leaves from here; everything else (a large size, an argument to
// refuse, a stale handle, no default device) goes to
// post_comm_impl with the comm_args the functor would have built, so every status and
// every error is the general path's own.
#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"
#include "match/matching_engine.hpp"

namespace weft {
namespace impl {

inline device_impl::short_post device_impl::post_short(int rank, rcomp_t rc, const void* buf,
                                                       size_t size, const comp_impl* comp,
                                                       tag_t tag) {
  if (unsigned(rank) >= unsigned(rt.size()) || size > eager_limit || (!buf && size) ||
      (comp && comp->kind >= comp_kind::graph) || peer_dead(rank) ||
      (rc != rcomp_null ? rc >= rt.rcomp_count() : !rt.default_engine)) [[unlikely]]
    return short_post::general;
  const wire_header h = rc != rcomp_null
                            ? eager_header(msg_type::eager_am, rc, tag)
                            : eager_header(msg_type::eager_send, rt.default_engine->id(), tag,
                                           uint8_t(matching_policy_t::rank_tag));
  if (send_eager(rank, h, buf, size)) [[likely]]
    return short_post::sent;
  // As post_out's retry_or_backlog with allow_retry: without building the arguments and
  // trying the backend a second time on every turn of a caller's retry loop.
  note_retry();
  return short_post::full;
}

}  // namespace impl

namespace detail {
namespace {

// The general path, with the very arguments the functor would have built.
[[gnu::noinline]] status_t post_long(device_t device, int rank, rcomp_t rc, void* buf, size_t size,
                                     comp_t local_comp, tag_t tag) {
  if (rc == rcomp_null)
    return post_comm_impl(post_send_x(rank, buf, size, tag, local_comp).device(device).get_args());
  return post_comm_impl(
      post_am_x(rank, buf, size, local_comp, rc).device(device).tag(tag).get_args());
}

}  // namespace

status_t post_short_impl(device_t device, uint64_t rank_rcomp, void* buf, size_t size,
                         comp_t local_comp, tag_t tag) {
  using namespace impl;
  const int rank = int(uint32_t(rank_rcomp));
  const auto rc = rcomp_t(rank_rcomp >> 32);
  const auto d = reinterpret_cast<uintptr_t>(device.p);
  device_impl* dev = nullptr;
  if (d) {
    // Checked under the generation its handle carries (a device in reused memory).
    if (util::live_any(d)) dev = util::untagged(device.p);
  } else if (runtime_impl* r = g_runtime.load(std::memory_order_acquire)) {
    dev = r->default_device;
  }
  // Written before the send (into the caller's status: one object returned on every
  // path), so that nothing but the device stays live across the backend's call.
  status_t s;
  s.error = errorcode_t::done;
  s.rank = rank;
  s.tag = tag;
  s.buf = buf;
  s.size = size;
  if (dev && util::live_any(reinterpret_cast<uintptr_t>(local_comp.p))) [[likely]] {
    const auto r = dev->post_short(rank, rc, buf, size, util::untagged(local_comp.p), tag);
    if (r == device_impl::short_post::sent) [[likely]]
      return s;
    if (r == device_impl::short_post::full) {
      s.error = errorcode_t::retry_nomem;
      return s;
    }
  }
  s = post_long(device, rank, rc, buf, size, local_comp, tag);
  return s;
}

}  // namespace detail
}  // namespace weft
