// SPDX-License-Identifier: BSD-3-Clause
// What fuzz_wire and fuzz_shm share: the rendezvous messages their inputs announce wait for
// data no peer will send. Header-only, included by each harness.
#pragma once

#include <cstdint>
#include <set>

#include "core/device.hpp"
#include "core/wire.hpp"

namespace fuzz {

// The buffers of active messages on `dev` whose rendezvous data is awaited: a later input
// may complete one (its status then carries the buffer, the receiver's to free).
inline std::set<void*> awaited(weft::impl::device_impl* dev) {
  std::set<void*> out;
  for (uint32_t i = 0; i < dev->slab.capacity(); ++i) {
    weft::impl::request& r = dev->slab.at(i);
    if (r.kind() == weft::impl::req_kind::rdv_recv && r.is_am) out.insert(r.buf);
  }
  return out;
}

// Before the runtime is made anew: completes every awaited rendezvous on `dev` as if its
// data had come, so that their queues and the runtime can be freed.
inline void complete_awaited(weft::impl::device_impl* dev) {
  for (uint32_t i = 0; i < dev->slab.capacity(); ++i) {
    weft::impl::request& r = dev->slab.at(i);
    if (r.kind() != weft::impl::req_kind::rdv_recv) continue;
    weft::impl::rendezvous_note n{
        uint8_t(weft::impl::note_type::rendezvous), {}, dev->slab.handle(&r)};
    (void)dev->on_remote_notify(r.rank, &n, sizeof(n));
  }
}

}  // namespace fuzz
