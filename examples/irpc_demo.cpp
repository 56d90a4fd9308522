// SPDX-License-Identifier: BSD-3-Clause
// The iRPCLib backend of the LCI paper's Listing 2, with namespace weft and its typos
// fixed, driving a small multithreaded RPC demo: every thread calls a remote "sum" on the
// next rank and checks the replies.
//   weftrun -n 2 irpc_demo
#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <weft/weft.hpp>

// ---------------------------------------------------------------- the backend (Listing 2)
namespace upper_layer {
void send_cb(weft::status_t status);
}

struct msg_t {
  int rank;
  int tag;
  void* buf;
  size_t size;
};

// shared resources
weft::comp_t shandler;  // send completion handler
weft::comp_t rcq;       // receive completion queue
weft::rcomp_t rcomp;    // remote completion handle for rcq
// thread-local resources
thread_local weft::device_t device;

// callback for source-side completion
void upper_layer::send_cb(weft::status_t status) {
  // free the message buffer once the send is done
  std::free(status.buf);
}

void global_init(int* rank_me, int* rank_n) {
  weft::g_runtime_init();
  *rank_me = weft::get_rank_me();
  *rank_n = weft::get_rank_n();
  shandler = weft::alloc_handler(upper_layer::send_cb);
  rcq = weft::alloc_cq();
  rcomp = weft::register_rcomp(rcq);
}

void global_fina() {
  weft::free_comp(&shandler);
  weft::free_comp(&rcq);
  weft::g_runtime_fina();
}

void thread_init() {
  device = weft::alloc_device();
}

void thread_fina() {
  weft::free_device(&device);
}

bool send_msg(int rank, void* buf, size_t s, int tag) {
  weft::status_t status =
      weft::post_am_x(rank, buf, s, shandler, rcomp).tag(weft::tag_t(tag)).device(device)();
  if (status.error.is_retry()) return false;  // the send failed temporarily
  if (status.error.is_done())
    upper_layer::send_cb(status);  // the send immediately completed
  else
    assert(status.error.is_posted());
  return true;  // the send succeeded
}

bool poll_msg(msg_t* msg) {
  weft::status_t status = weft::cq_pop(rcq);
  if (status.error.is_done()) {
    weft::buffer_t buf = status.get_buffer();
    *msg = {
        .rank = status.rank,
        .tag = int(status.tag),
        .buf = buf.base,
        .size = buf.size,
    };
    // the upper layer is responsible for freeing the buffer once it consumes the message
    return true;
  } else {
    assert(status.error.is_retry());
    return false;
  }
}

bool do_background_work() {
  return weft::progress_x().device(device)().is_done();
}

// ---------------------------------------------------------------- a small RPC layer on top
enum : int { rpc_sum = 1, rpc_reply = 2 };

struct sum_request {
  int thread;
  int seq;
  long a, b;
};
struct sum_reply {
  int thread;
  int seq;
  long result;
};

int main() {
  int me = 0, n = 0;
  global_init(&me, &n);
  const int nthreads = 2, calls = 2000;
  // Devices are allocated in the same order on every rank (collective), before the
  // threads start, so thread t's device pairs with thread t's device on the peer.
  std::vector<weft::device_t> devices(nthreads);
  for (auto& d : devices) {
    thread_init();
    d = device;
  }
  weft::barrier();
  std::atomic<int> correct{0}, wrong{0}, replies{0};
  std::atomic<int> served{0};
  const int expected_served = nthreads * calls;  // every rank serves its left neighbour

  auto worker = [&](int t) {
    device = devices[size_t(t)];
    const int server = (me + 1) % n;
    int sent = 0;
    auto handle = [&](const msg_t& m) {
      if (m.tag == rpc_sum) {
        auto* req = static_cast<sum_request*>(m.buf);
        auto* rep = static_cast<sum_reply*>(std::malloc(sizeof(sum_reply)));
        *rep = {req->thread, req->seq, req->a + req->b};
        while (!send_msg(m.rank, rep, sizeof(*rep), rpc_reply)) do_background_work();
        served.fetch_add(1);
      } else {
        auto* rep = static_cast<sum_reply*>(m.buf);
        long want = long(rep->seq) * 3 + rep->thread + 1000L * me;
        (rep->result == want ? correct : wrong).fetch_add(1);
        replies.fetch_add(1);
      }
      std::free(m.buf);
    };
    while (sent < calls || replies.load() < nthreads * calls || served.load() < expected_served) {
      if (sent < calls) {
        auto* req = static_cast<sum_request*>(std::malloc(sizeof(sum_request)));
        *req = {t, sent, long(sent) * 2 + 1000L * me, long(sent) + t};
        if (send_msg(server, req, sizeof(*req), rpc_sum))
          ++sent;
        else
          std::free(req);
      }
      msg_t m;
      if (poll_msg(&m)) handle(m);
      do_background_work();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  weft::barrier();
  for (auto& d : devices) {
    device = d;
    thread_fina();
  }
  printf("rank %d: %d RPCs served, %s: all %d replies correct\n", me, served.load(),
         wrong.load() ? "FAILED" : "ok", correct.load());
  global_fina();
  return wrong.load() ? 1 : 0;
}
