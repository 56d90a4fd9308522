// SPDX-License-Identifier: BSD-3-Clause
// The core's wire decoder (src/core/progress.cpp): every message a peer's device sends
// reaches device_impl::on_message (eager sends and active messages, rendezvous requests,
// clear-to-send, refusals), and every notification that rides with a put or a rendezvous
// reaches on_remote_notify. A peer can send any bytes; the decoder must refuse what is
// malformed without crashing, reading out of bounds or leaking. Input: the first byte picks
// the entry (even: message, odd: notification), the rest is the bytes. A runtime of one
// rank (no launcher) with one remote completion queue (and a handler lent messages in
// place, remote completion 1) receives them as from itself; the
// queue is emptied after each input, and the runtime made anew every 1000 inputs so that
// what accumulates (unexpected rendezvous requests) does not fill its tables for good.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>
#include <weft/weft.hpp>

#include "core/device.hpp"
#include "core/wire.hpp"
#include "fuzz_rendezvous.hpp"
#include "util/generation.hpp"

namespace {

weft::impl::device_impl* dev = nullptr;
weft::comp_t cq, lent;
long inputs = 0;
// Remote completion 1 lends active messages in place: its handler reads every byte it is
// lent (so that a length past the message shows), but not a notification's buf, which is
// whatever address the bytes said.
bool lent_readable = false;
uint64_t lent_sum = 0;

void start() {
  weft::g_runtime_init();
  cq = weft::alloc_cq();
  (void)weft::register_rcomp(cq);  // remote completion 0: active messages can land
  lent = weft::alloc_handler([](weft::status_t s) {
    if (!lent_readable || !s.buf) return;
    const auto* p = static_cast<const unsigned char*>(s.buf);
    for (size_t i = 0; i < s.size; ++i) lent_sum += p[i];
  });
  (void)weft::register_rcomp_x(lent).in_place(true)();
  dev = weft::util::live(weft::get_default_device().p, "fuzz", "device");
}

// Active messages' buffers are the receiver's to free; a notification's buf is an address
// in a region (here whatever the bytes said), not to be freed, unless it completed one of
// the active messages in `am`.
void drain(bool messages, const std::set<void*>& am = {}) {
  for (int i = 0; i < 4; ++i) weft::progress();
  for (;;) {
    weft::status_t s = weft::cq_pop(cq);
    if (s.error.is_retry()) break;
    if (messages || am.count(s.buf)) std::free(s.buf);  // nullptr if it failed: Weft freed it
  }
}

// Before the runtime is made anew: the rendezvous active messages that inputs announced are
// still waiting for their data (which no peer will send); complete them as if it had come,
// so that their queue and the runtime can be freed.
void complete_rendezvous() {
  lent_readable = true;  // their buffers are Weft's allocations
  fuzz::complete_awaited(dev);
  drain(true);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("WEFT_LOG_LEVEL", "none", 1);
  unsetenv("WEFT_WIRE_ERRORS_FATAL");
  setenv("WEFT_MAX_REQUESTS", "256", 1);  // a small table: scanned per input, and filled often
  start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<char> in(reinterpret_cast<const char*>(data) + 1,
                       reinterpret_cast<const char*>(data) + size);
  // A rendezvous request makes the receiver allocate what it announces (up to 128 TiB, by
  // design: the sender learns at once when it cannot be had); kept under 1 MiB here so that
  // a thousand inputs' worth of them fit in the fuzzer's memory limit.
  weft::impl::wire_header h{};
  if (in.size() == sizeof(h) + sizeof(weft::impl::rts_body)) {
    memcpy(&h, in.data(), sizeof(h));
    if (h.type == uint8_t(weft::impl::msg_type::rts_am) ||
        h.type == uint8_t(weft::impl::msg_type::rts_send)) {
      uint64_t announced;
      memcpy(&announced, in.data() + sizeof(h), 8);
      announced %= uint64_t(1) << 20;
      memcpy(in.data() + sizeof(h), &announced, 8);
    }
  }
  if (data[0] & 1) {
    const std::set<void*> am = fuzz::awaited(dev);
    lent_readable = false;
    (void)dev->on_remote_notify(0, in.data(), in.size());
    drain(false, am);
  } else {
    lent_readable = true;
    (void)dev->on_message(0, in.data(), in.size());
    drain(true);
  }
  if (++inputs % 1000 == 0) {
    complete_rendezvous();
    weft::free_comp(&cq);
    weft::free_comp(&lent);
    weft::g_runtime_fina();
    start();
  }
  return 0;
}
