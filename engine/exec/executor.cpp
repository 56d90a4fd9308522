// SPDX-License-Identifier: BSD-3-Clause
// The dataflow executor (executor.hpp): tasks on workers, flows through the engine as
// ACTIVATE -> GET DATA -> put with a remote callback. No lock is held while posting to the
// engine: an eager put runs its local callback inside the post, and that callback takes
// the executor's lock.
#include "engine/exec/executor.hpp"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace weft::exec {
namespace {

enum : weft_engine_tag_t { tag_activate = 32, tag_get = 33, tag_data = 34, tag_barrier = 35 };
// How long an oversubscribed driver sleeps in the engine at most (200, 500 and 2 000 us
// measured alike across the namespace hosts).
constexpr uint32_t driver_wait_us = 500;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process of a host
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct activate_msg {
  task_key task;
  uint32_t output, pad;
  uint64_t size;
  double sent_at;
  unsigned char region[WEFT_ENGINE_MEM_PACKED];
};
struct get_msg {
  task_key task;
  uint32_t output, pad;
  uint64_t fetch_id, dest_offset;
  unsigned char dest[WEFT_ENGINE_MEM_PACKED];
};
// 4 bytes: the Weft engine carries a remote callback of up to 5 in the put's notification
// (no announce message). Fetch ids wrap at 2^32, far beyond the fetches ever in flight.
struct data_msg {
  uint32_t fetch_id;
};

void check(int rc, const char* what) {
  if (rc < 0 || rc >= WEFT_ERROR)
    throw std::runtime_error(std::string("weft::exec: ") + what + ": " + weft_last_error());
}

}  // namespace

// A task's output, or a fetched copy of a remote one, in a buffer of the executor's pool.
struct executor::data {
  executor* owner = nullptr;
  flow_ref key{};
  buffer buf;
  void* ptr = nullptr;
  size_t size = 0;
  int remote_left = 0;  // peers still to fetch it (under lock_)
  double sent_at = 0;   // a fetched copy: when its ACTIVATE left
  data(executor* x, size_t n) : owner(x), buf(x->take_buffer(n)), ptr(buf.ptr), size(n) {}
  ~data() { owner->give_buffer(buf); }
};

// Buffers are kept by size and reused: allocating, first-touching and registering one per
// flow cost more than moving a small fragment, and a host has a bounded number of
// registrations. So buffers are carved from arenas of at least 4 MiB, each registered once;
// a buffer is its arena's region at an offset. The pool keeps the most buffers of each size
// ever in use at once, until the executor goes.
executor::buffer executor::take_buffer(size_t n) {
  const size_t size = n ? (n + 63) & ~size_t(63) : 64;
  std::lock_guard<std::mutex> hold(pool_lock_);
  std::vector<buffer>& list = pool_[size];
  if (list.empty()) {
    const size_t per = std::max<size_t>(1, (size_t(4) << 20) / size);
    arena a;
    a.bytes = per * size;
    a.buffer_size = size;
    make_arena(a);
    // Touched now, not by the first transfer into it: a page fault inside a peer's copy
    // slows that transfer and misleads the shared-memory chooser's figures.
    std::memset(a.base, 0, a.bytes);
    check(weft_engine_pack_memory(e_, a.mem, a.packed), "pack_memory");
    arenas_.push_back(a);
    for (size_t i = per; i-- > 0;) {
      buffer b;
      b.ptr = static_cast<char*>(a.base) + i * size;
      b.size = size;
      b.mem = a.mem;
      b.offset = i * size;
      std::memcpy(b.packed, a.packed, sizeof(b.packed));
      list.push_back(b);
    }
  }
  buffer b = list.back();
  list.pop_back();
  return b;
}

// An arena's memory. For buffers under mapped_max, the engine's own
// (weft_engine_alloc_memory): the Weft engine's peers on this host put into it with one
// memcpy, no system call; the MPI engine's is on huge pages. Larger buffers go on huge pages
// registered as any memory, for both engines: a memory file gets no transparent huge pages
// (only a host's reserved pool), and through small pages the Weft engine's 1 MiB fragments
// moved 10-35% less than by cross-memory attach into huge pages (docs/engine.md).
void executor::make_arena(arena& a) {
  if (a.buffer_size < mapped_max) {
    check(weft_engine_alloc_memory(e_, a.bytes, &a.base, &a.mem), "alloc_memory");
    a.allocated = true;
    return;
  }
  // A peer's cross-memory write pins every page it touches, and 4 KiB pages made that
  // pinning most of a fragment's cost: 8 MiB fragments 6.8-7.2 -> 13.3-13.5 GB/s on the
  // Weft engine, 7.1-8.9 -> 16.9-20.5 on the MPI engine over MPICH.
  constexpr size_t huge = size_t(2) << 20;
  const size_t span = (a.bytes + huge - 1) & ~(huge - 1);
  a.base = std::aligned_alloc(huge, span);
  if (!a.base) throw std::bad_alloc();
  (void)madvise(a.base, span, MADV_HUGEPAGE);  // advice: without it, small pages
  check(weft_engine_register_memory(e_, a.base, a.bytes, &a.mem), "register_memory");
}

void executor::free_arena(arena& a) {
  if (a.allocated) {
    weft_engine_free_memory(e_, &a.mem);
    return;
  }
  weft_engine_deregister_memory(e_, &a.mem);
  std::free(a.base);
}

void executor::give_buffer(const buffer& b) {
  std::lock_guard<std::mutex> hold(pool_lock_);
  pool_[b.size].push_back(b);
}

size_t executor::trim() {
  std::lock_guard<std::mutex> hold(pool_lock_);
  std::unordered_map<weft_engine_mem_t, size_t> pooled;  // buffers back in the pool, by arena
  for (auto& [size, list] : pool_)
    for (const buffer& b : list) ++pooled[b.mem];
  size_t freed = 0;
  std::vector<arena> keep;
  for (arena& a : arenas_) {
    if (pooled[a.mem] != a.bytes / a.buffer_size) {  // some buffer is still in use
      keep.push_back(a);
      continue;
    }
    std::vector<buffer>& list = pool_[a.buffer_size];
    std::erase_if(list, [&](const buffer& b) { return b.mem == a.mem; });
    free_arena(a);
    freed += a.bytes;
  }
  arenas_.swap(keep);
  return freed;
}

struct executor::waiting {
  std::vector<flow_ref> inputs;
  std::vector<std::shared_ptr<data>> in;
  size_t missing = 0;
  // A task with many inputs (a SYNC gathering every fragment of an iteration) finds where a
  // flow goes by hash: a scan per flow was quadratic in the window (8192 fragments: 67 M
  // comparisons per iteration).
  std::unordered_multimap<uint64_t, uint32_t> where;
  static uint64_t hash(const flow_ref& f) { return f.task * 0x9e3779b97f4a7c15ull ^ f.output; }
  void index() {
    if (inputs.size() <= 16) return;
    where.reserve(inputs.size());
    for (uint32_t i = 0; i < inputs.size(); ++i) where.emplace(hash(inputs[i]), i);
  }
  // Gives `d` to every input `f` feeds; how many.
  void take(const flow_ref& f, const std::shared_ptr<data>& d) {
    auto give = [&](size_t i) {
      if (inputs[i] == f && !in[i]) {
        in[i] = d;
        --missing;
      }
    };
    if (where.empty()) {
      for (size_t i = 0; i < inputs.size(); ++i) give(i);
      return;
    }
    auto [first, last] = where.equal_range(hash(f));
    for (auto it = first; it != last; ++it) give(it->second);
  }
};

executor::executor(weft_engine_t e, options o) : e_(e), o_(o) {
  me_ = weft_engine_rank_me(e);
  n_ = weft_engine_rank_n(e);
  weft_engine_attr_t a;
  check(weft_engine_get_attr(e, &a), "get_attr");
  oversubscribed_ = a.oversubscribed != 0;
  const bool own_threads = a.progress_thread || a.comm_thread;
  if (o_.idle_yield_us == options::idle_yield_auto)
    o_.idle_yield_us = own_threads || oversubscribed_ ? 0 : 10000;
  workers_drive_ = o_.drive == options::drive_by::workers ||
                   (o_.drive == options::drive_by::automatic && !own_threads && !oversubscribed_);
  barrier_from_.reset(new std::atomic<int>[size_t(n_)]());
  can_watch_ = weft_engine_watch_peers(e, 0) == WEFT_OK;  // the MPI engine cannot
  weft_engine_set_error_handler(e, on_engine_error, this);
  check(weft_engine_register_tag(e, tag_activate, on_activate, this, sizeof(activate_msg)),
        "register ACTIVATE");
  check(weft_engine_register_tag(e, tag_get, on_get, this, sizeof(get_msg)), "register GET DATA");
  check(weft_engine_register_tag(e, tag_data, on_data, this, sizeof(data_msg)), "register DATA");
  check(weft_engine_register_tag(e, tag_barrier, on_barrier, this, 0), "register barrier");
}

executor::~executor() {
  if (can_watch_) weft_engine_watch_peers(e_, 0);
  weft_engine_set_error_handler(e_, nullptr, nullptr);
  for (weft_engine_tag_t t : {tag_activate, tag_get, tag_data, tag_barrier})
    weft_engine_deregister_tag(e_, t);
  for (arena& a : arenas_) free_arena(a);
}

void executor::posted(int rc) {
  check(rc, "post");
}

void executor::queue_post(std::function<int()> fn) {
  std::lock_guard<std::mutex> hold(posts_lock_);
  posts_.push_back(std::move(fn));
  nposts_.store(posts_.size(), std::memory_order_release);
}

// Posts refused earlier, in order; false while some are still refused.
bool executor::retry_posts() {
  while (nposts_.load(std::memory_order_acquire)) {
    std::function<int()>* fn;
    {
      std::lock_guard<std::mutex> hold(posts_lock_);
      fn = &posts_.front();  // stays put: only this loop pops, and a deque keeps its elements
    }
    const int rc = (*fn)();
    if (rc == WEFT_RETRY) return false;
    check(rc, "post");
    std::lock_guard<std::mutex> hold(posts_lock_);
    posts_.pop_front();
    nposts_.store(posts_.size(), std::memory_order_release);
  }
  return true;
}

void executor::drive() {
  // Oversubscribed: sleep until a message comes (500 us at most: the end of the run and a
  // refused post are noticed no later), where the engine can be woken by one.
  const int rc =
      oversubscribed_ ? weft_engine_progress_wait(e_, driver_wait_us) : weft_engine_progress(e_);
  if (rc < 0) check(rc, "progress");
  // Nothing done here (the engine's own thread runs the callbacks, or nothing came): let
  // the engine's and the workers' threads have the core.
  if (retry_posts() && rc == 0) std::this_thread::yield();
}

// One call of progress and the refused posts again, never waiting: a worker's turn
// between two tasks.
void executor::progress_once() {
  const int rc = weft_engine_progress(e_);
  if (rc < 0) check(rc, "progress");
  retry_posts();
}

// A worker drives the engine if no other worker is: once between tasks, or (idle) as the
// driver would, sleeping in the engine on an oversubscribed machine. The flag keeps
// retry_posts to one thread and spares the MPI engine's lock a queue of workers. False
// when another worker had the turn.
bool executor::take_turn(bool idle) {
  if (driving_.test_and_set(std::memory_order_acquire)) return false;
  {
    struct release {  // the turn ends however the call does (a failure throws)
      std::atomic_flag& f;
      ~release() { f.clear(std::memory_order_release); }
    } hold{driving_};
    idle ? drive() : progress_once();
  }
  note_finished();
  return true;
}

// After a failed run: what it left (tasks still waiting, fetches, kept outputs, refused
// posts) is dropped, so that the executor can be destroyed, or run again on a rank of its
// own (peers of a failed run are out of step with it). Returns the failure.
std::exception_ptr executor::forget_run() {
  {
    std::lock_guard<std::mutex> hold(lock_);
    waiting_.clear();
    served_.clear();
    landing_.clear();
    fetches_ = {};
    gets_in_flight_ = 0;
  }
  ready_ = {};
  watch(false);
  {
    std::lock_guard<std::mutex> hold(posts_lock_);
    posts_.clear();
    nposts_ = 0;
  }
  done_tasks_ = 0;
  outputs_kept_ = 0;
  stats_ = run_stats{};
  failed_ = false;
  return std::exchange(failure_, nullptr);
}

// Until the run's end or a worker's failure: driving the engine, or asleep while the
// workers drive it.
void executor::wait_for_end() {
  if (workers_drive_) {
    std::unique_lock<std::mutex> hold(finish_lock_);
    while (!finished() && !failed_.load()) finish_cv_.wait_for(hold, std::chrono::milliseconds(5));
    return;
  }
  while (!finished() && !failed_.load()) drive();
}

// Every local task ran, every peer has its outputs, no post waits: the run's end.
bool executor::finished() const {
  return done_tasks_.load() >= local_total_.load() && outputs_kept_.load() <= 0 &&
         nposts_.load(std::memory_order_acquire) == 0;
}

// Wakes the thread in run() when the workers drive and the run is over.
void executor::note_finished() {
  if (!workers_drive_ || !finished()) return;
  std::lock_guard<std::mutex> hold(finish_lock_);
  finish_cv_.notify_all();
}

void executor::make_ready(task_key t) {
  {
    std::lock_guard<std::mutex> hold(ready_lock_);
    ready_.push({g().priority(t), t});
  }
  ready_cv_.notify_one();
}

void executor::satisfy(task_key s, const flow_ref& f, const std::shared_ptr<data>& d) {
  bool ready = false;
  {
    std::lock_guard<std::mutex> hold(lock_);
    auto it = waiting_.find(s);
    if (it == waiting_.end()) {
      char what[128];
      std::snprintf(what, sizeof what,
                    "weft::exec: task %#llx's output %u goes to task %#llx, which is not waiting "
                    "(already run, or not one of this rank's tasks)",
                    static_cast<unsigned long long>(f.task), f.output,
                    static_cast<unsigned long long>(s));
      throw std::runtime_error(what);
    }
    waiting& w = *it->second;
    w.take(f, d);
    ready = w.missing == 0;
  }
  if (ready) make_ready(s);
}

// A worker's loop; an exception (an engine error, a graph that names a task twice) ends
// the run, and run() throws it once every worker has stopped.
void executor::worker_loop() {
  try {
    work();
  } catch (...) {
    fail(std::current_exception());
  }
}

void executor::fail(std::exception_ptr e) {
  std::lock_guard<std::mutex> hold(finish_lock_);
  if (!failure_) failure_ = e;
  failed_.store(true);
  finish_cv_.notify_all();
}

// No ready task: yield, not sleep, for at least 256 yields and o_.idle_yield_us after the
// last task: a task released sooner costs no wake-up (a futex and a context switch each).
// The yields alone took 0.1 ms when the core had nothing else to run, less than a flow's
// latency in a busy transfer (0.4 ms at 64 KiB), so without the engine's threads the
// worker slept between flows, and some task ping-pongs over several sizes fell to half the
// bandwidth from one size on (docs/engine.md). Past that, a worker whose turn it is
// drives the engine as the driver would (and sleeps in it on an oversubscribed machine);
// the others sleep until a task comes. Called with ready_lock_ held; returns with it free.
void executor::idle(std::unique_lock<std::mutex>& hold, idle_state& st) {
  const double now = now_s();
  if (st.since == 0) st.since = now;
  if (++st.yields < 256 || now - st.since < o_.idle_yield_us * 1e-6) {
    hold.unlock();
    std::this_thread::yield();
    return;
  }
  if (workers_drive_) {
    hold.unlock();
    if (take_turn(true)) return;
    hold.lock();
  }
  ready_cv_.wait_for(hold, std::chrono::milliseconds(1));
  hold.unlock();
  st.yields = 0;  // woken without a task: 256 yields again before the next sleep
}

void executor::work() {
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<std::shared_ptr<data>> outs;
  idle_state st;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (workers_drive_) take_turn(false);  // between two tasks, and each idle turn
    task_key t;
    {
      std::unique_lock<std::mutex> hold(ready_lock_);
      if (ready_.empty()) {
        idle(hold, st);
        continue;
      }
      st = idle_state{};
      t = ready_.top().second;
      ready_.pop();
    }
    std::unique_ptr<waiting> w;
    {
      std::lock_guard<std::mutex> hold(lock_);
      auto it = waiting_.find(t);
      w = std::move(it->second);
      waiting_.erase(it);
    }
    in.clear();
    for (auto& d : w->in) in.push_back(d ? d->ptr : nullptr);
    const uint32_t no = g().noutputs(t);
    outs.clear();
    out.clear();
    for (uint32_t o = 0; o < no; ++o) {
      const size_t size = g().output_size(t, o);
      outs.push_back(std::make_shared<data>(this, size));
      outs.back()->key = {t, o};
      out.push_back(size ? outs.back()->ptr : nullptr);
    }
    g().run(t, in, out);
    w.reset();  // inputs released
    complete(t, outs);
  }
}

// A finished task's outputs: local successors now, remote ranks told (ACTIVATE).
void executor::complete(task_key t, std::vector<std::shared_ptr<data>>& outs) {
  thread_local std::vector<task_key> succ;  // scratch, reused by this thread
  thread_local std::vector<int> ranks;
  for (uint32_t o = 0; o < outs.size(); ++o) {
    const std::shared_ptr<data>& d = outs[o];
    succ.clear();  // a graph appends
    g().successors(t, o, succ);
    ranks.clear();
    for (task_key s : succ) {
      const int r = g().rank_of(s);
      if (r == me_)
        satisfy(s, {t, o}, d->size ? d : nullptr);
      else if (std::find(ranks.begin(), ranks.end(), r) == ranks.end())
        ranks.push_back(r);
    }
    if (ranks.empty()) continue;
    if (d->size) {
      std::lock_guard<std::mutex> hold(lock_);
      d->remote_left = int(ranks.size());
      served_[{t, o}] = d;
      outputs_kept_.fetch_add(1);
    }
    activate_msg m{};
    m.task = t;
    m.output = o;
    m.size = d->size;
    std::memcpy(m.region, d->buf.packed, sizeof(m.region));
    for (int r : ranks) {
      m.sent_at = now_s();
      post([this, r, m] { return weft_engine_post_am(e_, tag_activate, r, &m, sizeof(m)); });
    }
  }
  done_tasks_.fetch_add(1);
  note_finished();
}

int executor::on_activate(weft_engine_t, weft_engine_tag_t, void* msg, size_t, int src,
                          void* self) {
  auto* x = static_cast<executor*>(self);
  activate_msg m;
  std::memcpy(&m, msg, sizeof(m));
  thread_local std::vector<task_key> succ;
  succ.clear();
  x->g().successors(m.task, m.output, succ);
  int prio = INT32_MIN;
  for (task_key s : succ)
    if (x->g().rank_of(s) == x->me_) {
      if (!m.size) x->satisfy(s, {m.task, m.output}, nullptr);
      prio = std::max(prio, x->g().priority(s));
    }
  if (!m.size) return 0;
  {
    std::lock_guard<std::mutex> hold(x->lock_);
    x->fetches_.push({prio, x->fetch_order_++, {m.task, m.output}, src, m.size, m.sent_at});
    // The owner's packed region rides in the GET DATA's answer: kept by fetch id.
  }
  x->pump_gets();
  return 0;
}

// Starts the highest-priority fetches while fewer than max_gets are in flight.
void executor::pump_gets() {
  std::vector<std::pair<int, get_msg>> out;
  {
    std::lock_guard<std::mutex> hold(lock_);
    while (gets_in_flight_ < o_.max_gets && !fetches_.empty()) {
      fetch f = fetches_.top();
      fetches_.pop();
      auto d = std::make_shared<data>(this, f.size);
      d->key = f.f;
      d->sent_at = f.sent_at;
      get_msg m{};
      m.task = f.f.task;
      m.output = f.f.output;
      m.fetch_id = next_fetch_id_++;
      std::memcpy(m.dest, d->buf.packed, sizeof(m.dest));
      m.dest_offset = d->buf.offset;
      landing_[m.fetch_id] = d;
      ++gets_in_flight_;
      out.push_back({f.owner, m});
    }
  }
  for (auto& [owner, m] : out)
    post([this, owner = owner, m = m] {
      return weft_engine_post_am(e_, tag_get, owner, &m, sizeof(m));
    });
}

int executor::on_get(weft_engine_t, weft_engine_tag_t, void* msg, size_t, int src, void* self) {
  auto* x = static_cast<executor*>(self);
  get_msg m;
  std::memcpy(&m, msg, sizeof(m));
  std::shared_ptr<data> d;
  {
    std::lock_guard<std::mutex> hold(x->lock_);
    auto it = x->served_.find({m.task, m.output});
    if (it == x->served_.end())
      throw std::runtime_error("weft::exec: GET DATA for an unknown output");
    d = it->second;
  }
  data_msg reply{uint32_t(m.fetch_id)};
  data* raw = d.get();  // alive in served_ until on_put_sent
  x->post([x, raw, m, reply, src] {
    return weft_engine_post_put(x->e_, raw->buf.mem, ptrdiff_t(raw->buf.offset), m.dest,
                                ptrdiff_t(m.dest_offset), raw->size, src, on_put_sent, raw,
                                tag_data, &reply, sizeof(reply));
  });
  return 0;
}

// The owner's put of an output finished: one peer fewer to serve (l_data: the output,
// alive in served_ until its last peer has it).
int executor::on_put_sent(weft_engine_t, weft_engine_mem_t, ptrdiff_t, const void*, ptrdiff_t,
                          size_t, int, void* out) {
  auto* d = static_cast<data*>(out);
  executor* x = d->owner;
  std::shared_ptr<data> last;  // freed (and deregistered) outside the lock
  {
    std::lock_guard<std::mutex> hold(x->lock_);
    if (--d->remote_left > 0) return 0;
    auto it = x->served_.find({d->key.task, d->key.output});
    last = std::move(it->second);
    x->served_.erase(it);
  }
  last.reset();
  x->outputs_kept_.fetch_sub(1);
  return 0;
}

int executor::on_data(weft_engine_t, weft_engine_tag_t, void* msg, size_t, int, void* self) {
  auto* x = static_cast<executor*>(self);
  data_msg m;
  std::memcpy(&m, msg, sizeof(m));
  std::shared_ptr<data> d;
  {
    std::lock_guard<std::mutex> hold(x->lock_);
    auto it = x->landing_.find(m.fetch_id);
    if (it == x->landing_.end()) throw std::runtime_error("weft::exec: DATA for an unknown fetch");
    d = it->second;
    x->landing_.erase(it);
    --x->gets_in_flight_;
    ++x->stats_.flows_remote;
    x->stats_.bytes_fetched += d->size;
    if (x->o_.record_latency) x->stats_.flow_latency_us.push_back((now_s() - d->sent_at) * 1e6);
  }
  thread_local std::vector<task_key> succ;
  succ.clear();
  x->g().successors(d->key.task, d->key.output, succ);
  for (task_key s : succ)
    if (x->g().rank_of(s) == x->me_) x->satisfy(s, d->key, d);
  x->pump_gets();
  return 0;
}

int executor::on_barrier(weft_engine_t, weft_engine_tag_t, void*, size_t, int src, void* self) {
  auto* x = static_cast<executor*>(self);
  if (src >= 0 && src < x->n_) x->barrier_from_[size_t(src)].fetch_add(1);
  x->barrier_.fetch_add(1);
  return 0;
}

// Every rank's barrier messages of this round (they count across runs). A failure seen
// meanwhile (a peer that died before its message came) ends the wait: thrown.
void executor::barrier() {
  const int round = barrier_round_.fetch_add(1) + 1;
  for (int r = 0; r < n_; ++r)
    post([this, r] { return weft_engine_post_am(e_, tag_barrier, r, nullptr, 0); });
  while (barrier_.load() < round * n_) {
    if (failed_.load()) std::rethrow_exception(forget_run());
    drive();
  }
}

// An engine error (a failed operation, or a peer the engine saw die): the run's end, with
// the error. Except a peer that dies in the run's last barrier after its message of it
// came: it has done its part, and may have left.
void executor::on_engine_error(weft_engine_t, int rank, const char* what, void* self) {
  auto* x = static_cast<executor*>(self);
  if (x->ending_.load() && rank >= 0 && rank < x->n_ &&
      x->barrier_from_[size_t(rank)].load() >= x->barrier_round_.load())
    return;
  x->fail(std::make_exception_ptr(std::runtime_error("weft::exec: rank " + std::to_string(rank) +
                                                     ": " + (what ? what : "failed"))));
}

void executor::watch(bool on) {
  if (can_watch_) check(weft_engine_watch_peers(e_, on ? 1 : 0), "watch_peers");
  if (!on) ending_ = false;
}

run_stats executor::run(graph& graph_of_run) {
  gp_ = &graph_of_run;
  std::vector<task_key> local;
  g().local_tasks(me_, local);
  local_total_ = local.size();
  std::vector<task_key> ready;
  {
    std::lock_guard<std::mutex> hold(lock_);
    for (task_key t : local) {
      auto w = std::make_unique<waiting>();
      gp_->inputs(t, w->inputs);
      w->in.resize(w->inputs.size());
      w->missing = w->inputs.size();
      w->index();
      if (!w->missing) ready.push_back(t);
      waiting_[t] = std::move(w);
    }
  }
  watch(true);  // from here every peer is needed until its last barrier message comes
  barrier();
  stop_ = false;
  for (int i = 0; i < o_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  const double t0 = now_s();
  for (task_key t : ready) make_ready(t);
  try {
    wait_for_end();
  } catch (...) {
    fail(std::current_exception());
  }
  stats_.seconds = now_s() - t0;
  stop_ = true;
  ready_cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  if (failed_.load()) std::rethrow_exception(forget_run());
  ending_ = true;
  barrier();
  watch(false);
  stats_.tasks = done_tasks_.load();
  done_tasks_ = 0;
  run_stats s = std::move(stats_);
  stats_ = run_stats{};
  return s;
}

}  // namespace weft::exec
