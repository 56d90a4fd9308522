// SPDX-License-Identifier: BSD-3-Clause
// A minimal dataflow executor on the communication engine (weft/engine.h), as much task
// machinery as the task benchmarks and a tiled factorisation need, not a runtime. The
// application describes its task graph symbolically, the same on every rank (PaRSEC's
// parameterised task graph): where each task runs, its priority, its input flows (an
// output of a predecessor) and the successors of each output. Tasks run on worker threads.
// A finished task's outputs go to local successors directly; for a remote successor the
// flow travels as the seed's Figure 1 draws it: ACTIVATE to the successor's rank (the
// output's size and packed region), GET DATA back when the successor's rank decides by
// priority to fetch it (at most `max_gets` fetches in flight per rank; the rest wait,
// highest priority first), then the owner's put with a remote callback (DATA) that
// satisfies the successors. One output fetched by a rank serves all its successors there
// (multicast), and is kept at its owner until every rank that needs it has it. The engine
// is driven either by the workers between their tasks or by the thread that called run()
// (options::drive).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "weft/engine.h"

namespace weft::exec {

using task_key = uint64_t;

// An output of a task, as a successor names its input.
struct flow_ref {
  task_key task;
  uint32_t output;
  bool operator==(const flow_ref& o) const { return task == o.task && output == o.output; }
};

// The application's task graph, the same on every rank.
class graph {
 public:
  virtual ~graph() = default;
  // The tasks `rank` runs.
  virtual void local_tasks(int rank, std::vector<task_key>& out) const = 0;
  virtual int rank_of(task_key t) const = 0;
  // Higher first, among ready tasks and among the fetches a rank waits to start.
  virtual int priority(task_key) const { return 0; }
  // The task's inputs, in the order run() receives them.
  virtual void inputs(task_key t, std::vector<flow_ref>& out) const = 0;
  virtual uint32_t noutputs(task_key t) const = 0;
  // Bytes of an output (0: a control flow, no data).
  virtual size_t output_size(task_key t, uint32_t output) const = 0;
  // The tasks that take (t, output) as an input, appended to `out`.
  virtual void successors(task_key t, uint32_t output, std::vector<task_key>& out) const = 0;
  // Runs the task on a worker thread: inputs as inputs() listed them, outputs allocated by
  // the executor (output_size bytes each).
  virtual void run(task_key t, const std::vector<const void*>& in,
                   const std::vector<void*>& out) = 0;
};

struct options {
  int workers = 1;
  size_t max_gets = 8;         // fetches in flight per rank
  bool record_latency = true;  // ACTIVATE sent -> data arrived, per remote flow
  // A worker without a task yields at least 256 times and this long before it sleeps
  // (woken by the next task); idle_yield_auto: 10 ms when the engine runs no thread of its
  // own (the program's threads drive it, and a task released while its worker slept waits
  // for a wake-up), 0 when it does (its threads need the cores: the 256 yields alone).
  // On an oversubscribed machine (the engine's attribute) the auto value is 0 too, and the
  // driver sleeps in weft_engine_progress_wait instead of yielding: a thread that yields in
  // a loop there takes as much of the core as a computing one. Measured: docs/engine.md,
  // docs/cholesky.md.
  static constexpr uint32_t idle_yield_auto = UINT32_MAX;
  uint32_t idle_yield_us = idle_yield_auto;
  // Who drives the engine (progress, callbacks, refused posts again) while tasks run.
  // workers: each worker after each task and while it waits for one, one worker at a time
  // (a worker that finds another driving goes on); the program's thread sleeps until the
  // run ends. A flow is then served between two tasks of its rank instead of when the
  // driving thread next gets the core (2.5 ms at the median on 2 cores, the scheduler's
  // tick). driver: the thread that called run(). automatic: workers when the engine runs no
  // thread of its own on a machine that is not oversubscribed, else the driver (there it
  // sleeps in the engine, and a message wakes it while the rank's worker waits for a core).
  // Measured: docs/cholesky.md.
  enum class drive_by { automatic, workers, driver };
  drive_by drive = drive_by::automatic;
};

// options::drive from its name on a command line ("auto", "workers", "driver"); false for
// any other name.
inline bool drive_from_name(const std::string& name, options::drive_by& out) {
  using d = options::drive_by;
  if (name == "auto")
    out = d::automatic;
  else if (name == "workers")
    out = d::workers;
  else if (name == "driver")
    out = d::driver;
  else
    return false;
  return true;
}

struct run_stats {
  double seconds = 0;
  uint64_t tasks = 0, flows_remote = 0, bytes_fetched = 0;
  std::vector<double> flow_latency_us;  // one per remote data flow fetched here
};

class executor {
 public:
  // The executor registers the engine's tags 32..35 for its life; one executor runs graph
  // after graph (its barriers count across runs, so a fast rank's next run never meets a
  // slow rank's last).
  executor(weft_engine_t e, options o);
  ~executor();
  // Runs every local task of `g`; collective (every rank calls it with the same graph).
  // Throws on an engine error or what a task threw, once every worker has stopped; the
  // run's remains are dropped (see forget_run). A peer that dies during the run is such
  // an error, naming it (the Weft engine watches its peers while a run needs them: see
  // weft_engine_watch_peers), not a wait for its flows that never ends. The executor is
  // the engine's error handler for its life.
  run_stats run(graph& g);
  // Between runs: gives back the buffers kept for reuse (each arena whose buffers are all
  // back in the pool is deregistered and freed); how many bytes. For a runtime that moves on
  // to other flow sizes: the pool keeps each size's buffers until the executor goes.
  size_t trim();
  // Whether the workers drive the engine (options::drive decided).
  bool workers_drive() const { return workers_drive_; }

 private:
  struct data;
  struct waiting;
  struct buffer {
    void* ptr = nullptr;
    size_t size = 0;
    weft_engine_mem_t mem = nullptr;  // its arena's
    size_t offset = 0;                // in the arena
    unsigned char packed[WEFT_ENGINE_MEM_PACKED] = {};
  };
  struct arena {
    void* base = nullptr;
    size_t bytes = 0;
    size_t buffer_size = 0;  // the size of every buffer carved from it
    bool allocated = false;  // by weft_engine_alloc_memory (else registered huge pages)
    weft_engine_mem_t mem = nullptr;
    unsigned char packed[WEFT_ENGINE_MEM_PACKED] = {};
  };
  static constexpr size_t mapped_max = size_t(256) << 10;
  void make_arena(arena& a);
  void free_arena(arena& a);
  buffer take_buffer(size_t n);
  void give_buffer(const buffer& b);
  void complete(task_key t, std::vector<std::shared_ptr<data>>& outs);
  void satisfy(task_key s, const flow_ref& f, const std::shared_ptr<data>& d);
  void make_ready(task_key t);
  struct idle_state {
    double since = 0;  // when the ready queue was first found empty (0: a task ran)
    int yields = 0;    // ... and the yields since
  };
  void worker_loop();
  void work();
  void idle(std::unique_lock<std::mutex>& hold, idle_state& st);
  void fail(std::exception_ptr e);
  void wait_for_end();
  std::exception_ptr forget_run();
  void pump_gets();
  // Posts now when nothing refused waits (no allocation, no lock); a refused post, and
  // every post behind one, waits in posts_ for drive() to retry, in order.
  template <typename Fn>
  void post(Fn&& fn) {
    if (nposts_.load(std::memory_order_acquire) == 0) {
      const int rc = fn();
      if (rc != WEFT_RETRY) return posted(rc);
    }
    queue_post(std::function<int()>(std::forward<Fn>(fn)));
  }
  void posted(int rc);  // throws on an error code
  void queue_post(std::function<int()> fn);
  bool retry_posts();
  void drive();
  void progress_once();
  bool take_turn(bool idle);
  bool finished() const;
  void note_finished();
  static int on_activate(weft_engine_t, weft_engine_tag_t, void*, size_t, int, void*);
  static int on_get(weft_engine_t, weft_engine_tag_t, void*, size_t, int, void*);
  static int on_data(weft_engine_t, weft_engine_tag_t, void*, size_t, int, void*);
  static int on_barrier(weft_engine_t, weft_engine_tag_t, void*, size_t, int, void*);
  static int on_put_sent(weft_engine_t, weft_engine_mem_t, ptrdiff_t, const void*, ptrdiff_t,
                         size_t, int, void*);

  void barrier();

  weft_engine_t e_;
  graph* gp_ = nullptr;  // the graph of the run under way
  graph& g() const { return *gp_; }
  options o_;
  bool oversubscribed_ = false;  // the engine's attribute: idle threads sleep
  bool workers_drive_ = false;   // options::drive decided
  std::atomic_flag driving_;     // a worker's turn at driving the engine
  std::mutex finish_lock_;       // the run's end, for the thread that waits for it
  std::condition_variable finish_cv_;
  std::exception_ptr failure_;  // a worker's, or the driver's (under finish_lock_)
  std::atomic<bool> failed_{false};
  int me_, n_;

  std::mutex lock_;  // tasks, outputs, fetches
  std::unordered_map<task_key, std::unique_ptr<waiting>> waiting_;
  std::map<std::pair<task_key, uint32_t>, std::shared_ptr<data>> served_;  // kept for peers
  struct fetch {
    int priority;
    uint64_t order;
    flow_ref f;
    int owner;
    size_t size;
    double sent_at;
    bool operator<(const fetch& o) const {
      return priority != o.priority ? priority < o.priority : order > o.order;
    }
  };
  std::priority_queue<fetch> fetches_;
  uint64_t fetch_order_ = 0;
  size_t gets_in_flight_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<data>> landing_;  // fetch id -> buffer
  uint32_t next_fetch_id_ = 1;  // wraps: DATA carries 4 bytes (data_msg)

  std::mutex pool_lock_;
  std::unordered_map<size_t, std::vector<buffer>> pool_;  // free buffers by size
  std::vector<arena> arenas_;

  std::mutex ready_lock_;
  std::condition_variable ready_cv_;
  std::priority_queue<std::pair<int, task_key>> ready_;

  std::mutex posts_lock_;
  std::deque<std::function<int()>> posts_;  // refused with WEFT_RETRY: again from drive()
  std::atomic<size_t> nposts_{0};           // posts_.size(), read without the lock

  std::atomic<uint64_t> done_tasks_{0}, local_total_{0};
  std::atomic<int64_t> outputs_kept_{0};  // outputs peers still have to fetch
  std::atomic<int> barrier_{0};
  std::atomic<int> barrier_round_{0};
  std::unique_ptr<std::atomic<int>[]> barrier_from_;  // barrier messages by rank
  // Peers watched for death during a run (the Weft engine can; the MPI engine cannot, and
  // a stock MPI ends the job itself). ending_: in the run's last barrier, where a peer
  // whose message of it came may leave.
  bool can_watch_ = false;
  std::atomic<bool> ending_{false};
  static void on_engine_error(weft_engine_t, int rank, const char* what, void* self);
  void watch(bool on);
  std::atomic<bool> stop_{false};
  run_stats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace weft::exec
