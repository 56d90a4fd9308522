// Barrier over all ranks of a device: a dissemination barrier (ceil(log2 n) rounds; in
// round k each rank sends to rank+2^k and waits for rank-2^k) on Weft's own matching
// engine, driven by a completion handler so the non-blocking form needs no thread.
#include "comp/comp.hpp"
#include "core/device.hpp"
#include "core/runtime.hpp"
#include "util/fail.hpp"

namespace weft::detail {
namespace {

class barrier_op final : public comp_impl {
 public:
  barrier_op(device_impl& d, comp_impl* done)
      : comp_impl(comp_kind::internal),
        dev_(d),
        done_(done),
        epoch_(d.barrier_epoch.fetch_add(1, std::memory_order_relaxed)) {
    const int n = d.rt.size();
    while ((1 << rounds_) < n) ++rounds_;
  }

  void start() {
    if (rounds_ == 0) return finish();
    post_round();
  }

  bool signal(const status_t& s) override {
    if (s.error.is_error()) {
      status_t f = s;
      f.user_context = nullptr;
      comp_impl* done = done_;
      device_impl& d = dev_;
      delete this;
      d.complete(done, f, false);
      return true;
    }
    if (++round_ == rounds_)
      finish();
    else
      post_round();
    return true;
  }

 private:
  void post_round() {
    const int n = dev_.rt.size(), me = dev_.rt.rank(), dist = 1 << round_;
    const tag_t tag = (tag_t(epoch_) << 6) | tag_t(round_);
    comm_args send;
    send.rank = (me + dist) % n;
    send.tag = tag;
    send.device.p = &dev_;
    send.matching_engine.p = dev_.rt.engine(internal_engine_id);
    send.allow_retry = false;  // a full peer queue sends it through the backlog
    send.call_name = "barrier";
    dev_.post(send);
    comm_args recv = send;
    recv.direction = direction_t::IN;
    recv.rank = (me - dist % n + n) % n;
    recv.local_comp.p = this;
    recv.allow_done = false;  // always signal: the round advances in signal()
    dev_.post(recv);
  }

  void finish() {
    status_t s;
    s.error = errorcode_t::done;
    s.rank = dev_.rt.rank();
    comp_impl* done = done_;
    device_impl& d = dev_;
    delete this;
    d.complete(done, s, false);
  }

  device_impl& dev_;
  comp_impl* done_;
  uint32_t epoch_;
  int rounds_ = 0;
  int round_ = 0;
};

}  // namespace

void start_barrier(device_impl& d, comp_impl* done) {
  (new barrier_op(d, done))->start();
}

}  // namespace weft::detail
