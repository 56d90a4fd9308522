// SPDX-License-Identifier: BSD-3-Clause
#include "control.hpp"

#include <sys/mman.h>

#include <cstring>
#include <stdexcept>
#include <thread>

namespace soak {
namespace {

enum what : intptr_t { w_setup_recv, w_setup_send, w_fin_recv, w_fin_send, w_sum_recv, w_sum_send };

void* context_of(what w, int rank) {
  return reinterpret_cast<void*>((intptr_t(w) << 20) | intptr_t(rank + 1));
}

std::vector<ctl>& states(job& J, what w) {
  switch (w) {
    case w_setup_recv: return J.setup_recv;
    case w_setup_send: return J.setup_send;
    case w_fin_recv: return J.fin_recv;
    case w_fin_send: return J.fin_send;
    case w_sum_recv: return J.sum_recv;
    default: return J.sum_send;
  }
}

// A control operation ended: done, or dead when its peer died (the only error expected).
void ended(job& J, what w, int rank, const weft::status_t& s) {
  ctl& st = states(J, w)[size_t(rank)];
  if (!s.error.is_error()) {
    st = ctl::done;
    return;
  }
  st = ctl::dead;
  if (s.error.errorcode == weft::errorcode_t::error_peer_dead && J.expected_death(rank)) {
    J.mark_dead(rank);
    return;
  }
  ++J.control_errors;
  J.failure("control message " + std::to_string(int(w)) + " with rank " + std::to_string(rank) +
            " ended with " + s.error.get_str());
}

// Progress the default device and take every control completion.
void poll(job& J) {
  weft::progress();
  for (;;) {
    weft::status_t s = weft::cq_pop(J.ctrl_cq);
    if (s.error.is_retry()) return;
    const auto v = reinterpret_cast<intptr_t>(s.user_context);
    ended(J, what(v >> 20), int(v & 0xfffff) - 1, s);
  }
}

// Posts one control send or receive (retrying), recording its state.
void post(job& J, what w, int rank, void* buf, size_t size, weft::tag_t tag, bool send) {
  ctl& st = states(J, w)[size_t(rank)];
  st = ctl::pending;
  for (;;) {
    weft::status_t s;
    try {
      s = send ? weft::post_send_x(rank, buf, size, tag, J.ctrl_cq)
                     .user_context(context_of(w, rank))()
               : weft::post_recv_x(rank, buf, size, tag, J.ctrl_cq)
                     .user_context(context_of(w, rank))();
    } catch (const weft::fatal_error& e) {
      if (e.argument() != "rank") throw;
      // Refused: the rank is known dead. Expected for the victim; for any other rank it
      // fails the run (with the reason), and the exchange goes on without it.
      if (!J.expected_death(rank)) {
        ++J.control_errors;
        J.failure(std::string("control message refused: ") + e.what());
      }
      J.mark_dead(rank);
      st = ctl::dead;
      return;
    }
    if (s.error.is_retry()) {
      poll(J);
      continue;
    }
    if (s.error.is_done()) ended(J, w, rank, s);
    return;
  }
}

// Waits until no control operation of kind `w` is pending.
void wait(job& J, what w) {
  for (;;) {
    bool pending = false;
    for (ctl c : states(J, w)) pending |= c == ctl::pending;
    if (!pending) return;
    poll(J);
  }
}

char* map(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("weft-soak: mmap of the regions failed");
  return static_cast<char*>(p);
}

}  // namespace

void setup(job& J) {
  const size_t n = size_t(J.n), T = size_t(J.opt.threads);
  for (auto* v : {&J.setup_recv, &J.setup_send, &J.fin_recv, &J.fin_send, &J.sum_recv, &J.sum_send})
    v->assign(n, ctl::idle);
  J.dead = std::make_unique<std::atomic<bool>[]>(n);
  J.fin.assign(n, std::vector<uint64_t>(J.fin_words(), 0));
  J.fin_known_dead.assign(n, 0);
  J.ctrl_cq = weft::alloc_cq();
  // Devices and remote queues in the same order on every rank (their indexes pair up).
  J.devices.push_back(weft::get_default_device());
  if (!J.opt.shared)
    for (size_t t = 1; t < T; ++t) J.devices.push_back(weft::alloc_device());
  for (size_t t = 0; t < T; ++t) {
    J.remote_cqs.push_back(weft::alloc_cq());
    J.rcomps.push_back(weft::register_rcomp(J.remote_cqs.back()));
  }
  J.inbox = map(J.slot_of(J.n, 0));
  J.pattern = map(J.opt.max_size);
  fill_pattern(J.pattern, J.opt.max_size, J.me);
  J.inbox_mr = weft::register_memory(J.inbox, J.slot_of(J.n, 0));
  J.pattern_mr = weft::register_memory(J.pattern, J.opt.max_size);
  peer_regions mine{weft::get_rmr(J.inbox_mr), weft::get_rmr(J.pattern_mr), J.seed};
  J.setup_in.assign(n, peer_regions{});
  for (int r = 0; r < J.n; ++r)
    post(J, w_setup_recv, r, &J.setup_in[size_t(r)], sizeof(peer_regions), tag_setup, false);
  for (int r = 0; r < J.n; ++r) post(J, w_setup_send, r, &mine, sizeof(mine), tag_setup, true);
  wait(J, w_setup_send);
  wait(J, w_setup_recv);
  J.peers = J.setup_in;
  J.seed = J.peers[0].seed;
}

void post_control_receives(job& J) {
  for (int r = 0; r < J.n; ++r)
    post(J, w_fin_recv, r, J.fin[size_t(r)].data(), J.fin_words() * 8, tag_fin, false);
  if (J.me != 0) return;
  J.sums.assign(size_t(J.n), tally_msg{});
  for (int r = 1; r < J.n; ++r)
    post(J, w_sum_recv, r, &J.sums[size_t(r)], sizeof(tally_msg), tag_sum, false);
}

void exchange_fins(job& J, const std::vector<std::vector<uint64_t>>& fins) {
  for (int r = 0; r < J.n; ++r)
    if (!J.is_dead(r))
      post(J, w_fin_send, r, const_cast<uint64_t*>(fins[size_t(r)].data()), J.fin_words() * 8,
           tag_fin, true);
  wait(J, w_fin_send);
  wait(J, w_fin_recv);
  for (int r = 0; r < J.n; ++r) J.fin_known_dead[size_t(r)] = J.fin_recv[size_t(r)] != ctl::done;
  J.fins_known.store(true);
}

report gather(job& J, const tally& mine, int rc) {
  report out;
  if (J.me != 0) {
    tally_msg m{mine, rc};
    post(J, w_sum_send, 0, &m, sizeof(m), tag_sum, true);
    wait(J, w_sum_send);
    return out;
  }
  out.sum = mine;
  out.ranks = 1;
  out.rc = rc;
  wait(J, w_sum_recv);
  for (int r = 1; r < J.n; ++r) {
    if (J.sum_recv[size_t(r)] != ctl::done) {
      ++out.missing;
      continue;
    }
    out.sum.add(J.sums[size_t(r)].t);
    ++out.ranks;
    out.rc = std::max(out.rc, int(J.sums[size_t(r)].rc));
  }
  return out;
}

}  // namespace soak
