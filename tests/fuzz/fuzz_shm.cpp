// SPDX-License-Identifier: BSD-3-Clause
// The shared-memory backend's cell decoder (src/net/shm/shm_backend.cpp and shm_rma.cpp): a
// local peer writes cells into this rank's inbox, and every kind but a plain message is
// decoded here first (a pipelined put starting, a notification, a pipelined get's request,
// answer or refusal, rendezvous data announced, sent ahead or split) before the core sees
// anything. A peer that is buggy or killed half-way can leave any bytes.
// Input: the first byte is the cell's kind (low 4 bits: the kinds and a few unknown ones),
// the rest its body; one rank without a launcher receives it as from itself, then
// progresses (a pipelined put that was accepted copies its data, a get is served) and
// empties its queue. The runtime is made anew every 1000 inputs.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <weft/weft.hpp>

#include "core/device.hpp"
#include "fuzz_rendezvous.hpp"
#include "net/shm/layout.hpp"
#include "net/shm/shm_backend.hpp"
#include "util/generation.hpp"

namespace weft::net::shm {
struct fuzz_access {
  static bool cell(shm_device& d, sink& s, uint8_t kind, const char* data, uint32_t len) {
    cell_header c;
    c.seq.store(0, std::memory_order_relaxed);
    c.len = len;
    c.src = 0;
    c.kind = kind;
    c.lap = 0;
    return d.handle_other_cell(s, &c, data);
  }
  // Before the runtime is made anew: data sent ahead that an input announced and the core
  // took waits for bytes no peer will write; nothing copies it any more.
  static void drop_incoming(shm_device& d) {
    d.incoming_.remove_if([](const shm_device::incoming_put&) { return true; });
  }
  // The verdict word of this rank's own channel `ch` (the peer here is this rank itself),
  // when `m` is a well-formed announcement on it (else the decoder drops the cell unread).
  static std::atomic<uint32_t>* verdict(shm_device& d, const put_start_msg& m) {
    const uint32_t ch = m.channel;
    if (ch >= d.geo_.nchannels || !d.piece_ok(m.piece)) return nullptr;
    return &d.channel_of(d.peers_[0]->channels, ch)->verdict;
  }
};
}  // namespace weft::net::shm

namespace {

weft::impl::device_impl* dev = nullptr;
weft::net::shm::shm_device* shm = nullptr;
weft::comp_t cq;
std::vector<char> region(1 << 16);
weft::mr_t mr;
long inputs = 0;

void start() {
  weft::g_runtime_init();
  cq = weft::alloc_cq();
  (void)weft::register_rcomp(cq);
  mr = weft::register_memory(region.data(), region.size());  // something to put into or get
  dev = weft::util::live(weft::get_default_device().p, "fuzz", "device");
  shm = dynamic_cast<weft::net::shm::shm_device*>(dev->net.get());
  if (!shm) abort();  // WEFT_BACKEND=shm is set below
}

// The active messages whose data was sent ahead and taken (their buffers allocated) are
// still waiting for it: complete them as if it had come, and free their buffers.
void complete_ahead() {
  weft::net::shm::fuzz_access::drop_incoming(*shm);
  fuzz::complete_awaited(dev);
  for (;;) {
    weft::status_t s = weft::cq_pop(cq);
    if (s.error.is_retry()) break;
    std::free(s.buf);
  }
}

void stop() {
  complete_ahead();
  weft::deregister_memory(&mr);
  weft::free_comp(&cq);
  weft::g_runtime_fina();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("WEFT_LOG_LEVEL", "none", 1);
  setenv("WEFT_BACKEND", "shm", 1);
  setenv("WEFT_MAX_REQUESTS", "256", 1);  // a small table: scanned per input (awaited)
  start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  std::vector<char> body(reinterpret_cast<const char*>(data) + 1,
                         reinterpret_cast<const char*>(data) + size);
  // Property: rendezvous data is accepted only into a buffer a receive offered, and this
  // rank offered none, so a pipelined put of kind stream_data must be refused.
  using namespace weft::net::shm;
  std::atomic<uint32_t>* verdict = nullptr;
  put_start_msg m{};
  const uint8_t kind = uint8_t(data[0] & 15);
  // An answer message is a core message (the wire format, fuzz_wire's), as a plain one is.
  if (kind == kind_answer_message) return 0;
  // Data sent ahead announces a ready-to-send, whose size the receiver allocates for an
  // active message: kept under 1 MiB, as fuzz_wire does.
  ahead_msg a{};
  if (kind == kind_ahead && body.size() == sizeof(a)) {
    memcpy(&a, body.data(), sizeof(a));
    uint64_t announced;
    memcpy(&announced, a.msg + 16, 8);
    announced %= uint64_t(1) << 20;
    memcpy(a.msg + 16, &announced, 8);
    memcpy(body.data(), &a, sizeof(a));
  }
  if (kind == kind_put_start && body.size() == sizeof(m)) {
    memcpy(&m, body.data(), sizeof(m));
    if (m.kind == stream_data && m.note_len <= sizeof(m.note) &&
        (verdict = fuzz_access::verdict(*shm, m)))
      verdict->store(verdict_pending);
  }
  short_start_msg ds{};  // the same data in its short form (the answer lane's)
  if (kind == kind_stream_answer && body.size() == sizeof(ds)) {
    memcpy(&ds, body.data(), sizeof(ds));
    m.channel = ds.channel;
    m.piece = ds.piece;
    if (ds.kind == stream_data && ds.note_len <= sizeof(ds.note) &&
        (verdict = fuzz_access::verdict(*shm, m)))
      verdict->store(verdict_pending);
  }
  const std::set<void*> before = fuzz::awaited(dev);
  const uint64_t split_read = shm->count(weft::counter_t::bytes_split_read);
  (void)fuzz_access::cell(*shm, *dev, kind, body.data(), uint32_t(body.size()));
  if (verdict && verdict->load() != verdict_refused) abort();
  // Likewise split rendezvous data (kind_split_read): nothing read into an unoffered buffer.
  if (shm->count(weft::counter_t::bytes_split_read) != split_read) abort();
  // An active message whose data went ahead may complete now, or by this very cell (a
  // forged notification naming it): its buffer is the receiver's to free; a put's
  // notification carries an address in a region, not to be freed.
  std::set<void*> am = fuzz::awaited(dev);
  am.insert(before.begin(), before.end());
  for (int i = 0; i < 4; ++i) weft::progress();
  for (;;) {
    weft::status_t s = weft::cq_pop(cq);
    if (s.error.is_retry()) break;
    if (am.count(s.buf)) std::free(s.buf);
  }
  if (++inputs % 1000 == 0) {
    stop();
    start();
  }
  return 0;
}
