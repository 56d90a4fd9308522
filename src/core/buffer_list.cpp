// SPDX-License-Identifier: BSD-3-Clause
// Buffer lists (LCI paper 3.3.1): one posting that sends, receives, puts or gets a list of
// buffers, with one completion signal.
// - Send and active message: the list is gathered into one message (into a packet when it
//   fits the eager limit, no allocation beyond the operation's record; into one staging
//   buffer above it), so the target receives one message.
// - Receive: the message lands in a staging buffer and is scattered into the list.
// - Put and get: the local and the remote lists (or one region) are cut into pieces where
//   either list changes buffer, each piece one put or get with no copy. With a remote
//   completion the last piece is held back until every other piece finished and carries
//   the notification, which reports the whole range.
// Each list operation allocates one record; it replaces up to 64 (or 127) posts.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"
#include "pool/packet_pool.hpp"
#include "util/fail.hpp"

namespace weft::impl {
namespace {

// The record of one list operation: the completion object of its inner operations.
class list_op final : public comp_impl {
 public:
  list_op(device_impl& d, const comm_args& a, size_t total)
      : comp_impl(comp_kind::internal), dev_(d), user_(comp_of(a)) {
    result_.error = errorcode_t::done;
    result_.rank = a.rank;
    result_.tag = a.tag;
    result_.size = total;
    result_.user_context = a.user_context;
  }
  ~list_op() override { std::free(staging); }

  bool signal(const status_t& s) override {
    note(s);
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) advance();
    return true;
  }

  // Records an inner operation's outcome; a receive's size is the message's.
  void note(const status_t& s) {
    if (scatter_into) result_.size = s.size;
    if (s.error.is_error() || s.error.is_cancelled()) {
      int expected = int(errorcode_t::done);
      first_error_.compare_exchange_strong(expected, int(s.error.errorcode));
    }
  }

  // Every posted piece finished: post the held-back notifying piece, or finish.
  void advance() {
    if (held && !failed()) {
      held = false;
      remaining.store(1, std::memory_order_relaxed);
      status_t s = post_piece(dev_, last);
      if (!s.error.is_posted()) signal(s);
      return;
    }
    status_t r = finish();
    comp_impl* user = user_;
    device_impl& d = dev_;
    delete this;
    d.complete(user, r, true);
  }

  // The user's status; scatters a received message.
  status_t finish() {
    if (scatter_into) {  // a truncated message scatters what arrived
      const char* from = static_cast<const char*>(staging);
      size_t left = result_.size;
      for (size_t i = 0; i < scatter_into && left; ++i) {
        size_t n = std::min(left, scatter[i].size);
        if (n) memcpy(scatter[i].base, from, n);
        from += n;
        left -= n;
      }
    }
    status_t r = result_;
    if (failed()) r.error = errorcode_t(first_error_.load(std::memory_order_acquire));
    return r;
  }

  bool failed() const {
    return first_error_.load(std::memory_order_acquire) != int(errorcode_t::done);
  }

  // A piece that cannot even be posted (its region vanished since the checks) fails.
  static status_t post_piece(device_impl& d, const comm_args& piece) {
    try {
      return d.post(piece);
    } catch (const fatal_error&) {
      status_t s;
      s.error = errorcode_t::error_region;
      s.rank = piece.rank;
      return s;
    }
  }

  std::atomic<size_t> remaining{0};
  void* staging = nullptr;  // std::malloc'd
  buffer_t scatter[max_buffers];
  size_t scatter_into = 0;  // receive: the list to scatter into
  bool held = false;
  comm_args last;

 private:
  device_impl& dev_;
  comp_impl* user_;
  status_t result_;
  std::atomic<int> first_error_{int(errorcode_t::done)};
};

void* checked_malloc(const char* call, size_t n) {
  void* p = n ? std::malloc(n) : nullptr;
  if (n && !p)
    util::fail(call, "size", std::to_string(n), "cannot allocate the staging buffer of a list");
  return p;
}

// The list, or the positional buffer as a list of one.
size_t local_list(const comm_args& a, const buffer_t*& list) {
  if (a.buffers) {
    list = a.buffers;
    return a.nbuffers;
  }
  static thread_local buffer_t one;
  one = {a.local_buffer, a.size};
  list = &one;
  return 1;
}

}  // namespace

status_t device_impl::post_list(const comm_args& a) {
  const char* call = a.call_name;
  if (a.buffers) {
    if (a.nbuffers < 1 || a.nbuffers > max_buffers)
      util::fail(call, "buffers", std::to_string(a.nbuffers) + " entries",
                 "a buffer list has 1.." + std::to_string(max_buffers) + " entries");
    if (a.local_buffer || a.size)
      util::fail(call, "local_buffer", a.local_buffer ? util::to_hex(a.local_buffer) : "nullptr",
                 "a buffer list replaces local_buffer and size: pass nullptr and 0");
    if (a.buffer_is_packet)
      util::fail(call, "buffer_is_packet", "true", "a buffer list takes plain buffers");
  }
  size_t total = 0;
  const buffer_t* list;
  const size_t n = local_list(a, list);
  for (size_t i = 0; i < n; ++i) {
    if (!list[i].base && list[i].size)
      util::fail(call, "buffers[" + std::to_string(i) + "].base", "nullptr",
                 "null buffer with size " + std::to_string(list[i].size));
    total += list[i].size;
    if (list[i].size > max_msg_size || total > max_msg_size)
      util::fail(call, "buffers", "total " + std::to_string(total) + " bytes",
                 "exceeds the maximum message size " + std::to_string(max_msg_size));
  }
  if (a.has_remote_buffer) return post_list_rma(a, total);
  if (a.direction == direction_t::IN && a.remote_comp != rcomp_null)
    util::fail(call, "remote_comp", std::to_string(a.remote_comp),
               "direction IN with a remote completion but no remote buffer is not a valid "
               "operation (Table 1)");
  return post_list_twosided(a, total);
}

status_t device_impl::post_list_twosided(const comm_args& a, size_t total) {
  const bool in = a.direction == direction_t::IN;
  auto* op = new list_op(*this, a, total);
  comm_args inner = a;
  inner.buffers = nullptr;
  inner.nbuffers = 0;
  inner.size = total;
  inner.local_comp.p = op;
  inner.allow_done = true;
  if (in) {
    op->scatter_into = a.nbuffers;
    std::copy(a.buffers, a.buffers + a.nbuffers, op->scatter);
    op->staging = checked_malloc(a.call_name, total);
    inner.local_buffer = op->staging;
  } else {
    packet_pool_impl* p = a.packet_pool.p ? a.packet_pool.p : pool;
    void* packet = total && total <= eager_limit ? p->get() : nullptr;
    char* to =
        static_cast<char*>(packet ? packet : op->staging = checked_malloc(a.call_name, total));
    for (size_t i = 0; i < a.nbuffers; ++i) {
      if (a.buffers[i].size) memcpy(to, a.buffers[i].base, a.buffers[i].size);
      to += a.buffers[i].size;
    }
    inner.local_buffer = packet ? packet : op->staging;
    inner.buffer_is_packet = packet != nullptr;  // the send returns it to its pool
    inner.packet_pool.p = packet ? p : nullptr;
  }
  comp_impl* user = comp_of(a);
  if (user) user->pending.fetch_add(1, std::memory_order_relaxed);
  op->remaining.store(1, std::memory_order_relaxed);
  status_t s;
  try {
    s = post(inner);
  } catch (...) {
    if (user) user->pending.fetch_sub(1, std::memory_order_relaxed);
    if (inner.buffer_is_packet) inner.packet_pool.p->put(inner.local_buffer);
    delete op;
    throw;
  }
  if (s.error.is_posted()) {
    status_t r = s;
    r.buf = nullptr;
    r.size = total;
    r.user_context = a.user_context;
    return r;
  }
  if (user) user->pending.fetch_sub(1, std::memory_order_relaxed);
  if (s.error.is_retry()) {
    if (inner.buffer_is_packet) inner.packet_pool.p->put(inner.local_buffer);
    delete op;
    status_t r = s;
    r.buf = nullptr;
    r.size = total;
    return r;
  }
  op->note(s);
  status_t r = op->finish();
  delete op;
  if (a.allow_done) return r;
  complete(user, r, false);
  r.error = errorcode_t::posted;
  return r;
}

status_t device_impl::post_list_rma(const comm_args& a, size_t total) {
  const char* call = a.call_name;
  rbuffer_t single{a.remote_buffer, a.remote_disp, total};
  const rbuffer_t* remote = &single;
  size_t nremote = 1;
  if (a.remote_buffers) {
    if (a.nremote_buffers < 1 || a.nremote_buffers > max_buffers)
      util::fail(call, "remote_buffers", std::to_string(a.nremote_buffers) + " entries",
                 "a buffer list has 1.." + std::to_string(max_buffers) + " entries");
    if (!a.remote_buffer.is_empty() || a.remote_disp)
      util::fail(call, "remote_buffer", "key " + std::to_string(a.remote_buffer.key),
                 "a remote buffer list replaces the region and displacement: pass rmr_t{} and 0");
    remote = a.remote_buffers;
    nremote = a.nremote_buffers;
    size_t rtotal = 0;
    for (size_t i = 0; i < nremote; ++i) rtotal += remote[i].size;
    if (rtotal != total)
      util::fail(call, "remote_buffers", "total " + std::to_string(rtotal) + " bytes",
                 "differs from the local total of " + std::to_string(total) + " bytes");
  }
  // Check every remote entry before posting anything, so a bad one costs nothing.
  for (size_t i = 0; i < nremote; ++i) {
    const std::string arg = a.remote_buffers ? "remote_buffers[" + std::to_string(i) + "]"
                                             : std::string("remote_buffer");
    check_remote_access(call, arg, a.remote_buffers ? arg + ".disp" : std::string("remote_disp"),
                        a.rank, remote[i].rmr, remote[i].disp, remote[i].size);
  }
  check_one_sided(a);

  // Cut both lists into pieces where either changes buffer.
  const buffer_t* local;
  const size_t nlocal = local_list(a, local);
  comm_args piece = a;
  piece.buffers = nullptr;
  piece.nbuffers = 0;
  piece.remote_buffers = nullptr;
  piece.nremote_buffers = 0;
  piece.remote_comp = rcomp_null;
  piece.allow_retry = false;  // a full queue sends a piece through the backlog
  piece.internal = true;      // the list as a whole was checked against the backlog's bound
  std::vector<comm_args> pieces;
  size_t li = 0, ri = 0, loff = 0, roff = 0;
  while (li < nlocal && ri < nremote) {
    size_t n = std::min(local[li].size - loff, remote[ri].size - roff);
    if (n) {
      piece.local_buffer = static_cast<char*>(local[li].base) + loff;
      piece.size = n;
      piece.remote_buffer = remote[ri].rmr;
      piece.remote_disp = remote[ri].disp + roff;
      pieces.push_back(piece);
    }
    loff += n;
    roff += n;
    if (loff == local[li].size) ++li, loff = 0;
    if (ri < nremote && roff == remote[ri].size) ++ri, roff = 0;
  }
  if (pieces.empty()) {  // nothing to move: one empty access still completes (and notifies)
    piece.local_buffer = nullptr;
    piece.size = 0;
    piece.remote_buffer = remote[0].rmr;
    piece.remote_disp = remote[0].disp;
    pieces.push_back(piece);
  }
  auto* op = new list_op(*this, a, total);
  if (a.remote_comp != rcomp_null) {
    op->held = true;
    op->last = pieces.back();
    op->last.remote_comp = a.remote_comp;
    op->last.note_whole = true;
    op->last.note_addr = remote[0].rmr.base + remote[0].disp;
    op->last.note_size = total;
    op->last.local_comp.p = op;
    pieces.pop_back();
  }
  comp_impl* user = comp_of(a);
  if (user) user->pending.fetch_add(1, std::memory_order_relaxed);
  // One count more than the pieces, dropped after the loop: a piece that finishes while
  // later ones are posted cannot finish the operation early.
  op->remaining.store(pieces.size() + 1, std::memory_order_relaxed);
  for (comm_args& p : pieces) {
    p.local_comp.p = op;
    status_t s = list_op::post_piece(*this, p);
    if (!s.error.is_posted()) op->signal(s);
  }
  op->signal(status_t{errorcode_t::done});
  status_t r;
  r.error = errorcode_t::posted;
  r.rank = a.rank;
  r.tag = a.tag;
  r.size = total;
  r.user_context = a.user_context;
  return r;
}

}  // namespace weft::impl
